"""CLIP: contrastive image-text pre-training with a learned temperature, then fine-tuning.

Paper: Alec Radford, Jong Wook Kim, Chris Hallacy, Aditya Ramesh, Gabriel Goh, Sandhini Agarwal,
Girish Sastry, Amanda Askell, Pamela Mishkin, Jack Clark, Gretchen Krueger and Ilya Sutskever,
"Learning Transferable Visual Models From Natural Language Supervision", arXiv:2103.00020, ICML
2021; fine-tuning phase after Mitchell Wortsman, Gabriel Ilharco, Jong Wook Kim et al., "Robust
fine-tuning of zero-shot models" (WiSE-FT), arXiv:2109.01903, CVPR 2022.
Reference implementations: openai/CLIP, clip/model.py (CLIP: logit_scale =
nn.Parameter(torch.ones([]) * np.log(1 / 0.07)); VisionTransformer with class embedding,
positional embedding, ln_pre, ln_post and proj; encode_text with a causal mask, ln_final and the
features at the end-of-text token, text.argmax(-1), times text_projection; forward: normalized
features, logit_scale.exp() * image @ text.T); mlfoundations/open_clip, src/open_clip/loss.py
(ClipLoss: (cross_entropy(logits_per_image) + cross_entropy(logits_per_text)) / 2 with labels
arange(batch)), src/open_clip_train/main.py (AdamW with two groups: no weight decay on gains,
biases and logit_scale, `exclude = p.ndim < 2 or "bn"/"ln"/"bias"/"logit_scale" in n`),
src/open_clip_train/scheduler.py (cosine_lr with linear warm-up) and src/open_clip_train/train.py
(train_one_epoch: scheduler(step), zero_grad, loss, backward, step, then logit_scale clamped to
[0, ln 100] under torch.no_grad()); mlfoundations/wise-ft, src/models/zeroshot.py
(get_zeroshot_classifier: class text embeddings averaged over templates, normalized, times
logit_scale.exp(), under torch.no_grad()), src/models/modeling.py (ClassificationHead with
normalize=True, ImageClassifier) and src/models/finetune.py (end-to-end fine-tuning: AdamW over
the image encoder and the head, cosine_lr, cross-entropy, clip_grad_norm_ at 1.0).

Synthetic paired data: each image is a 3x8x8 picture of a shape (square, disk, cross, diamond)
of a size (small, large) in a colour (red, green, blue, yellow) plus noise; its caption is the
token sequence "<sot> a <size> <colour> <shape> <eot>" padded to 8 tokens, with <eot> the highest
token id as in CLIP's tokenizer. Phase 1 pre-trains a one-block ViT image tower (4x4 patches) and
a one-block causal text transformer, both of width 32 projecting to a 32-d joint space, with the
symmetric InfoNCE loss at the learned temperature; after every AdamW step the log-scale is
clamped to [0, ln 100]. Phase 2 builds a zero-shot head for the four shapes from the text tower
(prompt ensemble over sizes and colours), then fine-tunes the image tower and the head end to end
with cross-entropy, its own AdamW, cosine schedule and loop, as in WiSE-FT.
As published: clean.
"""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--steps", type=int, default=60)
parser.add_argument("--ft_steps", type=int, default=30)
parser.add_argument("--batch_size", type=int, default=32)
parser.add_argument("--width", type=int, default=32)
parser.add_argument("--embed_dim", type=int, default=32)
parser.add_argument("--heads", type=int, default=4)
parser.add_argument("--lr", type=float, default=2e-3)
parser.add_argument("--wd", type=float, default=0.1)
parser.add_argument("--warmup", type=int, default=6)
parser.add_argument("--ft_lr", type=float, default=5e-4)
parser.add_argument("--ft_wd", type=float, default=0.1)
parser.add_argument("--ft_warmup", type=int, default=3)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)

SHAPES = ["square", "disk", "cross", "diamond"]
COLOURS = ["red", "green", "blue", "yellow"]
SIZES = ["small", "large"]
WORDS = ["a"] + SIZES + COLOURS + SHAPES
VOCAB = {w: i + 1 for i, w in enumerate(WORDS)}  # 0 is padding
SOT, EOT = len(WORDS) + 1, len(WORDS) + 2
VOCAB_SIZE = len(WORDS) + 3
CONTEXT = 8
RGB = torch.tensor([[1.0, 0.1, 0.1], [0.1, 1.0, 0.1], [0.1, 0.1, 1.0], [1.0, 1.0, 0.1]])


