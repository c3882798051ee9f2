"""Pretext-invariant representation learning at a tiny size, written after Misra and van der
Maaten, "Self-Supervised Learning of Pretext-Invariant Representations" (CVPR 2020,
arXiv:1912.01991), sections 3.1-3.3: a network phi encodes an image I through a head f and its
jigsaw transform I^t, nine patches encoded one by one and concatenated in shuffled order, through
a head g; a memory bank holds m_I, an exponential moving average of f(v_I) over past passes, and
the loss lambda * L_NCE(m_I, g(v_I^t)) + (1 - lambda) * L_NCE(m_I, f(v_I)) scores both heads
against the bank entry of the same image and negatives drawn from the bank. With
HobbitLong/PyContrast (https://github.com/HobbitLong/PyContrast, pycontrast/memory/mem_bank.py
RGBMem: the bank a registered buffer; forward draws K negatives, scores the image and the jigsaw
features against the same bank rows, the positive in column 0, by _compute_logit, and
BaseMem._update_memory mixes x.detach() into the bank with momentum m and L2-normalises it under
torch.no_grad(); pycontrast/networks/util.py JigsawHead, fc1 on each patch and fc2 on the
concatenation; pycontrast/learning/contrast_trainer.py _train_mem, the cross-entropy of each
logit set against label 0, loss = (1 - beta) * losses[0] + beta * losses[1], then
optimizer.zero_grad(), loss.backward(), optimizer.step()) and facebookresearch/vissl
(https://github.com/facebookresearch/vissl, vissl/losses/nce_loss.py NCELossWithMemory with
loss_type "cross_entropy" and NCEAverage.update_memory under torch.no_grad()). The bank is kept
in the model beside the heads, so that its state_dict saves it, and is updated after each step.
1-D signals of nine patches, made in the script; a small conv net with pooling. As published:
clean."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=20)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--negatives", type=int, default=16)
parser.add_argument("--temperature", type=float, default=0.07)
parser.add_argument("--bank-momentum", type=float, default=0.5)
parser.add_argument("--lam", type=float, default=0.5, help="weight of the jigsaw term")
parser.add_argument("--lr", type=float, default=0.03)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_data, n_patches, patch_len, emb_dim = 48, 9, 4, 16
grid = torch.linspace(0, 6.28, n_patches * patch_len)
basis = torch.cat([torch.sin(torch.outer(torch.arange(1, 5).float(), grid)),
                   torch.cos(torch.outer(torch.arange(1, 5).float(), grid))])
dataset = torch.randn(n_data, 8) @ basis + 0.2 * torch.randn(n_data, len(grid))


def views(index):
    """The image I with noise, and its jigsaw transform: noisy patches in a random order."""
    images = dataset[index] + 0.1 * torch.randn(len(index), len(grid))
    patches = (dataset[index] + 0.1 * torch.randn(len(index), len(grid)))
    patches = patches.view(-1, n_patches, patch_len)
    order = torch.stack([torch.randperm(n_patches) for _ in index])
    return images, patches[torch.arange(len(index)).unsqueeze(1), order]


class PIRL(nn.Module):
    def __init__(self):
        super().__init__()
        self.phi = nn.Sequential(nn.Conv1d(1, 8, 3, padding=1), nn.ReLU(),
                                 nn.Conv1d(8, 8, 3, padding=1), nn.ReLU(),
                                 nn.AdaptiveAvgPool1d(4), nn.Flatten())
        self.head_f = nn.Linear(32, emb_dim)
        self.jig_fc1 = nn.Linear(32, emb_dim)
        self.jig_fc2 = nn.Linear(n_patches * emb_dim, emb_dim)
        self.register_buffer("memory", F.normalize(torch.randn(n_data, emb_dim), dim=1))

    def image_embedding(self, images):
        return F.normalize(self.head_f(self.phi(images.unsqueeze(1))), dim=1)

    def jigsaw_embedding(self, patches):
        h = self.jig_fc1(self.phi(patches.reshape(-1, 1, patch_len)))
        return F.normalize(self.jig_fc2(h.view(len(patches), -1)), dim=1)


model = PIRL()
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)

for step in range(args.steps):
    index = torch.randperm(n_data)[:args.batch_size]
    images, patches = views(index)
    f = model.image_embedding(images)
    g = model.jigsaw_embedding(patches)

    # the positive m_I in column 0, then K negatives drawn from the bank
    idx = torch.randint(0, n_data, (len(index), args.negatives + 1))
    idx[:, 0] = index
    weight = model.memory[idx]
    logits_f = torch.bmm(weight, f.unsqueeze(2)).squeeze(2) / args.temperature
    logits_g = torch.bmm(weight, g.unsqueeze(2)).squeeze(2) / args.temperature
    labels = torch.zeros(len(index), dtype=torch.long)
    loss_f, loss_g = F.cross_entropy(logits_f, labels), F.cross_entropy(logits_g, labels)
    loss = args.lam * loss_g + (1 - args.lam) * loss_f

    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

    with torch.no_grad():
        mixed = model.memory[index] * args.bank_momentum + f.detach() * (1 - args.bank_momentum)
        model.memory.index_copy_(0, index, F.normalize(mixed, dim=1))
    print(f"step {step} loss_f {loss_f.item():.4f} loss_g {loss_g.item():.4f}")

if args.out:
    torch.save({f"model.{k}": v for k, v in model.state_dict().items()}, args.out)
