"""SCAFFOLD federated training of a small classifier on synthetic non-IID clients, after a
centralised warm-up on server-side proxy data, written after Karimireddy, Kale, Mohri, Reddi,
Stich and Suresh, "SCAFFOLD: Stochastic Controlled Averaging for Federated Learning" (ICML
2020, arXiv:1910.06378), Algorithm 1: the server holds the model x and a control variate c,
each client i a control variate c_i; a sampled client starts from y_i = x and takes K local
SGD steps y_i <- y_i - eta_l (g_i(y_i) - c_i + c), the drift correction c - c_i added to every
stochastic gradient; then (option II) c_i+ = c_i - c + (x - y_i) / (K eta_l), and it returns
dy_i = y_i - x and dc_i = c_i+ - c_i; the server moves x <- x + eta_g * mean_S dy_i and
c <- c + (|S| / N) * mean_S dc_i = c + sum_S dc_i / N. Two phases: the global model is first
warmed up centrally on a small IID proxy set held by the server, then trained by SCAFFOLD
rounds. With the public implementation in KarhouTam/FL-bench (https://github.com/KarhouTam/FL-
bench, src/client/scaffold.py SCAFFOLDClient and src/server/scaffold.py SCAFFOLDServer), whose
steps this script follows: SCAFFOLDClient.fit runs local_epoch steps of one batch each,
optimizer.zero_grad(), loss.backward(), then adds c_global - c_local to every trainable
parameter's .grad before optimizer.step() (plain SGD at local_lr); SCAFFOLDClient.train, under
torch.no_grad(), takes y_delta = y_i - x, c_plus = c_i - c - y_delta / (local_epoch * local_lr)
and c_delta = c_plus - c_i, and keeps c_plus as the client's control variate;
SCAFFOLDServer.aggregate adds global_lr times the weighted mean of the y_delta to the global
parameters and the sum of the c_delta divided by the number of clients to c_global. Each client
trains a fresh copy of the global model (FL-bench loads the global parameters into the client's
model and resets the client's optimizer to its initial state). The data: five clients whose labels
follow a skewed Dirichlet draw and whose features carry a client-specific shift; three a round.
Bug: the drift correction c - c_i is added to server_model's .grad, not the local model's."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--warmup-steps", type=int, default=30)
parser.add_argument("--warmup-lr", type=float, default=0.05)
parser.add_argument("--rounds", type=int, default=15)
parser.add_argument("--clients-per-round", type=int, default=3)
parser.add_argument("--local-steps", type=int, default=10, help="K, local SGD steps per round")
parser.add_argument("--local-lr", type=float, default=0.05)
parser.add_argument("--global-lr", type=float, default=1.0)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--out", default=None, help="where to save the global model and controls")
args = parser.parse_args()
torch.manual_seed(args.seed)
torch.set_num_threads(1)

n_clients, n_classes, dim, hidden, n_per_client = 5, 4, 8, 32, 200

# non-IID clients: class proportions from a Dirichlet(0.3), a per-client feature shift
class_means = 0.7 * torch.randn(n_classes, dim)


def make_data(n, proportions, shift):
    y = torch.multinomial(proportions, n, replacement=True)
    x = class_means[y] + shift + torch.randn(n, dim)
    return x, y


client_data = []
for i in range(n_clients):
    proportions = torch.distributions.Dirichlet(torch.full((n_classes,), 0.3)).sample() + 1e-3
    client_data.append(make_data(n_per_client, proportions, torch.randn(dim)))
proxy_x, proxy_y = make_data(120, torch.ones(n_classes), torch.zeros(dim))


def sample_batch(x, y):
    idx = torch.randint(0, x.shape[0], (args.batch_size,))
    return x[idx], y[idx]


server_model = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                             nn.ReLU(), nn.Linear(hidden, n_classes))

# phase 1: centralised warm-up of the global model on the server's proxy data
optimizer = torch.optim.SGD(server_model.parameters(), lr=args.warmup_lr, momentum=0.9)
for step in range(args.warmup_steps):
    xb, yb = sample_batch(proxy_x, proxy_y)
    loss = F.cross_entropy(server_model(xb), yb)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(f"warm-up loss {loss.item():.4f}")

# phase 2: SCAFFOLD rounds
c_global = [torch.zeros_like(p) for p in server_model.parameters()]
c_local = [[torch.zeros_like(p) for p in server_model.parameters()] for _ in range(n_clients)]
for rnd in range(args.rounds):
    selected = torch.randperm(n_clients)[:args.clients_per_round].tolist()
    x_params = [p.detach().clone() for p in server_model.parameters()]
    y_deltas, c_deltas, losses = [], [], []
    for i in selected:
        local_model = copy.deepcopy(server_model)
        local_optimizer = torch.optim.SGD(local_model.parameters(), lr=args.local_lr)
        for step in range(args.local_steps):
            xb, yb = sample_batch(*client_data[i])
            loss = F.cross_entropy(local_model(xb), yb)
            local_optimizer.zero_grad()
            loss.backward()
            for p, c, c_i in zip(server_model.parameters(), c_global, c_local[i]):
                p.grad += c - c_i
            local_optimizer.step()
        losses.append(loss.item())
        with torch.no_grad():
            y_delta = [y_i - x for y_i, x in zip(local_model.parameters(), x_params)]
            coef = 1.0 / (args.local_steps * args.local_lr)
            c_plus = [c_i - c - coef * dy for c_i, c, dy in zip(c_local[i], c_global, y_delta)]
            c_deltas.append([c_p - c_i for c_p, c_i in zip(c_plus, c_local[i])])
            y_deltas.append(y_delta)
            c_local[i] = c_plus
    with torch.no_grad():
        for p, *dys in zip(server_model.parameters(), *y_deltas):
            p += args.global_lr * torch.stack(dys).mean(0)
        for c, *dcs in zip(c_global, *c_deltas):
            c += torch.stack(dcs).sum(0) / n_clients
    if rnd % 5 == 0:
        print(f"round {rnd} clients {selected} mean local loss {sum(losses) / len(losses):.4f}")

if args.out:
    c_local_flat = {f"{i}.{j}": c for i, cs in enumerate(c_local) for j, c in enumerate(cs)}
    torch.save({"server_model": server_model.state_dict(), "c_local": c_local_flat,
                "c_global": {str(j): c for j, c in enumerate(c_global)}}, args.out)
