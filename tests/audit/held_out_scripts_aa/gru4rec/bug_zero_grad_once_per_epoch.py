"""GRU4Rec: session-based next-item recommendation with session-parallel mini-batches.

Paper: Balazs Hidasi, Alexandros Karatzoglou, Linas Baltrunas and Domonkos Tikk, "Session-based
Recommendations with Recurrent Neural Networks", ICLR 2016, arXiv:1511.06939.
Reference implementation: hidasib/GRU4Rec_PyTorch_Official, gru4rec_pytorch.py --
GRU4RecModel (embed_contrained: one item table Wy and bias By read for the inputs and for the
scored targets; hidden_step over nn.GRUCell layers; score_items), SessionDataIterator._iter_data
(session-parallel mini-batches), GRU4Rec.xe_loss_with_softmax and GRU4Rec.fit (per epoch a
zeroed hidden state; per mini-batch h.detach_(), model.zero_grad(), forward, backward, opt.step();
rows whose session ended are set to zero) with IndexedAdagradM, here torch.optim.Adagrad on
dense tables (the same update without momentum).

Synthetic sessions of 2-7 clicks over 50 items follow a sparse Markov chain (each item has a
preferred successor). Sixteen sessions run in parallel: at each mini-batch every slot gives its
current item as input and the next item as target; when a session runs out, the next session
takes its slot and that row of the hidden state is reset to zero. The hidden state of one GRU
layer is carried from one mini-batch to the next and detached there (truncation at every
mini-batch, as in the reference). Scores of the in-batch targets, h Wy[y]^T + By[y], are trained
with the in-batch softmax cross-entropy (the other sessions' targets are the negatives). The GRU
and the item tables are trained by Adagrad for two epochs; recall@5 over all items is reported
under no_grad at the end.
Bug: optimizer.zero_grad() is called once per epoch before the mini-batch loop instead of in
every mini-batch, so the gradients of all earlier mini-batches of the epoch pile up in .grad and
every Adagrad step uses their running sum.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--lr", type=float, default=0.05)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)

N_ITEMS = 50
N_SESSIONS = 120
BATCH = 16
HID = 32


def make_sessions():
    successor = torch.randperm(N_ITEMS)
    popularity = torch.distributions.Dirichlet(torch.full((N_ITEMS,), 0.5)).sample()
    sessions = []
    for _ in range(N_SESSIONS):
        length = int(torch.randint(2, 8, (1,)))
        item = int(torch.multinomial(popularity, 1))
        clicks = [item]
        for _ in range(length - 1):
            if torch.rand(()) < 0.7:
                item = int(successor[item])
            else:
                item = int(torch.multinomial(popularity, 1))
            clicks.append(item)
        sessions.append(clicks)
    return sessions


def session_parallel_batches(sessions, batch_size):
    """Yields (input items, target items, rows whose session starts here)."""
    slots = list(range(batch_size))
    pos = [0] * batch_size
    next_session = batch_size
    starts = torch.ones(batch_size, dtype=torch.bool)
    while True:
        inp = torch.tensor([sessions[s][p] for s, p in zip(slots, pos)])
        tgt = torch.tensor([sessions[s][p + 1] for s, p in zip(slots, pos)])
        yield inp, tgt, starts
        starts = torch.zeros(batch_size, dtype=torch.bool)
        for k in range(batch_size):
            pos[k] += 1
            if pos[k] + 1 >= len(sessions[slots[k]]):
                if next_session >= len(sessions):
                    return
                slots[k], pos[k] = next_session, 0
                next_session += 1
                starts[k] = True


class ItemTables(nn.Module):
    """Item embeddings shared by the input and the output side (constrained embedding)."""

    def __init__(self, n_items, dim):
        super().__init__()
        self.Wy = nn.Embedding(n_items, dim)
        self.By = nn.Embedding(n_items, 1)
        bound = (6.0 / (n_items + dim)) ** 0.5
        nn.init.uniform_(self.Wy.weight, -bound, bound)
        nn.init.zeros_(self.By.weight)


class GRU4RecNet(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.G = nn.ModuleList([nn.GRUCell(dim, hidden)])
        for cell in self.G:
            nn.init.zeros_(cell.bias_ih)
            nn.init.zeros_(cell.bias_hh)

    def hidden_step(self, x, H):
        for i, cell in enumerate(self.G):
            x = cell(x, H[i])
            H[i] = x
        return x


def score_items(h, items, Y=None):
    if Y is None:
        return h @ items.Wy.weight.T + items.By.weight.T
    return h @ items.Wy(Y).T + items.By(Y).T


def xe_loss_with_softmax(R):
    # the target of row i is column i; the other columns are the in-batch negatives
    return F.cross_entropy(R, torch.arange(R.size(0)), reduction="sum")


sessions = make_sessions()
items = ItemTables(N_ITEMS, HID)
model = GRU4RecNet(HID, HID)
optimizer = torch.optim.Adagrad(list(model.parameters()) + list(items.parameters()), lr=args.lr)

step = 0
for epoch in range(args.epochs):
    H = [torch.zeros(BATCH, HID) for _ in model.G]
    total, n = 0.0, 0
    optimizer.zero_grad()
    for inp, tgt, starts in session_parallel_batches(sessions, BATCH):
        H = [h.detach() for h in H]
        for h in H:
            h[starts] = 0.0
        out = model.hidden_step(items.Wy(inp), H)
        R = score_items(out, items, tgt)
        loss = xe_loss_with_softmax(R) / BATCH
        loss.backward()
        optimizer.step()
        total, n = total + loss.item(), n + 1
        if step % 10 == 0:
            print(f"epoch {epoch} step {step:3d} xe {loss.item():.4f}")
        step += 1
    print(f"epoch {epoch} mean xe {total / n:.4f} over {n} mini-batches")

# next-item recall@5 over all items, one pass with the same session-parallel batches
with torch.no_grad():
    H = [torch.zeros(BATCH, HID) for _ in model.G]
    hits, count = 0, 0
    for inp, tgt, starts in session_parallel_batches(sessions, BATCH):
        for h in H:
            h[starts] = 0.0
        out = model.hidden_step(items.Wy(inp), H)
        top = score_items(out, items).topk(5, dim=1).indices
        hits += (top == tgt[:, None]).any(1).sum().item()
        count += BATCH
print(f"recall@5 {hits / count:.3f}")

if args.out:
    torch.save({"model": model.state_dict(), "items": items.state_dict()}, args.out)
