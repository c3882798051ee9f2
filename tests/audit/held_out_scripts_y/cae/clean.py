"""Context Autoencoder (CAE) pre-training of a tiny ViT on synthetic images.

Paper: X. Chen, M. Ding, X. Wang, Y. Xin, S. Mo, Y. Wang, S. Han, P. Luo, G. Zeng, J. Wang,
"Context Autoencoder for Self-Supervised Representation Learning", IJCV 2023,
arXiv:2202.03026.
Reference implementation: Atten4Vis/CAE, models/modeling_cae.py (ContextAutoencoderViT.forward,
_init_alignment_encoder, alignment_parameter_update), models/modeling_cae_helper.py
(VisionTransformerEncoder, LatentRegresser, RegressorBlock, Decoder) and
furnace/engine_for_pretraining.py (train_one_epoch); also PaddlePaddle/VIMER CAE.

Images are 16x16 gratings plus a blob, cut into 16 patches of 4x4; half of the patches of each
image are masked at random. The encoder (patch embedding, class token, fixed 2-D sin-cos
position embedding, two pre-norm transformer blocks) sees only the visible patches. The latent
contextual regressor starts from a learnt mask token at every masked position and, by cross
attention over the visible representations and itself, predicts the masked patches'
representations. Alignment: the same encoder is run on the masked patches under
torch.no_grad() (the reference runs an alignment encoder that holds the encoder's weights, in
no_grad, and detaches again in the loss) and the regressor's predictions are pulled to these
targets by MSE, so the alignment loss trains regressor and encoder only through the predictions.
The decoder reads only the regressor's predictions (plus position embeddings) and classifies
each masked patch into the code of a fixed tokenizer (a frozen codebook, labels computed in
no_grad, standing in for the DALL-E tokenizer). One AdamW holds encoder, regressor, decoder and
the standalone mask token; loss = cross entropy + 2 * alignment MSE.
As published: clean.
"""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

IMG, PATCH, DIM, HEADS = 16, 4, 32, 4
GRID = IMG // PATCH
N_PATCH = GRID * GRID
N_MASK = N_PATCH // 2
N_CODES = 16


