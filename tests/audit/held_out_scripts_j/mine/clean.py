"""Mutual information neural estimation at a tiny size, written after Belghazi, Baratin,
Rajeswar, Ozair, Bengio, Courville and Hjelm, "Mutual Information Neural Estimation" (ICML 2018,
arXiv:1801.04062), algorithm 1 and section 3.2 (the Donsker-Varadhan lower bound
I(X; Z) >= E_P[T] - log E_{P_X x P_Z}[e^T], whose minibatch gradient is biased; the correction
replaces the denominator E_B[e^T] of the gradient of the log term by an exponential moving average
over minibatches, treated as a constant), with gtegner/mine-pytorch
(https://github.com/gtegner/mine-pytorch, mine/models/mine.py: ema, ema_loss, which takes
t_exp = exp(logsumexp(t_marg) - log n).detach() and starts the running mean from it, then
ema(t_exp, alpha, running_mean.item()); EMALoss, whose backward divides the gradient of the mean of
e^T by the running mean; Mine.forward, which draws the marginal samples by shuffling z in the
batch; Mine.optimize with Adam) and sungyubkim/MINE-Mutual-Information-Neural-Estimation-
(https://github.com/sungyubkim/MINE-Mutual-Information-Neural-Estimation-, learn_mine: loss =
-(mean(t) - (1 / ma_et).detach() * mean(et))). The same gradient is written here without a custom
autograd function: the loss -(mean T_joint - E_B[e^T_marginal] / m), with m the moving average, a
number. Correlated Gaussians made in the script, whose true mutual information is known. As
published: clean."""

import argparse
import math

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--dim", type=int, default=2)
parser.add_argument("--rho", type=float, default=0.8)
parser.add_argument("--steps", type=int, default=150)
parser.add_argument("--batch-size", type=int, default=128)
parser.add_argument("--hidden-dim", type=int, default=64)
parser.add_argument("--alpha", type=float, default=0.01, help="rate of the moving average")
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

true_mi = -0.5 * args.dim * math.log(1 - args.rho ** 2)


def sample_joint(n):
    """x ~ N(0, I), z = rho * x + sqrt(1 - rho^2) * noise, coordinate by coordinate."""
    x = torch.randn(n, args.dim)
    z = args.rho * x + math.sqrt(1 - args.rho ** 2) * torch.randn(n, args.dim)
    return x, z


class StatisticsNetwork(nn.Module):
    """T_theta(x, z), an MLP on the concatenated pair."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2 * args.dim, args.hidden_dim), nn.ReLU(),
                                 nn.Linear(args.hidden_dim, args.hidden_dim), nn.ReLU(),
                                 nn.Linear(args.hidden_dim, 1))

    def forward(self, x, z):
        return self.net(torch.cat([x, z], dim=-1))


def ema(value, alpha, past):
    return alpha * value + (1.0 - alpha) * past


def batch_exp_mean(t):
    """E_B[e^T] through logsumexp, as a scalar."""
    return torch.exp(torch.logsumexp(t, 0) - math.log(t.shape[0])).squeeze()


statistics = StatisticsNetwork()
optimizer = torch.optim.Adam(statistics.parameters(), lr=args.lr)
running_mean = None
for step in range(args.steps):
    x, z = sample_joint(args.batch_size)
    z_marginal = z[torch.randperm(args.batch_size)]
    t_joint = statistics(x, z).mean()
    t_marginal = statistics(x, z_marginal)
    exp_mean = batch_exp_mean(t_marginal)
    t_exp = exp_mean.detach()
    denominator = t_exp if running_mean is None else ema(t_exp, args.alpha, running_mean)
    running_mean = denominator.item()
    # bias-corrected: the gradient of log E_B[e^T] with the moving average as its denominator
    loss = -(t_joint - exp_mean / denominator)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    mi_lower_bound = t_joint.item() - math.log(exp_mean.item())
    if step % 10 == 0:
        print(f"step {step} mi bound {mi_lower_bound:.4f} running mean {running_mean:.4f}")

with torch.no_grad():
    x, z = sample_joint(4096)
    t_marginal = statistics(x, z[torch.randperm(4096)])
    estimate = statistics(x, z).mean() - torch.log(batch_exp_mean(t_marginal))
print(f"estimated mutual information {estimate.item():.4f}, true {true_mi:.4f}")

if args.out:
    torch.save({"statistics": statistics.state_dict(),
                "running_mean": torch.tensor(running_mean)}, args.out)
