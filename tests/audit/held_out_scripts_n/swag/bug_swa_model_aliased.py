"""SWA-Gaussian at a tiny size, written after Maddox, Izmailov, Garipov, Vetrov and Wilson, "A
Simple Baseline for Bayesian Uncertainty in Deep Learning" (NeurIPS 2019, arXiv:1902.02476),
section 4 and algorithm 1: after a first phase of SGD training, SGD goes on at a constant
learning rate and every c steps the weights are collected into running first and second
moments, theta_SWA = mean of the iterates and the second moment of each weight, and into the
last K deviations D = [theta_i - theta_SWA]; a sample of the posterior is theta_SWA +
1/sqrt(2) Sigma_diag^(1/2) z_1 + 1/sqrt(2 (K - 1)) D z_2 with Sigma_diag = the second moment -
theta_SWA^2. With wjmaddox/swa_gaussian (https://github.com/wjmaddox/swa_gaussian,
experiments/train/run_swag.py: the learning-rate schedule that decays to swa_lr by swa_start,
utils.adjust_learning_rate on the one SGD optimizer, swag_model.collect_model(model) every
swa_c_epochs, and at eval_freq swag_model.sample(0.0) followed by an evaluation of the SWA
mean in the SWAG model, a module of its own built from the model's class; swag/posteriors/
swag.py SWAG.collect_model, which updates the mean and sq_mean buffers from param.data with
weights n / (n + 1) and 1 / (n + 1) and appends param.data - mean to cov_mat_sqrt, keeping the
last max_num_models rows, and SWAG.sample_fullrank, with var clamped at var_clamp and the
sample mean + scale ** 0.5 * (var_sample + cov_sample), cov_sample divided by sqrt(K - 1)).
Two phases: SGD on a three-way classification of random inputs with noisy labels, made in the
script, then the collection phase at the constant SWA learning rate, with the SWA mean
evaluated in a copy of the network every few collections and a SWAG sample (scale 0.5) drawn
and loaded into that copy at the end. Injected bug: the network the SWA mean is evaluated in is
swa_model = model for copy.deepcopy(model) (run_swag.py evaluates the mean in the SWAG model, a
module of its own whose weights are buffers the collection writes), so every evaluation's
load_vector writes the running mean into the weights being trained: from the first
evaluation on, after the third collection, SGD restarts from theta_SWA each time, the collected
iterates are pulled together, the second moment and the deviations shrink, and the final
sample overwrites the trained weights; second phase of a two-phase script."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=40, help="SGD steps before the collection")
parser.add_argument("--swag-steps", type=int, default=30)
parser.add_argument("--collect-every", type=int, default=2, help="c, steps per collection")
parser.add_argument("--eval-every", type=int, default=3, help="collections per evaluation")
parser.add_argument("--max-num-models", type=int, default=5, help="K, rank of D")
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--lr-init", type=float, default=0.1)
parser.add_argument("--swa-lr", type=float, default=0.05)
parser.add_argument("--momentum", type=float, default=0.9)
parser.add_argument("--wd", type=float, default=1e-4)
parser.add_argument("--scale", type=float, default=0.5)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

in_dim, hidden_dim, n_classes = 10, 32, 3
rule = torch.randn(in_dim, n_classes)
x_train, x_test = torch.randn(256, in_dim), torch.randn(256, in_dim)
y_train = (x_train @ rule + torch.randn(256, n_classes)).argmax(dim=1)
y_test = (x_test @ rule).argmax(dim=1)

model = nn.Sequential(nn.Linear(in_dim, hidden_dim), nn.ReLU(),
                      nn.Linear(hidden_dim, hidden_dim), nn.ReLU(),
                      nn.Linear(hidden_dim, n_classes))
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr_init, momentum=args.momentum,
                            weight_decay=args.wd)


def schedule(step):
    t = step / args.steps
    lr_ratio = args.swa_lr / args.lr_init
    factor = 1.0 if t <= 0.5 else 1.0 - (1.0 - lr_ratio) * (t - 0.5) / 0.4 if t <= 0.9 else lr_ratio
    return args.lr_init * factor


def batch():
    idx = torch.randint(0, len(x_train), (args.batch_size,))
    return x_train[idx], y_train[idx]


def load_vector(module, vector):
    with torch.no_grad():
        offset = 0
        for p in module.parameters():
            p.copy_(vector[offset:offset + p.numel()].view_as(p))
            offset += p.numel()


def test_loss(module):
    with torch.no_grad():
        return F.cross_entropy(module(x_test), y_test).item()


# phase 1: SGD with the learning rate decayed towards the SWA learning rate
for step in range(args.steps):
    for group in optimizer.param_groups:
        group["lr"] = schedule(step)
    x, y = batch()
    loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(f"SGD done, test loss {test_loss(model):.4f}")

# phase 2: SGD at the constant SWA learning rate, the weights' moments collected without graph
for group in optimizer.param_groups:
    group["lr"] = args.swa_lr
swa_model = model
n_models = 0
mean = torch.zeros(sum(p.numel() for p in model.parameters()))
sq_mean = torch.zeros_like(mean)
deviations = []
for step in range(args.swag_steps):
    x, y = batch()
    loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if (step + 1) % args.collect_every == 0:
        with torch.no_grad():
            w = torch.cat([p.reshape(-1) for p in model.parameters()])
            mean = mean * n_models / (n_models + 1) + w / (n_models + 1)
            sq_mean = sq_mean * n_models / (n_models + 1) + w ** 2 / (n_models + 1)
            deviations = (deviations + [w - mean])[-args.max_num_models:]
        n_models += 1
        if n_models % args.eval_every == 0:
            load_vector(swa_model, mean)
            print(f"step {step} collected {n_models}, SWA test loss {test_loss(swa_model):.4f}")

# a SWAG sample: the diagonal and the low-rank parts, each scaled by sqrt(scale)
with torch.no_grad():
    var = (sq_mean - mean ** 2).clamp(min=1e-30)
    cov_mat_sqrt = torch.stack(deviations)
    var_sample = var.sqrt() * torch.randn_like(var)
    cov_sample = cov_mat_sqrt.t() @ torch.randn(len(deviations)) / (len(deviations) - 1) ** 0.5
    sample = mean + args.scale ** 0.5 * (var_sample + cov_sample)
load_vector(swa_model, sample)
print(f"SGD test loss {test_loss(model):.4f}, SWAG sample test loss {test_loss(swa_model):.4f}")

if args.out:
    torch.save({**{f"model.{k}": v for k, v in model.state_dict().items()},
                **{f"swag_sample.{k}": v for k, v in swa_model.state_dict().items()},
                "swag.mean": mean, "swag.sq_mean": sq_mean, "swag.cov_mat_sqrt": cov_mat_sqrt},
               args.out)
