"""Sparsely-gated mixture-of-experts layer with noisy top-k gating on a piecewise regression task.

Paper: Noam Shazeer, Azalia Mirhoseini, Krzysztof Maziarz, Andy Davis, Quoc Le, Geoffrey Hinton
and Jeff Dean, "Outrageously Large Neural Networks: The Sparsely-Gated Mixture-of-Experts Layer",
arXiv:1701.06538 (ICLR 2017); routing and auxiliary load balancing as later simplified in William
Fedus, Barret Zoph and Noam Shazeer, "Switch Transformers: Scaling to Trillion Parameter Models
with Simple and Efficient Sparsity", arXiv:2101.03961 (JMLR 2022); this script keeps the
original noisy top-k gating and its importance + load losses.
Reference implementation: davidmrau/mixture-of-experts, moe.py (MoE.noisy_top_k_gating: clean
logits x @ w_gate plus Gaussian noise of scale softplus(x @ w_noise) + 1e-2 at training time,
top-(k+1), softmax over the top k, scattered into a sparse gate matrix; MoE._prob_in_top_k: the
smooth load, the probability under the noise that each expert stays in the top k;
MoE.cv_squared; MoE.forward: aux loss = loss_coef * (cv_squared(importance) + cv_squared(load))
with importance = gates.sum(0); SparseDispatcher.dispatch / combine), example.py (train: y_hat,
aux_loss = model(x); total_loss = loss + aux_loss; zero_grad, backward, Adam step); it ports
tensorflow/tensor2tensor, tensor2tensor/utils/expert_utils.py (noisy_top_k_gating).

The inputs are 8-dimensional points drawn around four cluster centres and the 2-dimensional
target is a different nonlinear map per cluster, so routing by region pays off. The model is one
MoE layer of four two-layer MLP experts with k = 2 experts per example. w_gate and w_noise are
zero-initialised as in the reference, so at the start the routing is decided by the noise alone.
Each expert sees only the examples routed to it and its output is weighted by the gate value and
summed back with index_add (the reference's dispatch / combine, here without the log-space
combine that the reference uses for its softmax classifier experts). Both balancing terms are
weighted 0.1 (w_importance = w_load = 0.1 in the paper's experiments). One Adam optimizer holds
the experts and the two gating matrices, in two groups (unlike example.py's single group, the
router gets a smaller learning rate here); each step runs zero_grad, forward, MSE + aux loss,
backward and the Adam step. The evaluation runs in eval mode (noise-free top-k) under
torch.no_grad().
As published: clean.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions.normal import Normal

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--steps", type=int, default=60)
parser.add_argument("--batch_size", type=int, default=64)
parser.add_argument("--input_size", type=int, default=8)
parser.add_argument("--output_size", type=int, default=2)
parser.add_argument("--num_experts", type=int, default=4)
parser.add_argument("--hidden_size", type=int, default=16)
parser.add_argument("--k", type=int, default=2)
parser.add_argument("--loss_coef", type=float, default=0.1)
parser.add_argument("--lr", type=float, default=5e-3)
parser.add_argument("--router_lr", type=float, default=2e-3)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)


def make_data(n, centres, maps):
    cluster = torch.randint(0, centres.size(0), (n,))
    x = centres[cluster] + 0.6 * torch.randn(n, centres.size(1))
    y = torch.tanh(torch.bmm(x.unsqueeze(1), maps[cluster]).squeeze(1))
    return x, y


class Expert(nn.Module):
    def __init__(self, input_size, output_size, hidden_size):
        super().__init__()
        self.fc1 = nn.Linear(input_size, hidden_size)
        self.fc2 = nn.Linear(hidden_size, output_size)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class MoE(nn.Module):
    def __init__(self, input_size, output_size, num_experts, hidden_size, k, loss_coef):
        super().__init__()
        self.num_experts = num_experts
        self.output_size = output_size
        self.k = k
        self.loss_coef = loss_coef
        self.experts = nn.ModuleList(
            [Expert(input_size, output_size, hidden_size) for _ in range(num_experts)])
        self.w_gate = nn.Parameter(torch.zeros(input_size, num_experts))
        self.w_noise = nn.Parameter(torch.zeros(input_size, num_experts))
        self.register_buffer("mean", torch.tensor([0.0]))
        self.register_buffer("std", torch.tensor([1.0]))

    @staticmethod
    def cv_squared(v):
        eps = 1e-10
        return v.float().var() / (v.float().mean() ** 2 + eps)

    def prob_in_top_k(self, clean_logits, noisy_logits, noise_stddev, top_logits):
        # threshold to stay in: the (k+1)-th noisy value; to get in: the k-th one
        threshold_in = top_logits[:, self.k:self.k + 1]
        threshold_out = top_logits[:, self.k - 1:self.k]
        is_in = noisy_logits > threshold_in
        normal = Normal(self.mean, self.std)
        prob_if_in = normal.cdf((clean_logits - threshold_in) / noise_stddev)
        prob_if_out = normal.cdf((clean_logits - threshold_out) / noise_stddev)
        return torch.where(is_in, prob_if_in, prob_if_out)

    def noisy_top_k_gating(self, x, train, noise_epsilon=1e-2):
        clean_logits = x @ self.w_gate
        if train:
            noise_stddev = F.softplus(x @ self.w_noise) + noise_epsilon
            noisy_logits = clean_logits + torch.randn_like(clean_logits) * noise_stddev
            logits = noisy_logits
        else:
            logits = clean_logits
        top_logits, top_indices = logits.topk(min(self.k + 1, self.num_experts), dim=1)
        top_k_gates = F.softmax(top_logits[:, :self.k], dim=1)
        gates = torch.zeros_like(logits).scatter(1, top_indices[:, :self.k], top_k_gates)
        if train and self.k < self.num_experts:
            load = self.prob_in_top_k(clean_logits, noisy_logits, noise_stddev,
                                      top_logits).sum(0)
        else:
            load = (gates > 0).sum(0).float()
        return gates, load

    def forward(self, x):
        gates, load = self.noisy_top_k_gating(x, self.training)
        importance = gates.sum(0)
        aux_loss = self.loss_coef * (self.cv_squared(importance) + self.cv_squared(load))
        y = x.new_zeros(x.size(0), self.output_size)
        for e, expert in enumerate(self.experts):
            idx = torch.nonzero(gates[:, e] > 0).squeeze(1)
            if idx.numel() == 0:
                continue
            y = y.index_add(0, idx, gates[idx, e].unsqueeze(1) * expert(x[idx]))
        return y, aux_loss, load


centres = 2.0 * torch.randn(args.num_experts, args.input_size)
maps = torch.randn(args.num_experts, args.input_size, args.output_size) / args.input_size ** 0.5
x_train, y_train = make_data(args.steps * args.batch_size, centres, maps)
x_eval, y_eval = make_data(512, centres, maps)

model = MoE(args.input_size, args.output_size, args.num_experts, args.hidden_size, args.k,
            args.loss_coef)
optimizer = torch.optim.Adam([
    {"params": model.experts.parameters(), "lr": args.lr},
    {"params": [model.w_gate, model.w_noise], "lr": args.router_lr},
])

model.train()
for step in range(args.steps):
    i = step * args.batch_size
    x, y = x_train[i:i + args.batch_size], y_train[i:i + args.batch_size]
    optimizer.zero_grad()
    y_hat, aux_loss, load = model(x)
    loss = F.mse_loss(y_hat, y)
    total_loss = loss + aux_loss
    total_loss.backward()
    optimizer.step()
    if step % 15 == 0 or step == args.steps - 1:
        loads = " ".join(f"{v:.1f}" for v in load.tolist())
        print(f"step {step:3d} mse {loss.item():.4f} aux {aux_loss.item():.4f} load {loads}")

model.eval()
with torch.no_grad():
    y_hat, aux_loss, load = model(x_eval)
    eval_loss = F.mse_loss(y_hat, y_eval)
print(f"eval mse {eval_loss.item():.4f} expert counts {load.tolist()}")

if args.out:
    torch.save({"model": model.state_dict()}, args.out)
