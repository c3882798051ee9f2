"""GrowNet, gradient boosting with shallow neural networks as weak learners, on a tiny synthetic
regression problem, written after Badirli, Liu, Xing, Bhowmik, Doan and Keerthi, "Gradient
Boosting Neural Networks: GrowNet" (arXiv:2002.07971, 2020): the ensemble's prediction is
c0 + alpha * sum_k f_k(x, h_{k-1}), a constant plus a boost rate alpha times the sum of small
MLPs, where each weak learner f_k sees the input features concatenated with the penultimate
features h_{k-1} of the learner before it. Stage k has two phases. First the new learner alone
is fitted to the negative gradient of the loss at the current ensemble (for the squared loss
the residual y - F_{k-1}(x)), the earlier learners being fixed and run without gradient; then
it is added and a fully corrective step fine-tunes all learners and the boost rate together on
the ensemble's own loss. With the authors' code, sbadirli/GrowNet
(https://github.com/sbadirli/GrowNet, Regression/main_reg_cv.py, the stage loop: a fresh
MLP3.get_model per stage and an SGD optimizer over model.parameters() only, the target
grad_direction = -(out - y) from net_ensemble.forward, the loss MSE(boost_rate * out, target),
model.zero_grad(), backward, step; then net_ensemble.add(model) and, for stage > 0, a new SGD
optimizer over net_ensemble.parameters() at lr / lr_scaler that minimises the MSE of
net_ensemble.forward_grad(x) against y with optimizer.zero_grad() before each backward;
Regression/models/dynamic_net.py DynamicNet: forward runs the learners under torch.no_grad()
and forward_grad with gradient, parameters() lists every learner's parameters and boost_rate;
Regression/models/mlp.py MLP3: in_layer on the concatenation, hidden_layer, out_layer, SELU),
whose steps this script follows. The residual target and the boost rate in the stage fit are
taken as fixed numbers (the boost rate is trained by the corrective step only), the learners
have no batch norm, and there are five stages.
As published: clean."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--num-nets", type=int, default=5)
parser.add_argument("--stage-steps", type=int, default=40)
parser.add_argument("--correct-steps", type=int, default=10)
parser.add_argument("--batch-size", type=int, default=128)
parser.add_argument("--hidden", type=int, default=16)
parser.add_argument("--boost-rate", type=float, default=1.0)
parser.add_argument("--lr", type=float, default=0.2)
parser.add_argument("--lr-scaler", type=float, default=10.0)
parser.add_argument("--l2", type=float, default=1e-4)
parser.add_argument("--out", default=None, help="where to save the learners and the boost rate")
args = parser.parse_args()
torch.manual_seed(args.seed)
torch.set_num_threads(1)  # tiny models: extra threads only add overhead

# synthetic regression data: a smooth nonlinear function of eight features plus noise
n, feat_d = 512, 8
x_all = torch.randn(n, feat_d)
y_all = (torch.sin(2 * x_all[:, 0]) + x_all[:, 1] * x_all[:, 2] + 0.5 * x_all[:, 3] ** 2
         - 0.3 * x_all[:, 4] + 0.1 * torch.randn(n))


class WeakLearner(nn.Module):
    """A shallow MLP on the input concatenated with the previous learner's penultimate features."""

    def __init__(self, dim_in, hidden):
        super().__init__()
        self.in_layer = nn.Linear(dim_in, hidden)
        self.hidden_layer = nn.Linear(hidden, hidden)
        self.out_layer = nn.Linear(hidden, 1)

    def forward(self, x, lower_feat):
        if lower_feat is not None:
            x = torch.cat([x, lower_feat], dim=1)
        h = F.selu(self.hidden_layer(F.selu(self.in_layer(x))))
        return h, self.out_layer(h).squeeze(1)


c0 = y_all.mean().item()
boost_rate = nn.Parameter(torch.tensor(args.boost_rate))
learners = []


def ensemble_parameters():
    params = []
    for m in learners:
        params.extend(m.parameters())
    params.append(boost_rate)
    return params


def ensemble_forward(x):
    """The ensemble with its learners fixed (no gradient into them), as DynamicNet.forward."""
    if not learners:
        return None, torch.full((len(x),), c0)
    lower_feat, prediction = None, 0.0
    with torch.no_grad():
        for m in learners:
            lower_feat, pred = m(x, lower_feat)
            prediction = prediction + pred
    return lower_feat, c0 + boost_rate * prediction


def ensemble_forward_grad(x):
    """The ensemble with gradient into every learner, as DynamicNet.forward_grad."""
    lower_feat, prediction = None, 0.0
    for m in learners:
        lower_feat, pred = m(x, lower_feat)
        prediction = prediction + pred
    return lower_feat, c0 + boost_rate * prediction


for stage in range(args.num_nets):
    # phase 1: fit the new weak learner to the residual of the fixed ensemble
    dim_in = feat_d if stage == 0 else feat_d + args.hidden
    learner = WeakLearner(dim_in, args.hidden)
    optimizer = torch.optim.SGD(learner.parameters(), lr=args.lr, weight_decay=args.l2)
    for step in range(args.stage_steps):
        idx = torch.randint(0, n, (args.batch_size,))
        x, y = x_all[idx], y_all[idx]
        middle_feat, out = ensemble_forward(x)
        residual = (y - out).detach()  # negative gradient of the squared loss at the ensemble
        _, f_k = learner(x, middle_feat)
        loss = F.mse_loss(boost_rate.detach() * f_k, residual)
        learner.zero_grad()
        loss.backward()
        optimizer.step()
    learners.append(learner)

    # phase 2: fully corrective step over all learners and the boost rate
    stage_loss = float("nan")
    if stage > 0:
        optimizer = torch.optim.SGD(ensemble_parameters(), lr=args.lr / args.lr_scaler,
                                    weight_decay=args.l2)
        for step in range(args.correct_steps):
            idx = torch.randint(0, n, (args.batch_size,))
            x, y = x_all[idx], y_all[idx]
            _, out = ensemble_forward_grad(x)
            loss = F.mse_loss(out, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            stage_loss = loss.item()
    with torch.no_grad():
        rmse = (ensemble_forward(x_all)[1] - y_all).pow(2).mean().sqrt().item()
    print(f"stage {stage} boost rate {boost_rate.item():.4f} corrective loss {stage_loss:.4f} "
          f"train rmse {rmse:.4f}")

if args.out:
    saved = {f"learner{k}": m.state_dict() for k, m in enumerate(learners)}
    saved["boost_rate"] = boost_rate.detach().clone()
    torch.save(saved, args.out)
