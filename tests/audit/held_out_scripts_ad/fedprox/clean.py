"""FedProx: federated averaging whose local solver adds a proximal term to the global weights.

Paper: Tian Li, Anit Kumar Sahu, Manzil Zaheer, Maziar Sanjabi, Ameet Talwalkar and Virginia
Smith, "Federated Optimization in Heterogeneous Networks", MLSys 2020, arXiv:1812.06127 (2018).
Reference implementation: litian96/FedProx (TensorFlow): flearn/trainers/fedprox.py (Server.train:
per round select clients, inner_opt.set_params(latest_model) loads the global weights as the
proximal anchor, each selected client starts from the global model and runs solve_inner for
num_epochs local epochs, or for a random smaller number of epochs when it is a straggler, and
the solutions are aggregated), flearn/optimizer/pgd.py (PerturbedGradientDescent: the update
w <- w - lr * (grad + mu * (w - vstar)), i.e. SGD on the local loss plus (mu / 2) ||w - vstar||^2
with vstar a constant copy of the global weights), flearn/trainers/fedbase.py (select_clients,
aggregate: average of the client solutions weighted by their sample counts),
flearn/models/synthetic/mclr.py (multinomial logistic regression, cross-entropy) and
data/synthetic_1_1/generate_synthetic.py (the Synthetic(alpha, beta) data). The PyTorch form of
the proximal term, summed over model.parameters() against a copy of the global parameters, is
as in ki-ljl/FedProx-PyTorch, client.py (train), but squared as in the paper.

The data are Synthetic(1, 1) in small: each of eight clients has its own input mean and its own
softmax-regression labelling model drawn around client-level priors (20 features, 5 classes,
24 to 48 samples). The model is multinomial logistic regression (one linear layer). Each round
the server picks four clients; for each the local model is loaded with the global weights, a
detached clone of those weights is kept as the proximal anchor, and plain SGD runs mini-batch
steps on the cross-entropy plus (mu / 2) times the squared distance to the anchor, for E local
epochs (stragglers, one of the four, for a random 1..E-1 epochs). The new global model is the
sample-weighted average of the client solutions. The training loss of the global model over all
clients is computed under torch.no_grad().
As published: clean.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--num_clients", type=int, default=8)
parser.add_argument("--clients_per_round", type=int, default=4)
parser.add_argument("--rounds", type=int, default=4)
parser.add_argument("--local_epochs", type=int, default=2)
parser.add_argument("--batch_size", type=int, default=16)
parser.add_argument("--drop_percent", type=float, default=0.25)
parser.add_argument("--dim", type=int, default=20)
parser.add_argument("--n_classes", type=int, default=5)
parser.add_argument("--lr", type=float, default=0.1)
parser.add_argument("--mu", type=float, default=1.0)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)


def generate_synthetic(alpha, beta, num_clients, dim, n_classes):
    cov_diag = torch.arange(1, dim + 1, dtype=torch.float32) ** -1.2
    mean_w = alpha * torch.randn(num_clients)
    prior_b = beta * torch.randn(num_clients)
    data = []
    for k in range(num_clients):
        n = int(torch.randint(24, 49, (1,)))
        mean_x = prior_b[k] + torch.randn(dim)
        w = mean_w[k] + torch.randn(dim, n_classes)
        b = mean_w[k] + torch.randn(n_classes)
        x = mean_x + cov_diag.sqrt() * torch.randn(n, dim)
        y = (x @ w + b).argmax(1)
        data.append((x, y))
    return data


class MCLR(nn.Module):
    def __init__(self, dim, n_classes):
        super().__init__()
        self.linear = nn.Linear(dim, n_classes)

    def forward(self, x):
        return self.linear(x)


clients = generate_synthetic(1.0, 1.0, args.num_clients, args.dim, args.n_classes)
global_model = MCLR(args.dim, args.n_classes)
local_model = MCLR(args.dim, args.n_classes)

for rnd in range(args.rounds):
    selected = torch.randperm(args.num_clients)[:args.clients_per_round].tolist()
    n_active = round(args.clients_per_round * (1 - args.drop_percent))
    solutions, weights = [], []
    for c in selected:
        x_c, y_c = clients[c]
        if c in selected[:n_active]:
            epochs = args.local_epochs
        else:
            epochs = int(torch.randint(1, args.local_epochs, (1,)))
        local_model.load_state_dict(global_model.state_dict())
        global_params = [p.detach().clone() for p in local_model.parameters()]
        optimizer = torch.optim.SGD(local_model.parameters(), lr=args.lr)
        for epoch in range(epochs):
            perm = torch.randperm(len(y_c))
            for i in range(0, len(y_c), args.batch_size):
                idx = perm[i:i + args.batch_size]
                optimizer.zero_grad()
                loss = F.cross_entropy(local_model(x_c[idx]), y_c[idx])
                proximal_term = 0.0
                for w, w_t in zip(local_model.parameters(), global_params):
                    proximal_term = proximal_term + (w - w_t).pow(2).sum()
                loss = loss + args.mu / 2 * proximal_term
                loss.backward()
                optimizer.step()
        solutions.append({k: v.clone() for k, v in local_model.state_dict().items()})
        weights.append(float(len(y_c)))

    total = sum(weights)
    averaged = {k: sum(w * s[k] for w, s in zip(weights, solutions)) / total
                for k in solutions[0]}
    global_model.load_state_dict(averaged)

    with torch.no_grad():
        x_all = torch.cat([x for x, _ in clients])
        y_all = torch.cat([y for _, y in clients])
        logits = global_model(x_all)
        train_loss = F.cross_entropy(logits, y_all)
        train_acc = (logits.argmax(1) == y_all).float().mean()
    print(f"round {rnd} clients {selected} train loss {train_loss.item():.4f} "
          f"acc {train_acc.item():.3f}")

if args.out:
    torch.save({"global_model": global_model.state_dict(),
                "local_model": local_model.state_dict()}, args.out)
