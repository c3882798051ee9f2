"""Deep kernel learning: an exact GP with an RBF kernel on the features of a small MLP.

Paper: Andrew Gordon Wilson, Zhiting Hu, Ruslan Salakhutdinov and Eric P. Xing, "Deep Kernel
Learning", AISTATS 2016, arXiv:1511.02222.
Reference implementation: cornellius-gp/gpytorch,
examples/06_PyTorch_NN_Integration_DKL/KISSGP_Deep_Kernel_Regression_CUDA.ipynb
(LargeFeatureExtractor; GPRegressionModel.forward putting x through the feature extractor before
mean_module and a ScaleKernel(RBFKernel) covar_module; one Adam over the four parameter groups
feature_extractor, covar_module, mean_module and likelihood; loss = -ExactMarginalLogLikelihood),
with the exact marginal likelihood of gpytorch/mlls/exact_marginal_log_likelihood.py computed here
by hand through a Cholesky factor (Rasmussen and Williams, GPML, Algorithm 2.1). The paper
initialises the network by pre-training it with a squared loss before the joint GP fit.

Forty-eight noisy samples of a 1-D function with a jump (a step plus a sinusoid) on [-1, 1] are
the training set and a grid of 100 points the test set. The feature extractor is an MLP
1-32-16-2 with ReLU. Phase 1 pre-trains it with a linear MSE head (Adam, 40 steps). Phase 2
drops the head and fits the GP on the extracted features: a constant mean, an RBF kernel with a
learned log lengthscale and log outputscale, and a Gaussian likelihood with a learned log noise;
the exact negative log marginal likelihood (per point) is backpropagated through the Cholesky
factor into the hyperparameters and into the feature extractor, all four parameter groups in one
Adam (40 steps). Predictions use the GP posterior mean under torch.no_grad().
As published: clean.
"""
import argparse
import math

import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--pre_steps", type=int, default=40)
parser.add_argument("--gp_steps", type=int, default=40)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)

N_TRAIN = 48
N_TEST = 100
NOISE_STD = 0.05
JITTER = 1e-5


def target_fn(x):
    return 0.6 * torch.sign(x) + 0.3 * torch.sin(6.0 * x)


def make_data():
    train_x = torch.rand(N_TRAIN, 1) * 2 - 1
    train_y = target_fn(train_x).squeeze(-1) + NOISE_STD * torch.randn(N_TRAIN)
    test_x = torch.linspace(-1, 1, N_TEST).unsqueeze(-1)
    test_y = target_fn(test_x).squeeze(-1)
    return train_x, train_y, test_x, test_y


class FeatureExtractor(nn.Sequential):
    def __init__(self, data_dim, feat_dim=2):
        super().__init__()
        self.add_module("linear1", nn.Linear(data_dim, 32))
        self.add_module("relu1", nn.ReLU())
        self.add_module("linear2", nn.Linear(32, 16))
        self.add_module("relu2", nn.ReLU())
        self.add_module("linear3", nn.Linear(16, feat_dim))


class ConstantMean(nn.Module):
    def __init__(self):
        super().__init__()
        self.constant = nn.Parameter(torch.zeros(()))

    def forward(self, z):
        return self.constant.expand(z.shape[0])


class ScaledRBFKernel(nn.Module):
    def __init__(self):
        super().__init__()
        self.log_lengthscale = nn.Parameter(torch.zeros(()))
        self.log_outputscale = nn.Parameter(torch.zeros(()))

    def forward(self, z1, z2):
        ell = self.log_lengthscale.exp()
        sqdist = torch.cdist(z1 / ell, z2 / ell).pow(2)
        return self.log_outputscale.exp() * torch.exp(-0.5 * sqdist)


class GaussianLikelihood(nn.Module):
    def __init__(self):
        super().__init__()
        self.log_noise = nn.Parameter(torch.tensor(math.log(0.1)))

    def noise(self):
        return self.log_noise.exp()


class DKLModel(nn.Module):
    def __init__(self, feature_extractor):
        super().__init__()
        self.feature_extractor = feature_extractor
        self.mean_module = ConstantMean()
        self.covar_module = ScaledRBFKernel()

    def forward(self, x):
        projected_x = self.feature_extractor(x)
        return projected_x, self.mean_module(projected_x)


def exact_neg_mll(model, likelihood, x, y):
    z, mean = model(x)
    n = y.shape[0]
    K = model.covar_module(z, z)
    K = K + (likelihood.noise() + JITTER) * torch.eye(n)
    L = torch.linalg.cholesky(K)
    r = (y - mean).unsqueeze(-1)
    alpha = torch.cholesky_solve(r, L)
    nll = 0.5 * (r * alpha).sum() + L.diagonal().log().sum() + 0.5 * n * math.log(2 * math.pi)
    return nll / n


def posterior_mean(model, likelihood, x, y, x_star):
    z, mean = model(x)
    z_star, mean_star = model(x_star)
    K = model.covar_module(z, z) + (likelihood.noise() + JITTER) * torch.eye(y.shape[0])
    L = torch.linalg.cholesky(K)
    alpha = torch.cholesky_solve((y - mean).unsqueeze(-1), L)
    return mean_star + (model.covar_module(z_star, z) @ alpha).squeeze(-1)


train_x, train_y, test_x, test_y = make_data()
feature_extractor = FeatureExtractor(1)

# phase 1: pre-train the feature extractor with a linear regression head
head = nn.Linear(2, 1)
pre_optimizer = torch.optim.Adam(list(feature_extractor.parameters()) + list(head.parameters()),
                                 lr=1e-2)
for step in range(args.pre_steps):
    pre_optimizer.zero_grad()
    pred = head(feature_extractor(train_x)).squeeze(-1)
    mse = (pred - train_y).pow(2).mean()
    mse.backward()
    pre_optimizer.step()
    if step % 10 == 0 or step == args.pre_steps - 1:
        print(f"pre  {step:3d} mse {mse.item():.4f}")

# phase 2: joint fit of the deep kernel on the exact marginal likelihood
model = DKLModel(feature_extractor)
likelihood = GaussianLikelihood()
optimizer = torch.optim.Adam([
    {"params": model.feature_extractor.parameters()},
    {"params": model.covar_module.parameters(), "lr": 0.05},
    {"params": model.mean_module.parameters(), "lr": 0.05},
    {"params": likelihood.parameters(), "lr": 0.05},
], lr=1e-2)
for step in range(args.gp_steps):
    optimizer.zero_grad()
    loss = exact_neg_mll(model, likelihood, train_x, train_y)
    loss.backward()
    optimizer.step()
    if step % 10 == 0 or step == args.gp_steps - 1:
        print(f"gp   {step:3d} -mll/n {loss.item():.4f} "
              f"ell {model.covar_module.log_lengthscale.exp().item():.3f} "
              f"noise {likelihood.noise().item():.4f}")

with torch.no_grad():
    pred = posterior_mean(model, likelihood, train_x, train_y, test_x)
    rmse = (pred - test_y).pow(2).mean().sqrt()
print(f"test rmse {rmse.item():.4f}")

if args.out:
    torch.save({"model": model.state_dict(), "likelihood": likelihood.state_dict(),
                "head": head.state_dict()}, args.out)
