"""PonderNet: a GRU step function that learns how many steps to ponder, on the parity task.

Paper: Andrea Banino, Jan Balaguer and Charles Blundell, "PonderNet: Learning to Ponder",
ICML 2021 Workshop on Automated Machine Learning, arXiv:2107.05407.
Reference implementations: labmlai/annotated_deep_learning_paper_implementations,
labml_nn/adaptive_computation/ponder_net/__init__.py (ParityPonderGRU: a GRUCell applied to the
same input at every step, an output head and a sigmoid halting head on the state;
ReconstructionLoss: the task loss of every step weighted by its halting probability p_n;
RegularizationLoss: KL divergence of p_n to a truncated geometric prior p_G(lambda_p)) and
ponder_net/experiment.py (Configs.step: L = L_rec + beta * L_reg, backward, clip_grad_norm_,
Adam step), with the parity data of labml_nn/adaptive_computation/parity.py (ParityDataset);
jankrepl/mildlyoverfitted, github_adventures/pondernet/utils.py (PonderNet, ReconstructionLoss,
RegularizationLoss) does the same.

Each input is a vector of 8 entries, a random number of which are +1 or -1 and the rest 0;
the target is the parity of the number of +1 entries. Starting from h_1 = GRU(x, 0), each of the
N = 8 pondering steps reads a prediction y_n and a halting probability lambda_n from h_n
(lambda_N = 1), then h_{n+1} = GRU(x, h_n). The unconditioned halting distribution
p_n = lambda_n * prod_{j<n} (1 - lambda_j) weights the binary cross-entropy of every step's
prediction (the expected task loss over the halting step), and beta * KL(p || p_G(0.2)) is
added, with the geometric prior truncated to N steps and renormalised. The state is carried
through all steps with its gradient, and p keeps its gradient in both terms, so the loss
trains the GRU, the output head and the halting head. One Adam optimizer over the whole model,
gradient norm clipped to 1 after backward, 60 updates on fresh batches of 64; halting is
sampled (Bernoulli on lambda_n) only to report the accuracy.
As published: clean.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--n_elems", type=int, default=8)
parser.add_argument("--n_hidden", type=int, default=32)
parser.add_argument("--max_steps", type=int, default=8)
parser.add_argument("--batch", type=int, default=64)
parser.add_argument("--updates", type=int, default=60)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--lambda_p", type=float, default=0.2)
parser.add_argument("--beta", type=float, default=0.01)
parser.add_argument("--grad_norm_clip", type=float, default=1.0)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)


def parity_batch(batch, n_elems):
    x = torch.zeros(batch, n_elems)
    n_non_zero = torch.randint(1, n_elems + 1, (batch,))
    signs = torch.randint(0, 2, (batch, n_elems)).float() * 2 - 1
    keep = torch.arange(n_elems)[None, :] < n_non_zero[:, None]
    x[keep] = signs[keep]
    perm = torch.rand(batch, n_elems).argsort(1)
    x = torch.gather(x, 1, perm)
    y = (x == 1.0).sum(1) % 2
    return x, y.float()


class ParityPonderGRU(nn.Module):
    def __init__(self, n_elems, n_hidden, max_steps):
        super().__init__()
        self.max_steps = max_steps
        self.n_hidden = n_hidden
        self.gru = nn.GRUCell(n_elems, n_hidden)
        self.output_layer = nn.Linear(n_hidden, 1)
        self.lambda_layer = nn.Linear(n_hidden, 1)

    def forward(self, x):
        batch = x.shape[0]
        h = self.gru(x, x.new_zeros(batch, self.n_hidden))
        un_halted_prob = x.new_ones(batch)
        halted = x.new_zeros(batch)
        y_m = x.new_zeros(batch)
        p, y_hat = [], []
        for n in range(1, self.max_steps + 1):
            if n == self.max_steps:
                lambda_n = x.new_ones(batch)
            else:
                lambda_n = torch.sigmoid(self.lambda_layer(h))[:, 0]
            y_n = self.output_layer(h)[:, 0]
            p_n = un_halted_prob * lambda_n
            un_halted_prob = un_halted_prob * (1 - lambda_n)
            # sampled halting, used only for the reported prediction
            halt = torch.bernoulli(lambda_n) * (1 - halted)
            y_m = y_m * (1 - halt) + y_n * halt
            halted = halted + halt
            p.append(p_n)
            y_hat.append(y_n)
            h = self.gru(x, h)
        return torch.stack(p), torch.stack(y_hat), y_m


class ReconstructionLoss(nn.Module):
    """sum_n p_n * L(y, y_hat_n), averaged over the batch."""

    def forward(self, p, y_hat, y):
        total = p.new_zeros(())
        for n in range(p.shape[0]):
            step_loss = F.binary_cross_entropy_with_logits(y_hat[n], y, reduction="none")
            total = total + (p[n] * step_loss).mean()
        return total


class RegularizationLoss(nn.Module):
    """KL(p || p_G(lambda_p)) with the geometric prior truncated to max_steps."""

    def __init__(self, lambda_p, max_steps):
        super().__init__()
        k = torch.arange(max_steps, dtype=torch.float32)
        p_g = lambda_p * (1 - lambda_p) ** k
        self.register_buffer("p_g", p_g / p_g.sum())

    def forward(self, p):
        p = p.transpose(0, 1)
        p_g = self.p_g[None, :p.shape[1]].expand_as(p)
        return F.kl_div(p.clamp_min(1e-10).log(), p_g, reduction="batchmean")


model = ParityPonderGRU(args.n_elems, args.n_hidden, args.max_steps)
loss_rec = ReconstructionLoss()
loss_reg = RegularizationLoss(args.lambda_p, args.max_steps)
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

for update in range(args.updates):
    x, y = parity_batch(args.batch, args.n_elems)
    p, y_hat, y_m = model(x)
    rec = loss_rec(p, y_hat, y)
    reg = loss_reg(p)
    loss = rec + args.beta * reg

    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=args.grad_norm_clip)
    optimizer.step()

    if update % 15 == 0 or update == args.updates - 1:
        with torch.no_grad():
            steps = torch.arange(1, p.shape[0] + 1, dtype=p.dtype)
            expected_steps = (p * steps[:, None]).sum(0).mean()
            acc = ((y_m > 0).float() == y).float().mean()
        print(f"update {update:3d}  loss {loss.item():.4f}  rec {rec.item():.4f}  "
              f"kl {reg.item():.4f}  E[steps] {expected_steps.item():.2f}  acc {acc.item():.3f}")

if args.out:
    torch.save({"model": model.state_dict()}, args.out)
