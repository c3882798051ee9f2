"""Noise conditional score networks at a tiny size, written after Song and Ermon, "Generative
Modeling by Estimating Gradients of the Data Distribution" (NeurIPS 2019, arXiv:1907.05600),
sections 4.1-4.3 (a score network s_theta(x, sigma) trained by denoising score matching over a
geometric sequence of noise levels, each level's loss weighted by sigma^2, and annealed Langevin
dynamics from the largest level to the smallest), and its follow-up Song and Ermon, "Improved
Techniques for Training Score-Based Generative Models" (NeurIPS 2020, arXiv:2006.09011),
techniques 3 and 5 (the network conditioned on the noise by s_theta(x) / sigma, and an
exponential moving average of the weights for sampling), with ermongroup/ncsnv2
(https://github.com/ermongroup/ncsnv2, losses/dsm.py anneal_dsm_score_estimation: labels drawn
at random, perturbed = x + sigma z, target = -noise / sigma^2, the loss 1/2 ||s - target||^2
times sigma^anneal_power; models/ncsnv2.py NCSNv2, which keeps its noise levels by
self.register_buffer('sigmas', get_sigmas(config)) and returns output / used_sigmas;
models/ema.py EMAHelper: register, which keeps param.data.clone() of every trainable parameter,
update, shadow = (1 - mu) param + mu shadow, ema and ema_copy; runners/ncsn_runner.py
NCSNRunner.train: optimizer.zero_grad(), loss.backward(), optimizer.step(), then
ema_helper.update(score), and the samples drawn from ema_helper.ema_copy(score); models/__init__.py
anneal_Langevin_dynamics under torch.no_grad(), step_lr * (sigma / sigmas[-1])^2 per level, with
the final denoising step). A mixture of four Gaussians in 2D, made in the script; a small MLP.
Bug: EMAHelper.register keeps param.data for param.data.clone() (ermongroup/ncsnv2's
models/ema.py register clones every parameter), so until the first update rebinds its .data each
shadow tensor shares the weights' storage: the first Adam step moves the shadow with the weights,
the first EMA update averages the new weights with themselves, and the EMA copy the samples are
drawn from starts from the weights after one step instead of the initial ones."""

import argparse
import math

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=30)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--lr", type=float, default=2e-3)
parser.add_argument("--sigma-begin", type=float, default=2.0)
parser.add_argument("--sigma-end", type=float, default=0.05)
parser.add_argument("--num-classes", type=int, default=6, help="number of noise levels")
parser.add_argument("--anneal-power", type=float, default=2.0)
parser.add_argument("--ema-rate", type=float, default=0.99)
parser.add_argument("--n-steps-each", type=int, default=5)
parser.add_argument("--step-lr", type=float, default=5e-4)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, width = 2, 64
centers = torch.tensor([[1.5, 1.5], [-1.5, 1.5], [1.5, -1.5], [-1.5, -1.5]])


def sample_data(n):
    return centers[torch.randint(0, len(centers), (n,))] + 0.2 * torch.randn(n, dim)


def get_sigmas():
    return torch.exp(torch.linspace(math.log(args.sigma_begin), math.log(args.sigma_end),
                                    args.num_classes))


class ScoreNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("sigmas", get_sigmas())
        self.net = nn.Sequential(nn.Linear(dim, width), nn.ELU(), nn.Linear(width, width),
                                 nn.ELU(), nn.Linear(width, dim))

    def forward(self, x, y):
        used_sigmas = self.sigmas[y].view(x.shape[0], 1)
        return self.net(x) / used_sigmas


class EMAHelper:
    def __init__(self, mu):
        self.mu, self.shadow = mu, {}

    def register(self, module):
        for name, param in module.named_parameters():
            if param.requires_grad:
                self.shadow[name] = param.data

    def update(self, module):
        for name, param in module.named_parameters():
            if param.requires_grad:
                self.shadow[name].data = ((1. - self.mu) * param.data
                                          + self.mu * self.shadow[name].data)

    def ema(self, module):
        for name, param in module.named_parameters():
            if param.requires_grad:
                param.data.copy_(self.shadow[name].data)

    def ema_copy(self, module):
        module_copy = type(module)()
        module_copy.load_state_dict(module.state_dict())
        self.ema(module_copy)
        return module_copy


def anneal_dsm_score_estimation(scorenet, samples, sigmas, anneal_power):
    labels = torch.randint(0, len(sigmas), (samples.shape[0],))
    used_sigmas = sigmas[labels].view(samples.shape[0], 1)
    noise = torch.randn_like(samples) * used_sigmas
    perturbed_samples = samples + noise
    target = -1 / (used_sigmas ** 2) * noise
    scores = scorenet(perturbed_samples, labels)
    loss = 1 / 2. * ((scores - target) ** 2).sum(dim=-1) * used_sigmas.squeeze() ** anneal_power
    return loss.mean(dim=0)


@torch.no_grad()
def anneal_langevin_dynamics(x_mod, scorenet, sigmas, n_steps_each, step_lr):
    for c, sigma in enumerate(sigmas):
        labels = torch.full((x_mod.shape[0],), c, dtype=torch.long)
        step_size = step_lr * (sigma / sigmas[-1]) ** 2
        for _ in range(n_steps_each):
            grad = scorenet(x_mod, labels)
            noise = torch.randn_like(x_mod)
            x_mod = x_mod + step_size * grad + noise * torch.sqrt(step_size * 2)
    last_noise = torch.full((x_mod.shape[0],), len(sigmas) - 1, dtype=torch.long)
    return x_mod + sigmas[-1] ** 2 * scorenet(x_mod, last_noise)  # denoise


score = ScoreNet()
optimizer = torch.optim.Adam(score.parameters(), lr=args.lr)
ema_helper = EMAHelper(mu=args.ema_rate)
ema_helper.register(score)
sigmas = get_sigmas()

for step in range(args.steps):
    X = sample_data(args.batch_size)
    loss = anneal_dsm_score_estimation(score, X, sigmas, args.anneal_power)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    ema_helper.update(score)
    print(f"step {step} loss {loss.item():.4f}")

test_score = ema_helper.ema_copy(score)
test_score.eval()
init_samples = 4 * torch.rand(256, dim) - 2
samples = anneal_langevin_dynamics(init_samples, test_score, sigmas, args.n_steps_each,
                                   args.step_lr)
print(f"EMA samples: mean |x| {samples.abs().mean(0).tolist()}")

if args.out:
    weights = {f"score.{k}": v.detach().clone() for k, v in score.state_dict().items()}
    weights.update({f"ema.{k}": v.detach().clone() for k, v in test_score.state_dict().items()})
    torch.save(weights, args.out)
