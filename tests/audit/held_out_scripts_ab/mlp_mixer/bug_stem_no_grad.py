"""MLP-Mixer pre-trained on tiny synthetic images, then fine-tuned with a new zero-init head.

Paper: Ilya Tolstikhin, Neil Houlsby, Alexander Kolesnikov, Lucas Beyer, Xiaohua Zhai, Thomas
Unterthiner, Jessica Yung, Andreas Steiner, Daniel Keysers, Jakob Uszkoreit, Mario Lucic and
Alexey Dosovitskiy, "MLP-Mixer: An all-MLP Architecture for Vision", NeurIPS 2021,
arXiv:2105.01601.
Reference implementation: google-research/vision_transformer, vit_jax/models_mixer.py (MlpBlock:
Dense -> gelu -> Dense; MixerBlock: LayerNorm, the token-mixing MlpBlock applied across patches
on the transposed tokens, residual add, LayerNorm, the channel-mixing MlpBlock, residual add;
MlpMixer: a patch-size/stride convolution "stem" as the per-patch linear embedding, the blocks,
pre_head_layer_norm, global average pooling over patches, and a Dense head with zero kernel
init), vit_jax/checkpoint.py (load_pretrained: every pre-trained weight is kept except the head,
which is replaced by the freshly initialised, zero, head of the new task), vit_jax/train.py
(train_and_evaluate / make_update_fn: softmax cross-entropy, optax.clip_by_global_norm then SGD
with momentum 0.9 over all parameters) and vit_jax/utils.py (create_learning_rate_schedule:
linear warmup, then linear or cosine decay). The paper pre-trains with Adam (0.9, 0.999), linear
warmup and linear decay, weight decay and global-norm clipping at 1, and fine-tunes the whole
network with momentum SGD, clipping at 1, warmup plus cosine decay and no weight decay.

Images are 3x16x16 with 4x4 patches (16 tokens). Each class of a task has a fixed blocky
prototype; a sample is its prototype cyclically shifted by up to 3 pixels in each direction plus
Gaussian noise. Phase 1 pre-trains the Mixer (width 32, token MLP 16, channel MLP 64, 2 blocks)
on an 8-class upstream task with AdamW (decoupled weight decay), warmup then linear decay and
clipping at global norm 1. Phase 2 swaps the head for a zero-initialised 4-class head, builds a
fresh SGD (momentum 0.9) over all parameters of the model with the new head, and fine-tunes the
whole network with warmup plus cosine decay and clipping at 1. Each phase has its own loop and
ends with an eval accuracy computed under torch.no_grad(). The pre-training head is kept and
saved with the fine-tuned model.
Bug: the patch-embedding stem runs under torch.no_grad() in MlpMixer.forward, as if patchifying
were preprocessing, so the per-patch linear embedding never gets a gradient in either phase.
"""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--image_size", type=int, default=16)
parser.add_argument("--patch", type=int, default=4)
parser.add_argument("--hidden_dim", type=int, default=32)
parser.add_argument("--tokens_mlp_dim", type=int, default=16)
parser.add_argument("--channels_mlp_dim", type=int, default=64)
parser.add_argument("--num_blocks", type=int, default=2)
parser.add_argument("--batch", type=int, default=32)
parser.add_argument("--pre_classes", type=int, default=8)
parser.add_argument("--pre_steps", type=int, default=40)
parser.add_argument("--pre_lr", type=float, default=3e-3)
parser.add_argument("--pre_wd", type=float, default=0.1)
parser.add_argument("--pre_warmup", type=int, default=5)
parser.add_argument("--ft_classes", type=int, default=4)
parser.add_argument("--ft_steps", type=int, default=30)
parser.add_argument("--ft_lr", type=float, default=0.03)
parser.add_argument("--ft_warmup", type=int, default=3)
parser.add_argument("--grad_norm_clip", type=float, default=1.0)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)


def make_prototypes(num_classes, size):
    coarse = torch.rand(num_classes, 3, size // 4, size // 4)
    return coarse.repeat_interleave(4, 2).repeat_interleave(4, 3)


def sample_task(prototypes, n):
    labels = torch.randint(0, prototypes.size(0), (n,))
    images = prototypes[labels].clone()
    shifts = torch.randint(-3, 4, (n, 2))
    for i in range(n):
        images[i] = torch.roll(images[i], (int(shifts[i, 0]), int(shifts[i, 1])), (1, 2))
    return images + 0.3 * torch.randn_like(images), labels


def lr_schedule(step, total_steps, base, decay_type, warmup_steps, linear_end=1e-5):
    progress = min(max((step - warmup_steps) / float(total_steps - warmup_steps), 0.0), 1.0)
    if decay_type == "linear":
        lr = linear_end + (base - linear_end) * (1.0 - progress)
    else:
        lr = base * 0.5 * (1.0 + math.cos(math.pi * progress))
    if warmup_steps:
        lr = lr * min(1.0, step / warmup_steps)
    return lr


class MlpBlock(nn.Module):
    def __init__(self, dim, mlp_dim):
        super().__init__()
        self.fc1 = nn.Linear(dim, mlp_dim)
        self.fc2 = nn.Linear(mlp_dim, dim)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))