def sincos_pos_embed(dim, grid):
    g = torch.arange(grid, dtype=torch.float32)
    gw, gh = torch.meshgrid(g, g, indexing="ij")
    omega = 1.0 / 10000 ** (torch.arange(dim // 4, dtype=torch.float32) / (dim // 4))
    out_w = gw.flatten()[:, None] * omega[None]
    out_h = gh.flatten()[:, None] * omega[None]
    pe = torch.cat([out_w.sin(), out_w.cos(), out_h.sin(), out_h.cos()], dim=1)
    return pe.unsqueeze(0)


def make_images(n):
    yy, xx = torch.meshgrid(torch.arange(IMG).float(), torch.arange(IMG).float(),
                            indexing="ij")
    theta = math.pi * torch.rand(n, 1, 1)
    freq = 0.3 + 0.6 * torch.rand(n, 1, 1)
    phase = 2 * math.pi * torch.rand(n, 1, 1)
    grating = torch.sin(freq * (xx * theta.cos() + yy * theta.sin()) + phase)
    c = IMG * torch.rand(n, 2, 1, 1)
    blob = torch.exp(-((xx - c[:, 0]) ** 2 + (yy - c[:, 1]) ** 2) / 8.0)
    return 0.7 * grating + 1.5 * blob


def patchify(img):
    b = img.shape[0]
    p = img.view(b, GRID, PATCH, GRID, PATCH).permute(0, 1, 3, 2, 4)
    return p.reshape(b, N_PATCH, PATCH * PATCH)


def take(x, ids):
    return torch.gather(x, 1, ids.unsqueeze(-1).expand(-1, -1, x.shape[-1]))


class Mlp(nn.Sequential):
    def __init__(self, dim):
        super().__init__(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, HEADS, batch_first=True)
        self.mlp = Mlp(dim)

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class Encoder(nn.Module):
    def __init__(self, dim, depth):
        super().__init__()
        self.patch_embed = nn.Linear(PATCH * PATCH, dim)
        self.cls_token = nn.Parameter(0.02 * torch.randn(1, 1, dim))
        self.register_buffer("pos_embed", sincos_pos_embed(dim, GRID))
        self.blocks = nn.ModuleList([Block(dim) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)

    def forward(self, patches, keep_ids):
        x = take(self.patch_embed(patches) + self.pos_embed, keep_ids)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)
        for blk in self.blocks:
            x = blk(x)
        return self.norm(x)


class RegressorBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm_q, self.norm_k, self.norm_v = (nn.LayerNorm(dim), nn.LayerNorm(dim),
                                                 nn.LayerNorm(dim))
        self.norm2 = nn.LayerNorm(dim)
        self.cross_attn = nn.MultiheadAttention(dim, HEADS, batch_first=True)
        self.mlp = Mlp(dim)

    def forward(self, x_q, x_kv, pos_q, pos_kv):
        q, k, v = self.norm_q(x_q + pos_q), self.norm_k(x_kv + pos_kv), self.norm_v(x_kv)
        x = self.norm2(x_q + self.cross_attn(q, k, v, need_weights=False)[0])
        return x + self.mlp(x)


class Regressor(nn.Module):
    def __init__(self, dim, depth):
        super().__init__()
        self.blocks = nn.ModuleList([RegressorBlock(dim) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)

    def forward(self, x_masked, x_visible, pos_masked, pos_visible):
        pos_kv = torch.cat([pos_visible, pos_masked], dim=1)
        for blk in self.blocks:
            x_masked = blk(x_masked, torch.cat([x_visible, x_masked], dim=1), pos_masked, pos_kv)
        return self.norm(x_masked)


class Decoder(nn.Module):
    def __init__(self, dim, depth, n_out):
        super().__init__()
        self.blocks = nn.ModuleList([Block(dim) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, n_out)

    def forward(self, x, pos):
        x = x + pos
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.norm(x))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=str, default=None)
    p.add_argument("--steps", type=int, default=80)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--align_weight", type=float, default=2.0)
    args = p.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    data = make_images(512)
    codebook = patchify(data[:N_CODES])[:, torch.randint(N_PATCH, (1,)).item()]

    encoder = Encoder(DIM, depth=2)
    regressor = Regressor(DIM, depth=1)
    decoder = Decoder(DIM, depth=1, n_out=N_CODES)
    mask_token = nn.Parameter(0.02 * torch.randn(1, 1, DIM))
    rd_pos_embed = sincos_pos_embed(DIM, GRID)
    params = (list(encoder.parameters()) + list(regressor.parameters())
              + list(decoder.parameters()) + [mask_token])
    optimizer = torch.optim.AdamW(params, lr=2e-3, weight_decay=0.05)

    for step in range(args.steps):
        imgs = data[torch.randint(data.shape[0], (args.batch,))]
        patches = patchify(imgs)
        ids = torch.rand(args.batch, N_PATCH).argsort(dim=1)
        masked_ids, visible_ids = ids[:, :N_MASK], ids[:, N_MASK:]

        with torch.no_grad():
            codes = torch.cdist(take(patches, masked_ids), codebook.unsqueeze(0)).argmin(-1)

        x_visible = encoder(patches, visible_ids)[:, 1:]
        with torch.no_grad():
            latent_target = encoder(patches, masked_ids)[:, 1:]

        pos = rd_pos_embed.expand(args.batch, -1, -1)
        pos_masked, pos_visible = take(pos, masked_ids), take(pos, visible_ids)
        x_masked = mask_token.expand(args.batch, N_MASK, -1)
        latent_predict = regressor(x_masked, x_visible, pos_masked, pos_visible)
        logits = decoder(latent_predict, pos_masked)

        loss_main = F.cross_entropy(logits.reshape(-1, N_CODES), codes.reshape(-1))
        loss_align = F.mse_loss(latent_predict, latent_target)
        loss = loss_main + args.align_weight * loss_align

        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 20 == 0 or step == args.steps - 1:
            acc = (logits.argmax(-1) == codes).float().mean().item()
            print(f"step {step:4d} loss {loss.item():.4f} ce {loss_main.item():.4f} "
                  f"align {loss_align.item():.4f} acc {acc:.3f}")

    if args.out is not None:
        torch.save({"encoder": encoder.state_dict(), "regressor": regressor.state_dict(),
                    "decoder": decoder.state_dict(), "mask_token": mask_token.detach()},
                   args.out)


if __name__ == "__main__":
    main()
