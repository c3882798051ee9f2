"""BEiT masked image modeling at a tiny size, written after Bao, Dong, Piao and Wei, "BEiT: BERT
Pre-Training of Image Transformers" (ICLR 2022, arXiv:2106.08254), sections 2.1-2.3: a discrete
VAE turns each image into a grid of visual token ids; the image is split into patches of the same
grid, some patches are masked, their embeddings replaced by a learnt mask token, and a
Transformer is trained with the cross-entropy of predicting the tokenizer's ids at the masked
positions, the tokenizer only producing the targets. With microsoft/unilm beit/
(https://github.com/microsoft/unilm/tree/master/beit, modeling_discrete_vae.py DiscreteVAE:
strided conv encoder to token logits, gumbel_softmax over the logits mixing a codebook, conv
decoder, reconstruction loss, and get_codebook_indices, the argmax of the logits under
torch.no_grad() in eval mode; modeling_pretrain.py VisionTransformerForMaskedImageModeling:
patch_embed, cls_token, mask_token and pos_embed parameters, x * (1 - w) + mask_token * w on the
masked positions, the blocks, the norm and lm_head applied to the masked tokens only, and
no_weight_decay for pos_embed and cls_token; engine_for_pretraining.py train_one_epoch: under
torch.no_grad() the tokenizer's ids of the images and labels = input_ids[bool_masked_pos], the
model's outputs on the masked positions, nn.CrossEntropyLoss, optimizer.zero_grad() and the
loss scaler's backward and step of the model's optimizer). Two phases, as the tokenizer is
trained here instead of loaded: phase 1 trains a small DiscreteVAE on 8x8 images made in the
script (stripes, blobs and noise), phase 2 freezes it and pretrains a two-block Transformer over
2x2 patches (the 4x4 token grid) on its ids, with AdamW over weight-decay groups.
Bug: phase 2 clears the gradients with tok_optimizer.zero_grad(), the phase-1 loop's line kept as it
was, instead of the masked-image model's optimizer.zero_grad() (train_one_epoch calls
optimizer.zero_grad() on the optimizer that steps the model before every backward), so the
frozen tokenizer's .grad is cleared while the Transformer's .grad is never: from the second
phase-2 step on AdamW steps the model on the running sum of the gradients of every step so far."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--tokenizer-steps", type=int, default=60)
parser.add_argument("--steps", type=int, default=40)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--num-masked", type=int, default=6, help="masked patches out of 16")
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

image_size, patch_size, num_tokens, embed_dim = 8, 2, 16, 32
grid = image_size // patch_size


def make_images(n):
    """Stripes of a random orientation, frequency and phase, a Gaussian blob, and noise."""
    coords = torch.arange(image_size).float()
    yy, xx = torch.meshgrid(coords, coords, indexing="ij")
    angle = torch.randint(0, 4, (n, 1, 1)) * (math.pi / 4)
    freq = torch.rand(n, 1, 1) * 1.2 + 0.4
    phase = torch.rand(n, 1, 1) * 2 * math.pi
    stripes = torch.sin(freq * (xx * angle.cos() + yy * angle.sin()) + phase)
    centre = torch.rand(n, 2, 1, 1) * image_size
    blob = torch.exp(-((xx - centre[:, 0]) ** 2 + (yy - centre[:, 1]) ** 2) / 4.0)
    return (0.5 * stripes + blob + 0.1 * torch.randn(n, image_size, image_size)).unsqueeze(1)


train_images = make_images(512)


class DiscreteVAE(nn.Module):
    def __init__(self, hidden=32, codebook_dim=16, temperature=0.9):
        super().__init__()
        self.temperature = temperature
        self.codebook = nn.Embedding(num_tokens, codebook_dim)
        self.encoder = nn.Sequential(nn.Conv2d(1, hidden, 4, stride=2, padding=1), nn.ReLU(),
                                     nn.Conv2d(hidden, hidden, 3, padding=1), nn.ReLU(),
                                     nn.Conv2d(hidden, num_tokens, 1))
        self.decoder = nn.Sequential(nn.ConvTranspose2d(codebook_dim, hidden, 4, stride=2, padding=1),
                                     nn.ReLU(), nn.Conv2d(hidden, hidden, 3, padding=1), nn.ReLU(),
                                     nn.Conv2d(hidden, 1, 1))

    @torch.no_grad()
    def get_codebook_indices(self, images):
        was_training = self.training
        self.eval()
        ids = self.encoder(images).argmax(1)
        self.train(was_training)
        return ids

    def forward(self, images):
        logits = self.encoder(images)
        soft_one_hot = F.gumbel_softmax(logits, tau=self.temperature, dim=1)
        sampled = torch.einsum("bnhw,nd->bdhw", soft_one_hot, self.codebook.weight)
        return F.mse_loss(self.decoder(sampled), images)


class MaskedImageModel(nn.Module):
    def __init__(self, depth=2, num_heads=4):
        super().__init__()
        self.patch_embed = nn.Conv2d(1, embed_dim, patch_size, stride=patch_size)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.mask_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, grid * grid + 1, embed_dim))
        self.blocks = nn.ModuleList([
            nn.TransformerEncoderLayer(embed_dim, num_heads, dim_feedforward=2 * embed_dim, dropout=0.0,
                                       batch_first=True, norm_first=True) for _ in range(depth)])
        self.norm = nn.LayerNorm(embed_dim)
        self.lm_head = nn.Linear(embed_dim, num_tokens)
        for p in (self.cls_token, self.mask_token, self.pos_embed, self.lm_head.weight):
            nn.init.trunc_normal_(p, std=0.02, a=-0.02, b=0.02)

    def no_weight_decay(self):
        return {"pos_embed", "cls_token"}

    def forward(self, x, bool_masked_pos):
        """x: patch embeddings (B x N x D); returns the logits at the masked positions."""
        w = bool_masked_pos.unsqueeze(-1).type_as(x)
        x = x * (1 - w) + self.mask_token.expand_as(x) * w
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], 1) + self.pos_embed
        for blk in self.blocks:
            x = blk(x)
        x = self.norm(x)[:, 1:]
        return self.lm_head(x[bool_masked_pos])


# phase 1: the visual tokenizer
tokenizer = DiscreteVAE()
tok_optimizer = torch.optim.Adam(tokenizer.parameters(), lr=3e-3)
for step in range(args.tokenizer_steps):
    images = train_images[torch.randint(0, len(train_images), (args.batch_size,))]
    recon_loss = tokenizer(images)
    tok_optimizer.zero_grad()
    recon_loss.backward()
    tok_optimizer.step()
    if step % 20 == 0:
        print(f"tokenizer step {step} recon {recon_loss.item():.4f}")

# phase 2: masked image modeling on the frozen tokenizer's ids
tokenizer.requires_grad_(False)
mim = MaskedImageModel()
decay, no_decay = [], []
for name, param in mim.named_parameters():
    if param.ndim == 1 or name.endswith(".bias") or name in mim.no_weight_decay():
        no_decay.append(param)
    else:
        decay.append(param)
optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05},
                               {"params": no_decay, "weight_decay": 0.0}], lr=1.5e-3)
for step in range(args.steps):
    images = train_images[torch.randint(0, len(train_images), (args.batch_size,))]
    rank = torch.rand(args.batch_size, grid * grid).argsort(1).argsort(1)
    bool_masked_pos = rank < args.num_masked

    with torch.no_grad():
        input_ids = tokenizer.get_codebook_indices(images).flatten(1)
        labels = input_ids[bool_masked_pos]
    patches = mim.patch_embed(images).flatten(2).transpose(1, 2)

    outputs = mim(patches, bool_masked_pos)
    loss = nn.CrossEntropyLoss()(outputs, labels)
    tok_optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 10 == 0:
        mlm_acc = (outputs.argmax(-1) == labels).float().mean().item()
        print(f"mim step {step} loss {loss.item():.3f} acc {mlm_acc:.3f}")

if args.out:
    torch.save({**{f"tokenizer.{k}": v for k, v in tokenizer.state_dict().items()},
                **{f"mim.{k}": v for k, v in mim.state_dict().items()}}, args.out)
