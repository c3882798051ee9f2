"""Sophia-G, a clipped second-order optimizer, training a tiny next-token model, written as a
training loop after Liu, Li, Hall, Liang and Ma, "Sophia: A Scalable Stochastic Second-order
Optimizer for Language Model Pre-training" (ICLR 2024, arXiv:2305.14342): every k steps a
diagonal Hessian estimate is taken with the Gauss-Newton-Bartlett estimator, the squared
gradient of the loss on labels sampled from the model's own (fixed) predictive distribution,
and kept as an exponential moving average h; every step the gradient's moving average m is
divided by max(rho * B * h, eps) and clipped per coordinate, theta <- theta - lr * sign(m) *
min(|m| / (rho * B * h), 1), after a decoupled weight decay. With the authors' code
Liuhong99/Sophia (https://github.com/Liuhong99/Sophia; train_sophiag.py main loop: on ordinary
steps loss.backward(), clip_grad_norm_, optimizer.step() and optimizer.zero_grad(set_to_none=
True); when iter_num % hess_interval == hess_interval - 1, after that step, a forward on the
next batch, y_sample drawn from torch.distributions.Categorical(logits=logits), the
cross-entropy of the logits against y_sample backpropagated, clip_grad_norm_,
optimizer.update_hessian() and
again optimizer.zero_grad(set_to_none=True); sophia.py SophiaG.update_hessian, under
torch.no_grad(), hessian.mul_(beta2).addcmul_(grad, grad, value=1 - beta2), and
_single_tensor_sophiag: param.mul_(1 - lr * weight_decay), exp_avg.mul_(beta1).add_(grad,
alpha=1 - beta1), ratio = (exp_avg.abs() / (rho * bs * hess + 1e-15)).clamp(None, 1) and
param.addcmul_(exp_avg.sign(), ratio, value=-lr)). Here the same steps are written in the loop,
the update by hand under torch.no_grad() over the model's parameters, and the sampled labels
are one-hot vectors drawn by the Gumbel-max trick, F.gumbel_softmax(logits.detach(), hard=True),
which draws from the same categorical distribution as the reference's
Categorical(logits=logits).sample(); the sampled-label loss is the cross-entropy against them.
The data: token sequences from a random second-order Markov chain made in the script; the model
embeds the three previous tokens and predicts the next with a small MLP.
Bug: the model's gradients are not cleared after the Hessian estimate, the
model.zero_grad(set_to_none=True) that follows the EMA update of h being left out as if the
flush were only a memory saving (train_sophiag.py calls optimizer.zero_grad(set_to_none=True)
right after optimizer.update_hessian()), so the gradient of the sampled-label loss, a zero-mean
score of the model's own samples that belongs to the curvature estimate only, stays in .grad
and is added to the next step's gradient of the real loss: every k steps the momentum m takes
in a gradient on labels the model made up, noise that pushes the predictions towards whichever
labels were drawn and, on coordinates where h is small, moves them by the full clipped step."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=200)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--beta1", type=float, default=0.965)
parser.add_argument("--beta2", type=float, default=0.99)
parser.add_argument("--rho", type=float, default=0.04)
parser.add_argument("--weight-decay", type=float, default=0.1)
parser.add_argument("--hess-interval", type=int, default=10, help="k, steps between estimates")
parser.add_argument("--grad-clip", type=float, default=1.0)
parser.add_argument("--out", default=None, help="where to save the model")
args = parser.parse_args()
torch.manual_seed(args.seed)

vocab, context, emb, hidden = 12, 3, 16, 64

# a random second-order Markov chain: the next token depends on the two previous ones
transition = F.softmax(3.0 * torch.randn(vocab, vocab, vocab), -1)
n_seq, seq_len = 64, 40
seqs = torch.zeros(n_seq, seq_len, dtype=torch.long)
seqs[:, :2] = torch.randint(0, vocab, (n_seq, 2))
for t in range(2, seq_len):
    seqs[:, t] = torch.multinomial(transition[seqs[:, t - 2], seqs[:, t - 1]], 1).squeeze(1)
windows = seqs.unfold(1, context + 1, 1).reshape(-1, context + 1)


def get_batch():
    idx = torch.randint(0, len(windows), (args.batch_size,))
    return windows[idx, :context], windows[idx, context]


class NextToken(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(vocab, emb)
        self.mlp = nn.Sequential(nn.Linear(context * emb, hidden), nn.GELU(),
                                 nn.Linear(hidden, vocab))

    def forward(self, x):
        return self.mlp(self.embed(x).flatten(1))


model = NextToken()
params = list(model.parameters())
exp_avg = [torch.zeros_like(p) for p in params]
hessian = [torch.zeros_like(p) for p in params]

x, y = get_batch()
for step in range(args.steps):
    loss = F.cross_entropy(model(x), y)
    x, y = get_batch()
    loss.backward()
    nn.utils.clip_grad_norm_(params, args.grad_clip)
    with torch.no_grad():  # the clipped, preconditioned Sophia-G update
        for p, m, h in zip(params, exp_avg, hessian):
            p.mul_(1 - args.lr * args.weight_decay)
            m.mul_(args.beta1).add_(p.grad, alpha=1 - args.beta1)
            ratio = (m.abs() / (args.rho * args.batch_size * h + 1e-15)).clamp(max=1.0)
            p.addcmul_(m.sign(), ratio, value=-args.lr)
    model.zero_grad(set_to_none=True)

    if step % args.hess_interval == args.hess_interval - 1:
        # Gauss-Newton-Bartlett estimate: the gradient of the loss on sampled labels, squared
        logits = model(x)
        x, y = get_batch()
        y_sample = F.gumbel_softmax(logits.detach(), hard=True)
        sampled_loss = -(y_sample * F.log_softmax(logits, -1)).sum(-1).mean()
        sampled_loss.backward()
        nn.utils.clip_grad_norm_(params, args.grad_clip)
        with torch.no_grad():
            for p, h in zip(params, hessian):
                h.mul_(args.beta2).addcmul_(p.grad, p.grad, value=1 - args.beta2)
    if step % 40 == 0:
        print(f"step {step} loss {loss.item():.4f} "
              f"hessian {sum(h.sum() for h in hessian).item():.4f}")

if args.out:
    torch.save({"model": model.state_dict()}, args.out)
