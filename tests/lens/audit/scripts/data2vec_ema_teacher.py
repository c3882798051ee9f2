"""data2vec's student regressing an EMA teacher's layer averages, at a tiny size, written after
Baevski, Hsu, Xu, Babu, Gu and Auli, "data2vec: A General Framework for Self-supervised Learning
in Speech, Vision and Language" (ICML 2022, arXiv:2202.03555) and facebookresearch/fairseq
(examples/data2vec/models/data2vec_audio.py, ``make_ema_teacher`` and ``forward``;
fairseq/modules/ema_module.py, ``EMAModule``): the student encodes a sequence whose masked
steps are replaced by a learned mask embedding, and a final projection regresses, at the
masked steps, the average of the instance-normalised outputs of the teacher's top layers on the
unmasked sequence. The teacher is a copy of the student's encoder frozen ON PURPOSE for the
whole run (``requires_grad_(False)``, never in the optimizer, run under ``torch.no_grad()``)
and updated by hand after each step as an exponential moving average of the student. Sequences
made in the script. Adam. As published: clean. ``--out PATH`` saves the student's and the
teacher's state_dicts after the run, ``--init-out PATH`` before it."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--ema-decay", type=float, default=0.99)
parser.add_argument("--average-top-k-layers", type=int, default=2)
parser.add_argument("--mask-prob", type=float, default=0.4)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
parser.add_argument("--init-out", default=None, help="where to save the tensors before training")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, width, seq_len, n_layers = 6, 16, 10, 3
t = torch.linspace(0, 1, seq_len)[None, :, None]
data = torch.sin(6.28 * (1 + torch.rand(32, 1, dim)) * t) + 0.1 * torch.randn(32, seq_len, dim)


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([
            nn.TransformerEncoderLayer(width, nhead=2, dim_feedforward=32, dropout=0.0,
                                       batch_first=True)
            for _ in range(n_layers)])

    def forward(self, x):
        outs = []
        for layer in self.layers:
            x = layer(x)
            outs.append(x)
        return x, outs


feature_extractor = nn.Linear(dim, width)
mask_emb = nn.Parameter(torch.randn(width) * 0.02)
encoder = Encoder()
final_proj = nn.Linear(width, width)
student = nn.ModuleList([feature_extractor, encoder, final_proj])
teacher = copy.deepcopy(encoder)
teacher.requires_grad_(False)
optimizer = torch.optim.Adam([*student.parameters(), mask_emb], lr=1e-3)


def state():
    return {**{f"feature_extractor.{k}": v for k, v in feature_extractor.state_dict().items()},
            "mask_emb": mask_emb.data,
            **{f"encoder.{k}": v for k, v in encoder.state_dict().items()},
            **{f"final_proj.{k}": v for k, v in final_proj.state_dict().items()},
            **{f"teacher.{k}": v for k, v in teacher.state_dict().items()}}


if args.init_out:
    torch.save(state(), args.init_out)

for step in range(args.steps):
    k = step % (len(data) // args.batch_size)
    source = data[k * args.batch_size:(k + 1) * args.batch_size]
    features = feature_extractor(source)
    mask = torch.rand(features.shape[:2]) < args.mask_prob
    mask[:, 0] = True
    x = torch.where(mask[..., None], mask_emb.expand_as(features), features)
    x, _ = encoder(x)
    with torch.no_grad():
        teacher.eval()
        _, layer_results = teacher(features.detach())
        top = layer_results[-args.average_top_k_layers:]
        y = sum(F.instance_norm(tl.transpose(1, 2)).transpose(1, 2) for tl in top) / len(top)
    pred = final_proj(x[mask])
    loss = F.mse_loss(pred, y[mask])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    # the teacher follows the student's encoder as an exponential moving average
    with torch.no_grad():
        for ema_p, p in zip(teacher.parameters(), encoder.parameters()):
            ema_p.mul_(args.ema_decay).add_(p, alpha=1 - args.ema_decay)
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save(state(), args.out)
