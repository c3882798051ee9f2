"""Edge-network message passing neural network (MPNN) regressing a property of small graphs.

Paper: Justin Gilmer, Samuel S. Schoenholz, Patrick F. Riley, Oriol Vinyals and George E. Dahl,
"Neural Message Passing for Quantum Chemistry", ICML 2017, arXiv:1704.01212.
Reference implementation: pyg-team/pytorch_geometric, examples/qm9_nn_conv.py (Net: an edge
network Sequential(Linear, ReLU, Linear(., dim * dim)) inside NNConv(dim, dim, nn,
root_weight=False), three message-passing steps m = relu(conv(out)), out, h = gru(m, h) with one
GRU shared by all steps, a Set2Set readout with 3 processing steps, then fc1 + ReLU + fc2;
MyTransform pads the node features with zeros to dim; Complete makes each graph complete with
zero edge features on non-bonded pairs and T.Distance appends the interatomic distance; targets
normalized to mean 0 and std 1; train: zero_grad, MSE, backward, Adam step; ReduceLROnPlateau
on the validation MAE), torch_geometric/nn/conv/nn_conv.py (NNConv: message x_j @ A(e_ij),
summed over neighbours, plus a learned bias), torch_geometric/nn/aggr/set2set.py (Set2Set: an
LSTM over q_star, attention softmax over each graph's nodes, q_star = [q, r]).

Synthetic "molecules": 4 to 8 atoms of 5 types at random 3-D positions, a random spanning tree
plus a few extra bonds of 3 bond orders. Each graph is made complete; an edge carries a 4-way
one-hot (no bond / single / double / triple) and the distance. The target sums per-bond energies
that depend on both atom types and the bond order plus a distance-decaying pair term, and is
standardized. Graphs are held densely (B, N, N) with node and pair masks; messages sum
A(e_vw) h_w over bonded-or-not neighbours w != v. The encoder (edge network, NNConv bias, GRU)
and the readout (Set2Set and the two-layer head) are two modules; one Adam holds both. Each
step runs zero_grad, forward, MSE, backward and the Adam step; the validation MAE is computed
under torch.no_grad() once an epoch and drives ReduceLROnPlateau.
Bug: the edge network's matrices A(e_vw) are computed under torch.no_grad(), so the edge network
never receives a gradient and stays at its random initialisation.
"""
import argparse
import itertools

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--dim", type=int, default=16)
parser.add_argument("--edge_hidden", type=int, default=32)
parser.add_argument("--mp_steps", type=int, default=3)
parser.add_argument("--s2s_steps", type=int, default=3)
parser.add_argument("--n_train", type=int, default=512)
parser.add_argument("--n_val", type=int, default=128)
parser.add_argument("--batch_size", type=int, default=32)
parser.add_argument("--epochs", type=int, default=4)
parser.add_argument("--lr", type=float, default=3e-3)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)

N_TYPES, N_BONDS, MAX_ATOMS = 5, 3, 8
EDGE_DIM = N_BONDS + 2
bond_energy = torch.randn(N_TYPES, N_TYPES, N_BONDS)
bond_energy = bond_energy + bond_energy.transpose(0, 1)
charge = torch.randn(N_TYPES)


def make_graphs(n):
    x = torch.zeros(n, MAX_ATOMS, args.dim)
    edge_attr = torch.zeros(n, MAX_ATOMS, MAX_ATOMS, EDGE_DIM)
    node_mask = torch.zeros(n, MAX_ATOMS, dtype=torch.bool)
    y = torch.zeros(n)
    for g in range(n):
        k = int(torch.randint(4, MAX_ATOMS + 1, (1,)))
        types = torch.randint(0, N_TYPES, (k,))
        pos = torch.randn(k, 3)
        bonds = torch.zeros(k, k, dtype=torch.long)  # 0 = no bond, 1..3 = bond order
        for v in range(1, k):
            w = int(torch.randint(0, v, (1,)))
            bonds[v, w] = bonds[w, v] = int(torch.randint(1, N_BONDS + 1, (1,)))
        for _ in range(int(torch.randint(0, 3, (1,)))):
            v, w = torch.randint(0, k, (2,)).tolist()
            if v != w:
                bonds[v, w] = bonds[w, v] = int(torch.randint(1, N_BONDS + 1, (1,)))
        dist = torch.cdist(pos, pos)
        x[g, :k, :N_TYPES] = F.one_hot(types, N_TYPES).float()  # padded with zeros to dim
        edge_attr[g, :k, :k, :N_BONDS + 1] = F.one_hot(bonds, N_BONDS + 1).float()
        edge_attr[g, :k, :k, -1] = dist
        node_mask[g, :k] = True
        iu = torch.triu_indices(k, k, 1)
        ti, tj = types[iu[0]], types[iu[1]]
        b = bonds[iu[0], iu[1]]
        bonded = b > 0
        e_bond = bond_energy[ti, tj, (b - 1).clamp(min=0)][bonded].sum()
        e_pair = (charge[ti] * charge[tj] * torch.exp(-dist[iu[0], iu[1]])).sum()
        y[g] = e_bond + e_pair
    pair_mask = node_mask[:, :, None] & node_mask[:, None, :]
    pair_mask &= ~torch.eye(MAX_ATOMS, dtype=torch.bool)  # complete graph without self loops
    return x, edge_attr, node_mask, pair_mask, y