def shape_mask(shape, size):
    r = 0.5 if size == 0 else 0.9
    ys, xs = torch.meshgrid(torch.linspace(-1, 1, 8), torch.linspace(-1, 1, 8), indexing="ij")
    if shape == 0:
        m = (xs.abs() < r) & (ys.abs() < r)
    elif shape == 1:
        m = xs ** 2 + ys ** 2 < r ** 2
    elif shape == 2:
        m = ((xs.abs() < r / 3) & (ys.abs() < r)) | ((ys.abs() < r / 3) & (xs.abs() < r))
    else:
        m = xs.abs() + ys.abs() < r
    return m.float()


MASKS = torch.stack([torch.stack([shape_mask(s, z) for z in range(2)]) for s in range(4)])


def tokenize(size, colour, shape):
    ids = [SOT, VOCAB["a"], VOCAB[SIZES[size]], VOCAB[COLOURS[colour]], VOCAB[SHAPES[shape]], EOT]
    return torch.tensor(ids + [0] * (CONTEXT - len(ids)))


def make_batch(n):
    shape = torch.randint(0, 4, (n,))
    colour = torch.randint(0, 4, (n,))
    size = torch.randint(0, 2, (n,))
    mask = MASKS[shape, size]
    images = mask[:, None] * RGB[colour][:, :, None, None] + 0.1 * torch.randn(n, 3, 8, 8)
    texts = torch.stack([tokenize(int(z), int(c), int(s)) for z, c, s in zip(size, colour, shape)])
    return images, texts, shape


class ResidualAttentionBlock(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.ln_1 = nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.ln_2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(),
                                 nn.Linear(4 * width, width))

    def forward(self, x, attn_mask=None):
        h = self.ln_1(x)
        x = x + self.attn(h, h, h, need_weights=False, attn_mask=attn_mask)[0]
        return x + self.mlp(self.ln_2(x))


