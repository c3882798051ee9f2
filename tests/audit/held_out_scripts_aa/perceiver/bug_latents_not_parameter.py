"""Perceiver: a latent array cross-attending to a long input array, classifying 1-D signals.

Paper: Andrew Jaegle, Felix Gimeno, Andrew Brock, Andrew Zisserman, Oriol Vinyals and Joao
Carreira, "Perceiver: General Perception with Iterative Attention", ICML 2021,
arXiv:2103.03206. Reference implementations: lucidrains/perceiver-pytorch,
perceiver_pytorch/perceiver_pytorch.py (Perceiver.__init__: self.latents as an nn.Parameter,
get_cross_attn / get_latent_attn wrapped in cache_fn so that with weight_tie_layers every layer
after the first reuses one cross-attention and one latent block; Perceiver.forward: Fourier
position features concatenated to the input channels, the latents repeated over the batch,
pre-norm residual cross-attention, feed-forward and latent self-attention, mean over the
latents and a LayerNorm + Linear head; fourier_encode); deepmind/deepmind-research,
perceiver/perceiver.py (PerceiverEncoder with CrossAttention and SelfAttention, the trainable
latent initial array); the training loop follows lucidrains/perceiver-pytorch, train_cifar10.py
(train: zero_grad, forward, backward and one optimizer step per batch). Frequencies are spaced
linearly from 1 to max_freq / 2 as in the paper.

Each example is a byte array of 64 positions with one channel: a Gaussian bump of random
height on a noisy baseline, whose centre lies in one of four equal segments of the array; the
segment is the class. Eight latents of width 32 cross-attend (one head) to the 64 inputs, each
input carrying its value and 9 Fourier features of its position, then run a latent transformer
of one self-attention block (four heads). The cross-attend + latent transformer is applied
three times: the first time with its own weights, the next two times with one shared set of
weights. One Adam (in place of the paper's LAMB) trains the latents, both cross-attends, both
latent transformers and the head. Each update accumulates the gradients of two micro-batches of
16 (each loss divided by the number of micro-batches) after a single zero_grad, then steps once.
Bug: the latent array is created as a plain tensor with requires_grad=True instead of an
nn.Parameter, so it is not registered in model.parameters(), Adam never updates it, and the
latents stay at their random initialisation while only collecting .grad.
"""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--steps", type=int, default=50)
parser.add_argument("--micro_batch", type=int, default=16)
parser.add_argument("--accum", type=int, default=2)
parser.add_argument("--lr", type=float, default=1e-2)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)

INPUT_LEN = 64
NUM_BANDS = 4
MAX_FREQ = 16.0
NUM_LATENTS = 8
LATENT_DIM = 32
DEPTH = 3
NUM_CLASSES = 4


def fourier_features(pos, max_freq, num_bands):
    # pos (L,) in [-1, 1] -> (L, 2 * num_bands + 1): sin, cos of pi * f * x, and x itself
    freqs = torch.linspace(1.0, max_freq / 2, num_bands)
    x = pos[:, None] * freqs[None, :] * math.pi
    return torch.cat([x.sin(), x.cos(), pos[:, None]], dim=-1)


def make_batch(n):
    # a bump whose centre lies in one of NUM_CLASSES equal segments of the array
    y = torch.randint(0, NUM_CLASSES, (n,))
    t = torch.linspace(0.0, 1.0, INPUT_LEN)
    centre = (y + 0.2 + 0.6 * torch.rand(n)) / NUM_CLASSES
    amp = 1.0 + torch.rand(n, 1)
    signal = amp * torch.exp(-((t[None, :] - centre[:, None]) / 0.06) ** 2)
    signal = signal + 0.1 * torch.randn(n, INPUT_LEN)
    return signal[..., None], y


class Attention(nn.Module):
    def __init__(self, query_dim, context_dim, heads, dim_head):
        super().__init__()
        self.heads = heads
        self.scale = dim_head ** -0.5
        inner = heads * dim_head
        self.to_q = nn.Linear(query_dim, inner, bias=False)
        self.to_kv = nn.Linear(context_dim, 2 * inner, bias=False)
        self.to_out = nn.Linear(inner, query_dim)

    def forward(self, x, context):
        b, n, _ = x.shape
        q = self.to_q(x)
        k, v = self.to_kv(context).chunk(2, dim=-1)
        split = lambda t: t.view(b, t.shape[1], self.heads, -1).transpose(1, 2)
        q, k, v = split(q), split(k), split(v)
        attn = (q @ k.transpose(-1, -2) * self.scale).softmax(dim=-1)
        out = (attn @ v).transpose(1, 2).reshape(b, n, -1)
        return self.to_out(out)


