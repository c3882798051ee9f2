"""K-FAC: Kronecker-factored approximate curvature for a small MLP regression.

Paper: James Martens and Roger Grosse, "Optimizing Neural Networks with Kronecker-factored
Approximate Curvature", ICML 2015, arXiv:1503.05671.
Reference implementation: alecwangcq/KFAC-Pytorch, optimizers/kfac.py (KFACOptimizer:
_prepare_model registers a forward pre-hook _save_input and a backward hook _save_grad_output on
every Linear/Conv2d; the hooks update exponential running averages m_aa, m_gg of the
activation covariance A and the output-gradient covariance G every TCov steps, from .data, i.e.
without gradient; _update_inv eigendecomposes both factors every TInv steps; _get_natural_grad
computes Q_g [(Q_g^T grad Q_a) / (d_g d_a^T + damping)] Q_a^T on the [weight | bias] matrix;
_kl_clip_and_update_grad rescales by nu = min(1, sqrt(kl_clip / (lr^2 v.g))) and copies the
result back into weight.grad and bias.grad; _step is SGD with momentum, with weight decay only
after 20 * TCov steps), utils/kfac_utils.py (ComputeCovA, ComputeCovG with batch_averaged,
update_running_stat) and main.py (train: on TCov steps the true Fisher is estimated by
backpropagating a loss on targets sampled from the model's own predictive distribution under
torch.no_grad(), with acc_stats on and retain_graph=True, then optimizer.zero_grad() clears those
gradients before loss.backward() and optimizer.step()).

The task is a 4-input, 2-output regression with a tanh MLP 4-32-32-2 and a unit-variance Gaussian
likelihood, so the loss is 0.5 * squared error and the Fisher targets are the model's outputs
plus standard normal noise. The factors start at the identity, are refreshed every TCov = 2
steps with stat_decay 0.95 and are inverted (eigendecomposed) every TInv = 10 steps.
As published: clean.
"""
import argparse
import math
import warnings

import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--steps", type=int, default=60)
parser.add_argument("--batch_size", type=int, default=64)
parser.add_argument("--hidden", type=int, default=32)
parser.add_argument("--lr", type=float, default=0.1)
parser.add_argument("--momentum", type=float, default=0.9)
parser.add_argument("--stat_decay", type=float, default=0.95)
parser.add_argument("--damping", type=float, default=1e-2)
parser.add_argument("--kl_clip", type=float, default=1e-2)
parser.add_argument("--weight_decay", type=float, default=1e-3)
parser.add_argument("--TCov", type=int, default=2)
parser.add_argument("--TInv", type=int, default=10)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)
# fc1's input needs no gradient; its full backward hook still gets grad_output
warnings.filterwarnings("ignore", message="Full backward hook is firing")


def make_data(n):
    x = torch.randn(n, 4)
    y = torch.stack([torch.sin(2 * x[:, 0]) + x[:, 1] * x[:, 2],
                     torch.cos(x[:, 3]) - 0.5 * x[:, 0] ** 2], 1)
    return x, y + 0.05 * torch.randn_like(y)


class MLP(nn.Module):
    def __init__(self, n_in, hidden, n_out):
        super().__init__()
        self.fc1 = nn.Linear(n_in, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, n_out)

    def forward(self, x):
        return self.fc3(torch.tanh(self.fc2(torch.tanh(self.fc1(x)))))