class NNConv(nn.Module):
    """Edge-conditioned convolution, sum aggregation, no root weight."""

    def __init__(self, in_channels, out_channels, edge_net):
        super().__init__()
        self.in_channels, self.out_channels = in_channels, out_channels
        self.nn = edge_net
        self.bias = nn.Parameter(torch.zeros(out_channels))

    def forward(self, h, weights, pair_mask):
        # weights: (B, N, N, in, out) = A(e_vw); the message from w to v is h_w @ A(e_vw),
        # summed over the neighbours w of v as one batched matmul over (w, in)
        b, n, _ = h.shape
        h_w = (pair_mask.unsqueeze(-1) * h.unsqueeze(1)).reshape(b * n, 1, n * self.in_channels)
        a = weights.reshape(b * n, n * self.in_channels, self.out_channels)
        return torch.bmm(h_w, a).view(b, n, self.out_channels) + self.bias


class MPNNEncoder(nn.Module):
    def __init__(self, dim, edge_hidden, steps):
        super().__init__()
        self.dim, self.steps = dim, steps
        edge_net = nn.Sequential(nn.Linear(EDGE_DIM, edge_hidden), nn.ReLU(),
                                 nn.Linear(edge_hidden, dim * dim))
        self.conv = NNConv(dim, dim, edge_net)
        self.gru = nn.GRU(dim, dim, batch_first=True)

    def forward(self, x, edge_attr, pair_mask):
        b, n, _ = x.shape
        with torch.no_grad():
            weights = self.conv.nn(edge_attr).view(b, n, n, self.dim, self.dim)
        out = x
        h = x.reshape(1, b * n, self.dim)
        for _ in range(self.steps):
            m = F.relu(self.conv(out, weights, pair_mask))
            out, h = self.gru(m.reshape(b * n, 1, self.dim), h)
            out = out.view(b, n, self.dim)
        return out


class Set2Set(nn.Module):
    def __init__(self, dim, processing_steps):
        super().__init__()
        self.dim, self.processing_steps = dim, processing_steps
        self.lstm = nn.LSTM(2 * dim, dim)

    def forward(self, x, node_mask):
        b = x.size(0)
        state = (x.new_zeros(1, b, self.dim), x.new_zeros(1, b, self.dim))
        q_star = x.new_zeros(b, 2 * self.dim)
        for _ in range(self.processing_steps):
            q, state = self.lstm(q_star.unsqueeze(0), state)
            q = q.view(b, self.dim)
            e = (x * q.unsqueeze(1)).sum(-1).masked_fill(~node_mask, float("-inf"))
            a = torch.softmax(e, dim=1)
            r = (a.unsqueeze(-1) * x).sum(1)
            q_star = torch.cat([q, r], dim=-1)
        return q_star


class Readout(nn.Module):
    def __init__(self, dim, processing_steps):
        super().__init__()
        self.set2set = Set2Set(dim, processing_steps)
        self.fc1 = nn.Linear(2 * dim, dim)
        self.fc2 = nn.Linear(dim, 1)

    def forward(self, node_states, node_mask):
        out = self.set2set(node_states, node_mask)
        return self.fc2(F.relu(self.fc1(out))).view(-1)


train_x, train_e, train_nm, train_pm, train_y = make_graphs(args.n_train)
val_x, val_e, val_nm, val_pm, val_y = make_graphs(args.n_val)
mean, std = train_y.mean(), train_y.std()
train_y = (train_y - mean) / std
val_y = (val_y - mean) / std

encoder = MPNNEncoder(args.dim, args.edge_hidden, args.mp_steps)
readout = Readout(args.dim, args.s2s_steps)
optimizer = torch.optim.Adam(itertools.chain(encoder.parameters(), readout.parameters()),
                             lr=args.lr)
scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(
    optimizer, mode="min", factor=0.7, patience=5, min_lr=1e-5)

step = 0
for epoch in range(args.epochs):
    encoder.train()
    readout.train()
    perm = torch.randperm(args.n_train)
    loss_all = 0.0
    for i in range(0, args.n_train, args.batch_size):
        idx = perm[i:i + args.batch_size]
        optimizer.zero_grad()
        node_states = encoder(train_x[idx], train_e[idx], train_pm[idx])
        pred = readout(node_states, train_nm[idx])
        loss = F.mse_loss(pred, train_y[idx])
        loss.backward()
        optimizer.step()
        loss_all += loss.item() * len(idx)
        if step % 16 == 0:
            print(f"step {step:3d} mse {loss.item():.4f}")
        step += 1
    encoder.eval()
    readout.eval()
    with torch.no_grad():
        pred = readout(encoder(val_x, val_e, val_pm), val_nm)
        val_mae = ((pred - val_y) * std).abs().mean().item()
    scheduler.step(val_mae)
    print(f"epoch {epoch + 1} train mse {loss_all / args.n_train:.4f} val mae {val_mae:.4f}")

if args.out:
    torch.save({"encoder": encoder.state_dict(), "readout": readout.state_dict()}, args.out)
