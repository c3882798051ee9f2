"""MART, misclassification-aware adversarial training, of a tiny classifier, written after Wang,
Zou, Yi, Bailey, Ma and Gu, "Improving Adversarial Robustness Requires Revisiting Misclassified
Examples" (ICLR 2020): adversarial examples x' are found by l_inf PGD on the cross-entropy, and the
model is trained on a boosted cross-entropy at x',
BCE = -log p_y(x') - log(1 - max_{k != y} p_k(x')),
plus beta times the KL divergence KL(p(x) || p(x')) weighted, per example, by 1 - p_y(x), so that
the examples the model misclassifies get more of the robustness regulariser. With the authors'
code, YisenWang/MART (https://github.com/YisenWang/MART, mart.py mart_loss: model.eval(), x_adv
started at x_natural.detach() plus 0.001 times Gaussian noise, perturb_steps steps of size
step_size along the sign of the input gradient of F.cross_entropy(model(x_adv), y), each step
detaching x_adv and projecting it onto the eps-ball and onto [0, 1]; then model.train(),
optimizer.zero_grad() ("zero gradient"), logits of x_natural and of x_adv, new_y the most
probable wrong class from argsort of adv_probs, loss_adv = cross-entropy + nll_loss of
log(1.0001 - adv_probs) at new_y, nat_probs and true_probs from the natural logits, loss_robust
the per-example KL of nat_probs against log adv_probs times (1.0000001 - true_probs), averaged
over the batch, and loss_adv + beta * loss_robust returned; nothing after the attack is detached,
so the KL trains the model through both distributions and through the weight; train_model.py
train: optimizer.zero_grad(), mart_loss, loss.backward(), optimizer.step() with SGD, momentum and
weight decay). Here the attack takes the input gradient with loss.backward() and reads
x_adv.grad, as the evaluation attack _pgd_whitebox of train_model.py does, which also fills the
model's .grad; the optimizer.zero_grad() that mart_loss calls after the attack clears it before
the training forward. The data: points of the unit cube around four class centres, made in the
script; the model is a small MLP.
Bug: the optimizer.zero_grad() after the attack is left out, keeping only the one at the top of
the step as in train_model.py, so the parameter gradients of the perturb_steps attack backwards,
which loss_ce.backward() leaves in the model's .grad, stay there and are added to the MART
gradient: each update also descends on the cross-entropy at every PGD iterate, taken in eval mode
at inputs between x and x', perturb_steps extra cross-entropy gradients against the boosted
loss's one (mart.py mart_loss clears the gradients after the attack, before the training
forward)."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=30)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--epsilon", type=float, default=0.1)
parser.add_argument("--step-size", type=float, default=0.03)
parser.add_argument("--perturb-steps", type=int, default=5)
parser.add_argument("--beta", type=float, default=6.0, help="weight of the weighted KL term")
parser.add_argument("--out", default=None, help="where to save the model")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_train, dim, n_classes = 512, 10, 4
centres = torch.rand(n_classes, dim)
labels = torch.randint(0, n_classes, (n_train,))
data = (centres[labels] + 0.3 * torch.randn(n_train, dim)).clamp(0, 1)

model = nn.Sequential(nn.Linear(dim, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                      nn.Linear(64, n_classes))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=2e-4)

for step in range(args.steps):
    idx = torch.randint(0, n_train, (args.batch_size,))
    x_natural, y = data[idx], labels[idx]
    optimizer.zero_grad()

    # PGD on the cross-entropy, from a small random start
    model.eval()
    x_adv = x_natural.detach() + 0.001 * torch.randn(x_natural.shape)
    for _ in range(args.perturb_steps):
        x_adv.requires_grad_()
        loss_ce = F.cross_entropy(model(x_adv), y)
        loss_ce.backward()
        x_adv = x_adv.detach() + args.step_size * x_adv.grad.sign()
        x_adv = torch.min(torch.max(x_adv, x_natural - args.epsilon), x_natural + args.epsilon)
        x_adv = x_adv.clamp(0.0, 1.0)
    model.train()

    logits = model(x_natural)
    logits_adv = model(x_adv)
    adv_probs = F.softmax(logits_adv, dim=1)
    top2 = torch.argsort(adv_probs, dim=1)[:, -2:]
    new_y = torch.where(top2[:, -1] == y, top2[:, -2], top2[:, -1])
    loss_adv = F.cross_entropy(logits_adv, y) + F.nll_loss(
        torch.log(1.0001 - adv_probs + 1e-12), new_y)
    nat_probs = F.softmax(logits, dim=1)
    true_probs = nat_probs.gather(1, y.unsqueeze(1)).squeeze(1)
    kl = (nat_probs * (torch.log(nat_probs + 1e-12) - torch.log(adv_probs + 1e-12))).sum(1)
    loss_robust = (kl * (1.0000001 - true_probs)).mean()
    loss = loss_adv + args.beta * loss_robust

    loss.backward()
    optimizer.step()
    if step % 10 == 0:
        acc = (logits_adv.argmax(1) == y).float().mean().item()
        print(f"step {step} loss_adv {loss_adv.item():.3f} loss_robust {loss_robust.item():.4f}"
              f" adv acc {acc:.2f}")

if args.out:
    torch.save({"model": model.state_dict()}, args.out)