class KFACOptimizer(torch.optim.Optimizer):
    def __init__(self, model, lr, momentum, stat_decay, damping, kl_clip, weight_decay,
                 TCov, TInv, batch_averaged=True):
        defaults = dict(lr=lr, momentum=momentum, damping=damping, weight_decay=weight_decay)
        super().__init__(model.parameters(), defaults)
        self.stat_decay, self.kl_clip = stat_decay, kl_clip
        self.TCov, self.TInv, self.batch_averaged = TCov, TInv, batch_averaged
        self.steps, self.acc_stats = 0, False
        self.m_aa, self.m_gg = {}, {}
        self.Q_a, self.Q_g, self.d_a, self.d_g = {}, {}, {}, {}
        self.modules = [m for m in model.modules() if isinstance(m, nn.Linear)]
        for m in self.modules:
            m.register_forward_pre_hook(self._save_input)
            m.register_full_backward_hook(self._save_grad_output)

    def _running_average(self, store, module, new):
        with torch.no_grad():
            if module not in store:
                store[module] = torch.eye(new.size(0))
            store[module].mul_(self.stat_decay).add_(new, alpha=1 - self.stat_decay)

    def _save_input(self, module, inputs):
        if torch.is_grad_enabled() and self.steps % self.TCov == 0:
            a = inputs[0].detach()
            a = torch.cat([a, a.new_ones(a.size(0), 1)], 1)  # homogeneous coordinate for bias
            self._running_average(self.m_aa, module, a.t() @ (a / a.size(0)))

    def _save_grad_output(self, module, grad_input, grad_output):
        if self.acc_stats and self.steps % self.TCov == 0:
            g = grad_output[0].detach()
            scale = g.size(0) if self.batch_averaged else 1.0 / g.size(0)
            self._running_average(self.m_gg, module, g.t() @ (g * scale))

    def _update_inv(self, m):
        eps = 1e-10
        self.d_a[m], self.Q_a[m] = torch.linalg.eigh(self.m_aa[m])
        self.d_g[m], self.Q_g[m] = torch.linalg.eigh(self.m_gg[m])
        self.d_a[m].mul_((self.d_a[m] > eps).float())
        self.d_g[m].mul_((self.d_g[m] > eps).float())

    def _natural_grad(self, m, grad_mat, damping):
        v1 = self.Q_g[m].t() @ grad_mat @ self.Q_a[m]
        v2 = v1 / (self.d_g[m].unsqueeze(1) * self.d_a[m].unsqueeze(0) + damping)
        return self.Q_g[m] @ v2 @ self.Q_a[m].t()

    @torch.no_grad()
    def step(self, closure=None):
        group = self.param_groups[0]
        lr, damping = group["lr"], group["damping"]
        updates = {}
        for m in self.modules:
            if self.steps % self.TInv == 0:
                self._update_inv(m)
            grad_mat = torch.cat([m.weight.grad, m.bias.grad.unsqueeze(1)], 1)
            updates[m] = (grad_mat, self._natural_grad(m, grad_mat, damping))
        vg_sum = sum((v * g).sum().item() * lr ** 2 for g, v in updates.values())
        nu = min(1.0, math.sqrt(self.kl_clip / vg_sum))
        for m, (grad_mat, v) in updates.items():
            m.weight.grad.copy_(v[:, :-1] * nu)
            m.bias.grad.copy_(v[:, -1] * nu)
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                d_p = p.grad
                if group["weight_decay"] != 0 and self.steps >= 20 * self.TCov:
                    d_p = d_p.add(p, alpha=group["weight_decay"])
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = d_p.clone()
                else:
                    state["momentum_buffer"].mul_(group["momentum"]).add_(d_p)
                p.add_(state["momentum_buffer"], alpha=-group["lr"])
        self.steps += 1


x_train, y_train = make_data(args.steps * args.batch_size)
x_test, y_test = make_data(512)
model = MLP(4, args.hidden, 2)
optimizer = KFACOptimizer(model, lr=args.lr, momentum=args.momentum,
                          stat_decay=args.stat_decay, damping=args.damping,
                          kl_clip=args.kl_clip, weight_decay=args.weight_decay,
                          TCov=args.TCov, TInv=args.TInv)

for step in range(args.steps):
    i = step * args.batch_size
    x, y = x_train[i:i + args.batch_size], y_train[i:i + args.batch_size]
    optimizer.zero_grad()
    outputs = model(x)
    loss = 0.5 * (outputs - y).pow(2).sum(1).mean()
    if optimizer.steps % optimizer.TCov == 0:
        # true Fisher: targets sampled from the model's Gaussian predictive distribution
        optimizer.acc_stats = True
        sampled_y = outputs.detach() + torch.randn_like(outputs)
        loss_sample = 0.5 * (outputs - sampled_y).pow(2).sum(1).mean()
        loss_sample.backward(retain_graph=True)
        optimizer.acc_stats = False
        optimizer.zero_grad()  # clear the gradients of the Fisher pass
    loss.backward()
    optimizer.step()
    if step % 15 == 0 or step == args.steps - 1:
        print(f"step {step:3d} loss {loss.item():.4f}")

with torch.no_grad():
    test_loss = 0.5 * (model(x_test) - y_test).pow(2).sum(1).mean()
print(f"test loss {test_loss.item():.4f}")

if args.out:
    names = {m: n for n, m in model.named_modules()}
    torch.save({"model": model.state_dict(),
                "m_aa": {names[m]: t for m, t in optimizer.m_aa.items()},
                "m_gg": {names[m]: t for m, t in optimizer.m_gg.items()}}, args.out)