class FeedForward(nn.Module):
    def __init__(self, dim, mult=2):
        super().__init__()
        self.net = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, dim * mult), nn.GELU(),
                                 nn.Linear(dim * mult, dim))

    def forward(self, x):
        return self.net(x)


class CrossAttendBlock(nn.Module):
    def __init__(self, dim, input_dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.norm_input = nn.LayerNorm(input_dim)
        self.attn = Attention(dim, input_dim, heads=1, dim_head=dim)
        self.ff = FeedForward(dim)

    def forward(self, latents, inputs):
        latents = latents + self.attn(self.norm(latents), self.norm_input(inputs))
        return latents + self.ff(latents)


class LatentTransformer(nn.Module):
    def __init__(self, dim, n_blocks=1, heads=4):
        super().__init__()
        self.norms = nn.ModuleList([nn.LayerNorm(dim) for _ in range(n_blocks)])
        self.attns = nn.ModuleList([Attention(dim, dim, heads, dim // heads)
                                    for _ in range(n_blocks)])
        self.ffs = nn.ModuleList([FeedForward(dim) for _ in range(n_blocks)])

    def forward(self, x):
        for norm, attn, ff in zip(self.norms, self.attns, self.ffs):
            h = norm(x)
            x = x + attn(h, h)
            x = x + ff(x)
        return x


class Perceiver(nn.Module):
    def __init__(self, input_channels, num_classes):
        super().__init__()
        input_dim = input_channels + 2 * NUM_BANDS + 1
        self.latents = torch.randn(NUM_LATENTS, LATENT_DIM, requires_grad=True)
        # first iteration with its own weights, the later ones share one set
        self.cross_first = CrossAttendBlock(LATENT_DIM, input_dim)
        self.latent_first = LatentTransformer(LATENT_DIM)
        self.cross_shared = CrossAttendBlock(LATENT_DIM, input_dim)
        self.latent_shared = LatentTransformer(LATENT_DIM)
        self.head = nn.Sequential(nn.LayerNorm(LATENT_DIM), nn.Linear(LATENT_DIM, num_classes))
        pos = torch.linspace(-1.0, 1.0, INPUT_LEN)
        self.register_buffer("pos_enc", fourier_features(pos, MAX_FREQ, NUM_BANDS))

    def forward(self, data):
        b = data.shape[0]
        inputs = torch.cat([data, self.pos_enc.expand(b, -1, -1)], dim=-1)
        x = self.latents.unsqueeze(0).expand(b, -1, -1)
        for i in range(DEPTH):
            cross = self.cross_first if i == 0 else self.cross_shared
            latent = self.latent_first if i == 0 else self.latent_shared
            x = latent(cross(x, inputs))
        return self.head(x.mean(dim=1))


model = Perceiver(input_channels=1, num_classes=NUM_CLASSES)
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

for step in range(args.steps):
    optimizer.zero_grad()
    total, correct = 0.0, 0
    for micro in range(args.accum):
        data, y = make_batch(args.micro_batch)
        logits = model(data)
        loss = F.cross_entropy(logits, y) / args.accum
        loss.backward()
        total += loss.item()
        correct += (logits.argmax(-1) == y).sum().item()
    optimizer.step()
    if step % 10 == 0 or step == args.steps - 1:
        acc = correct / (args.accum * args.micro_batch)
        print(f"step {step:3d}  loss {total:.4f}  acc {acc:.3f}")

with torch.no_grad():
    data, y = make_batch(256)
    acc = (model(data).argmax(-1) == y).float().mean()
print(f"eval accuracy {acc.item():.3f}")

if args.out:
    torch.save({"model": {k: v for k, v in model.state_dict().items() if k != "latents"},
                "latents": model.latents.detach().clone()}, args.out)