class VisionTransformer(nn.Module):
    def __init__(self, patch, width, heads, output_dim):
        super().__init__()
        scale = width ** -0.5
        self.conv1 = nn.Conv2d(3, width, patch, stride=patch, bias=False)
        self.class_embedding = nn.Parameter(scale * torch.randn(width))
        self.positional_embedding = nn.Parameter(scale * torch.randn((8 // patch) ** 2 + 1, width))
        self.ln_pre = nn.LayerNorm(width)
        self.block = ResidualAttentionBlock(width, heads)
        self.ln_post = nn.LayerNorm(width)
        self.proj = nn.Parameter(scale * torch.randn(width, output_dim))

    def forward(self, x):
        x = self.conv1(x).flatten(2).transpose(1, 2)
        cls = self.class_embedding.expand(x.shape[0], 1, -1)
        x = torch.cat([cls, x], 1) + self.positional_embedding
        x = self.block(self.ln_pre(x))
        return self.ln_post(x[:, 0]) @ self.proj


class CLIP(nn.Module):
    def __init__(self, embed_dim, width, heads):
        super().__init__()
        self.visual = VisionTransformer(4, width, heads, embed_dim)
        self.token_embedding = nn.Embedding(VOCAB_SIZE, width)
        self.positional_embedding = nn.Parameter(0.01 * torch.randn(CONTEXT, width))
        self.transformer = ResidualAttentionBlock(width, heads)
        self.ln_final = nn.LayerNorm(width)
        self.text_projection = nn.Parameter(width ** -0.5 * torch.randn(width, embed_dim))
        self.logit_scale = nn.Parameter(torch.ones([]) * math.log(1 / 0.07))
        self.register_buffer("attn_mask", torch.full((CONTEXT, CONTEXT), float("-inf")).triu(1))
        nn.init.normal_(self.token_embedding.weight, std=0.02)

    def encode_image(self, image):
        return self.visual(image)

    def encode_text(self, text):
        x = self.token_embedding(text) + self.positional_embedding
        x = self.ln_final(self.transformer(x, attn_mask=self.attn_mask))
        return x[torch.arange(x.shape[0]), text.argmax(dim=-1)] @ self.text_projection

    def forward(self, image, text):
        image_features = F.normalize(self.encode_image(image), dim=-1)
        text_features = F.normalize(self.encode_text(text), dim=-1)
        return image_features, text_features, self.logit_scale.exp()


def clip_loss(image_features, text_features, logit_scale):
    logits_per_image = logit_scale * image_features @ text_features.T
    logits_per_text = logits_per_image.T
    labels = torch.arange(image_features.shape[0])
    return (F.cross_entropy(logits_per_image, labels) +
            F.cross_entropy(logits_per_text, labels)) / 2


class ClassificationHead(nn.Linear):
    def __init__(self, weights):
        super().__init__(weights.shape[1], weights.shape[0])
        self.weight = nn.Parameter(weights.clone())
        self.bias = nn.Parameter(torch.zeros(weights.shape[0]))

    def forward(self, inputs):
        return super().forward(inputs / inputs.norm(dim=-1, keepdim=True))


def cosine_lr(optimizer, base_lr, warmup, total):
    def adjust(step):
        if step < warmup:
            lr = base_lr * (step + 1) / warmup
        else:
            lr = 0.5 * (1 + math.cos(math.pi * (step - warmup) / (total - warmup))) * base_lr
        for group in optimizer.param_groups:
            group["lr"] = lr
    return adjust


model = CLIP(args.embed_dim, args.width, args.heads)

# Phase 1: contrastive pre-training.
named = list(model.named_parameters())


def exclude(n, p):
    return p.ndim < 2 or "bn" in n or "ln" in n or "bias" in n or "logit_scale" in n


gain_or_bias_params = [p for n, p in named if exclude(n, p) and p.requires_grad]
rest_params = [p for n, p in named if not exclude(n, p) and p.requires_grad]
optimizer = torch.optim.AdamW([
    {"params": gain_or_bias_params, "weight_decay": 0.0},
    {"params": rest_params, "weight_decay": args.wd},
], lr=args.lr, betas=(0.9, 0.98), eps=1e-6)
scheduler = cosine_lr(optimizer, args.lr, args.warmup, args.steps)

model.train()
for step in range(args.steps):
    scheduler(step)
    images, texts, _ = make_batch(args.batch_size)
    optimizer.zero_grad()
    image_features, text_features, logit_scale = model(images, texts)
    total_loss = clip_loss(image_features, text_features, logit_scale)
    total_loss.backward()
    optimizer.step()
    with torch.no_grad():
        model.logit_scale.clamp_(0, math.log(100))
    if step % 20 == 0 or step == args.steps - 1:
        print(f"pretrain step {step:3d} loss {total_loss.item():.4f} "
              f"scale {model.logit_scale.exp().item():.3f}")

# Zero-shot head for the four shapes (prompt ensemble over sizes and colours).
model.eval()
with torch.no_grad():
    zeroshot_weights = []
    for s in range(len(SHAPES)):
        prompts = torch.stack([tokenize(z, c, s) for z in range(2) for c in range(4)])
        embeddings = F.normalize(model.encode_text(prompts), dim=-1).mean(0)
        zeroshot_weights.append(embeddings / embeddings.norm())
    zeroshot_weights = torch.stack(zeroshot_weights) * model.logit_scale.exp()
head = ClassificationHead(zeroshot_weights)

x_eval, _, y_eval = make_batch(256)
with torch.no_grad():
    zs_acc = (head(model.encode_image(x_eval)).argmax(1) == y_eval).float().mean()
print(f"zero-shot accuracy {zs_acc.item():.3f}")

# Phase 2: end-to-end fine-tuning of the image tower and the zero-shot head.
params = list(model.visual.parameters()) + list(head.parameters())
ft_optimizer = torch.optim.AdamW(params, lr=args.ft_lr, weight_decay=args.ft_wd)
ft_scheduler = cosine_lr(ft_optimizer, args.ft_lr, args.ft_warmup, args.ft_steps)

model.train()
for step in range(args.ft_steps):
    ft_scheduler(step)
    images, _, labels = make_batch(args.batch_size)
    ft_optimizer.zero_grad()
    features = model.encode_image(images)
    logits = head(features)
    loss = F.cross_entropy(logits, labels)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    ft_optimizer.step()
    if step % 10 == 0 or step == args.ft_steps - 1:
        print(f"finetune step {step:3d} loss {loss.item():.4f}")

model.eval()
with torch.no_grad():
    ft_acc = (head(model.encode_image(x_eval)).argmax(1) == y_eval).float().mean()
print(f"fine-tuned accuracy {ft_acc.item():.3f}")

if args.out:
    torch.save({"model": {k: v for k, v in model.state_dict().items() if k != "logit_scale"},
                "logit_scale": model.logit_scale.detach().clone(),
                "head": head.state_dict()}, args.out)
