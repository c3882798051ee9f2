"""Contrastive predictive coding on time series at a tiny size, written after van den Oord, Li
and Vinyals, "Representation Learning with Contrastive Predictive Coding" (arXiv:1807.03748)
and jefflai108/Contrastive-Predictive-Coding-PyTorch (src/model/model.py, ``CDCK2.forward``).
Bug twin of cpc_timeseries.py: the encoded futures, the keys of InfoNCE (the positive and the
negatives of every prediction), are detached where they are stacked (``encode_samples =
torch.stack([...]).detach()``). The loss still moves the predictions, so the GRU, the
predictors and, through the context, the encoder learn; but the encoder is no longer trained to
make its latents predictable, which the method asks (the futures are made by the same encoder
in the same step). The fix is that line, without the ``.detach()``. ``--out PATH`` saves the
encoder's, the GRU's and the predictors' weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--timestep", type=int, default=3)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

batch, length, hidden = 12, 40, 16
grid = torch.arange(length).float()

encoder = nn.Sequential(nn.Conv1d(1, hidden, 4, stride=2, padding=1), nn.ReLU(),
                        nn.Conv1d(hidden, hidden, 3, padding=1))
gru = nn.GRU(hidden, hidden, batch_first=True)
Wk = nn.ModuleList([nn.Linear(hidden, hidden) for _ in range(args.timestep)])
modules = {"encoder": encoder, "gru": gru, "Wk": Wk}
optimizer = torch.optim.Adam([p for m in modules.values() for p in m.parameters()], lr=3e-3)


def signals():
    freq = 0.2 + 0.6 * torch.rand(batch, 1)
    phase = 6.28 * torch.rand(batch, 1)
    return (torch.sin(freq * grid + phase) + 0.1 * torch.randn(batch, length)).unsqueeze(1)


for step in range(args.steps):
    z = encoder(signals()).transpose(1, 2)
    t = int(torch.randint(0, z.size(1) - args.timestep, ()))
    encode_samples = torch.stack([z[:, t + k] for k in range(1, args.timestep + 1)]).detach()
    output, _ = gru(z[:, :t + 1])
    c_t = output[:, t]
    nce = 0
    for k in range(args.timestep):
        total = encode_samples[k] @ Wk[k](c_t).T
        nce = nce + F.cross_entropy(total, torch.arange(batch))
    loss = nce / args.timestep
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} t {t} loss {loss.item():.4f}")

if args.out:
    torch.save({f"{name}.{k}": v for name, m in modules.items()
                for k, v in m.state_dict().items()}, args.out)