class MixerBlock(nn.Module):
    def __init__(self, num_tokens, dim, tokens_mlp_dim, channels_mlp_dim):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.token_mixing = MlpBlock(num_tokens, tokens_mlp_dim)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.channel_mixing = MlpBlock(dim, channels_mlp_dim)

    def forward(self, x):
        y = self.norm1(x).transpose(1, 2)
        y = self.token_mixing(y).transpose(1, 2)
        x = x + y
        return x + self.channel_mixing(self.norm2(x))


def zero_head(dim, num_classes):
    head = nn.Linear(dim, num_classes)
    nn.init.zeros_(head.weight)
    nn.init.zeros_(head.bias)
    return head


class MlpMixer(nn.Module):
    def __init__(self, num_classes, image_size, patch, dim, tokens_mlp_dim, channels_mlp_dim,
                 num_blocks):
        super().__init__()
        num_tokens = (image_size // patch) ** 2
        self.stem = nn.Conv2d(3, dim, patch, stride=patch)
        self.blocks = nn.ModuleList([
            MixerBlock(num_tokens, dim, tokens_mlp_dim, channels_mlp_dim)
            for _ in range(num_blocks)])
        self.pre_head_layer_norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = zero_head(dim, num_classes)

    def forward(self, images):
        with torch.no_grad():
            x = self.stem(images)
        x = x.flatten(2).transpose(1, 2)
        for block in self.blocks:
            x = block(x)
        x = self.pre_head_layer_norm(x).mean(1)
        return self.head(x)


def evaluate(model, images, labels):
    model.eval()
    with torch.no_grad():
        acc = (model(images).argmax(-1) == labels).float().mean().item()
    model.train()
    return acc


model = MlpMixer(args.pre_classes, args.image_size, args.patch, args.hidden_dim,
                 args.tokens_mlp_dim, args.channels_mlp_dim, args.num_blocks)
pre_protos = make_prototypes(args.pre_classes, args.image_size)
ft_protos = make_prototypes(args.ft_classes, args.image_size)
pre_eval = sample_task(pre_protos, 256)
ft_eval = sample_task(ft_protos, 256)

# Phase 1: upstream pre-training with Adam, warmup + linear decay, global-norm clipping.
optimizer = torch.optim.AdamW(model.parameters(), lr=args.pre_lr, betas=(0.9, 0.999),
                              weight_decay=args.pre_wd)
model.train()
for step in range(1, args.pre_steps + 1):
    for group in optimizer.param_groups:
        group["lr"] = lr_schedule(step, args.pre_steps, args.pre_lr, "linear", args.pre_warmup)
    images, labels = sample_task(pre_protos, args.batch)
    optimizer.zero_grad()
    loss = F.cross_entropy(model(images), labels)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_norm_clip)
    optimizer.step()
    if step % 10 == 0 or step == 1:
        print(f"pre-train step {step:3d} loss {loss.item():.4f}")
print(f"pre-train eval acc {evaluate(model, *pre_eval):.3f}")

# Phase 2: fine-tune the whole network with a new zero-init head, momentum SGD, cosine decay.
pretrain_head = model.head
model.head = zero_head(args.hidden_dim, args.ft_classes)
ft_optimizer = torch.optim.SGD(model.parameters(), lr=args.ft_lr, momentum=0.9)
for step in range(1, args.ft_steps + 1):
    for group in ft_optimizer.param_groups:
        group["lr"] = lr_schedule(step, args.ft_steps, args.ft_lr, "cosine", args.ft_warmup)
    images, labels = sample_task(ft_protos, args.batch)
    ft_optimizer.zero_grad()
    loss = F.cross_entropy(model(images), labels)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_norm_clip)
    ft_optimizer.step()
    if step % 10 == 0 or step == 1:
        print(f"fine-tune step {step:3d} loss {loss.item():.4f}")
print(f"fine-tune eval acc {evaluate(model, *ft_eval):.3f}")

if args.out:
    torch.save({"model": model.state_dict(), "pretrain_head": pretrain_head.state_dict()},
               args.out)
