"""GRU-D: a GRU with trainable input and hidden-state decay for series with missing values.

Paper: Zhengping Che, Sanjay Purushotham, Kyunghyun Cho, David Sontag, Yan Liu, "Recurrent
Neural Networks for Multivariate Time Series with Missing Values", Scientific Reports 8, 6085
(2018), arXiv:1606.01865.
Reference implementations: PeterChe1990/GRU-D (the authors' Keras code), nn_utils/grud_layers.py,
class GRUDCell (input_decay_kernel, hidden_decay_kernel, masking_kernel in call()), and the
PyTorch port zhiyongc/GRU-D, GRUD.py, class GRUD (step(), with the empirical mean X_mean held as
a fixed tensor and the diagonal input-decay layer FilterLinear).

The script makes a synthetic binary classification task on irregularly sampled multivariate
series whose entries go missing at random, more often for one class (informative missingness).
For every step it builds the mask m_t, the time gap delta_t since each variable was last seen,
the last observed value and, from the training set, the empirical mean of each variable. GRU-D
decays the input towards the empirical mean, x_hat = m x + (1 - m)(g_x x_last + (1 - g_x) mean)
with g_x = exp(-relu(w_gx * delta + b_gx)) (diagonal weights), decays the previous hidden state
by g_h = exp(-relu(W_gh delta + b_gh)), and feeds x_hat, the decayed state and the mask into
the GRU gates; a linear head on the last state gives the class logit. The decay weights are
trained by the classification loss through x_hat and the decayed state, so nothing in the
model is cut; the empirical mean is a statistic of the data, a fixed buffer that is not
trained. One Adam optimizer trains the cell and the head. Bug: the input decay and the
imputation are computed under torch.no_grad() as if they were preprocessing, so x_hat is a
constant to autograd and the input-decay weights w_gx, b_gx never get a gradient or move.
"""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class GRUD(nn.Module):
    def __init__(self, n_vars, hidden, x_mean):
        super().__init__()
        self.hidden = hidden
        self.register_buffer("x_mean", x_mean.clone())
        stdv = 1.0 / math.sqrt(n_vars)
        self.w_gx = nn.Parameter(torch.empty(n_vars).uniform_(-stdv, stdv))
        self.b_gx = nn.Parameter(torch.empty(n_vars).uniform_(-stdv, stdv))
        self.lin_gh = nn.Linear(n_vars, hidden)
        self.lin_z = nn.Linear(2 * n_vars + hidden, hidden)
        self.lin_r = nn.Linear(2 * n_vars + hidden, hidden)
        self.lin_h = nn.Linear(2 * n_vars + hidden, hidden)
        self.head = nn.Linear(hidden, 1)

    def forward(self, x, mask, delta, x_last):
        B, T, _ = x.shape
        with torch.no_grad():
            gamma_x = torch.exp(-torch.relu(delta * self.w_gx + self.b_gx))
            x_hat = mask * x + (1 - mask) * (gamma_x * x_last + (1 - gamma_x) * self.x_mean)
        gamma_h = torch.exp(-torch.relu(self.lin_gh(delta)))
        h = x.new_zeros(B, self.hidden)
        for t in range(T):
            h = gamma_h[:, t] * h
            inp = torch.cat([x_hat[:, t], h, mask[:, t]], 1)
            z = torch.sigmoid(self.lin_z(inp))
            r = torch.sigmoid(self.lin_r(inp))
            h_tilde = torch.tanh(self.lin_h(torch.cat([x_hat[:, t], r * h, mask[:, t]], 1)))
            h = (1 - z) * h + z * h_tilde
        return self.head(h).squeeze(-1)


def make_data(n, T, D):
    y = (torch.rand(n) < 0.5).float()
    gaps = torch.distributions.Exponential(1.0).sample((n, T))
    s = torch.cumsum(gaps, 1) - gaps[:, :1]
    freq = 0.6 + 0.4 * torch.rand(n, 1, D)
    phase = 6.28 * torch.rand(n, 1, D)
    trend = (2 * y - 1).view(n, 1, 1) * 0.15 * torch.arange(D).float().view(1, 1, D)
    vals = torch.sin(freq * s.unsqueeze(-1) + phase) + trend * s.unsqueeze(-1) / T
    vals = vals + 0.1 * torch.randn(n, T, D)
    p_obs = 0.6 - 0.3 * y.view(n, 1, 1) * (torch.arange(D) % 2).float().view(1, 1, D)
    mask = (torch.rand(n, T, D) < p_obs).float()
    mask[:, 0] = 1.0
    x = vals * mask
    delta = torch.zeros(n, T, D)
    x_last = torch.zeros(n, T, D)
    last = x[:, 0].clone()
    for t in range(1, T):
        gap = (s[:, t] - s[:, t - 1]).unsqueeze(-1)
        delta[:, t] = gap + (1 - mask[:, t - 1]) * delta[:, t - 1]
        x_last[:, t] = last
        last = torch.where(mask[:, t] > 0, x[:, t], last)
    x_last[:, 0] = x[:, 0]
    return x, mask, delta, x_last, y


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=str, default=None)
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-2)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    n, T, D = 128, 12, 4
    x, mask, delta, x_last, y = make_data(n, T, D)
    x_mean = (x * mask).sum((0, 1)) / mask.sum((0, 1))
    model = GRUD(D, args.hidden, x_mean)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)

    for epoch in range(args.epochs):
        perm = torch.randperm(n)
        total, correct = 0.0, 0
        for i in range(0, n, args.batch_size):
            idx = perm[i:i + args.batch_size]
            logits = model(x[idx], mask[idx], delta[idx], x_last[idx])
            loss = F.binary_cross_entropy_with_logits(logits, y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
            correct += ((logits > 0).float() == y[idx]).sum().item()
        if epoch % 5 == 0 or epoch == args.epochs - 1:
            print(f"epoch {epoch:3d}  bce {total / n:.4f}  acc {correct / n:.3f}")

    if args.out:
        torch.save({"model": model.state_dict()}, args.out)


if __name__ == "__main__":
    main()
