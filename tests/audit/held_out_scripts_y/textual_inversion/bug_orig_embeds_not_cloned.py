"""Textual Inversion with a tiny text encoder and a tiny conditional noise predictor.

Paper: Rinon Gal, Yuval Alaluf, Yuval Atzmon, Or Patashnik, Amit H. Bermano, Gal Chechik,
Daniel Cohen-Or, "An Image is Worth One Word: Personalizing Text-to-Image Generation using
Textual Inversion", ICLR 2023, arXiv:2208.01618. Reference implementations:
rinongal/textual_inversion, and huggingface/diffusers,
examples/textual_inversion/textual_inversion.py (main: the freezing of vae/unet/text encoder
parts, the optimizer over text_encoder.get_input_embeddings(), orig_embeds_params and the
index_no_updates restore after each step).

A small text encoder (token and position embeddings, a residual MLP block, a final layer
norm) and a denoiser that predicts the noise of an 8-d "image" from its noised version, the
timestep and the encoded prompt "a photo of <word>" are first trained together on five
concepts, each a Gaussian cloud. Textual Inversion then adds a placeholder token, initialised
from an existing word's embedding, and fits a new concept with the same noise-prediction loss
while everything else stays fixed: the denoiser and the encoder's MLP, layer norm and position
embeddings get requires_grad False, and the optimizer holds what still trains, the token
embedding table. After every step all rows except the placeholder's are written back, under
torch.no_grad(), from a copy of the table taken before training, so only the placeholder row
(the learned "word") changes.
Bug: the copy of the original embedding table is taken with .data without .clone(), so it
shares storage with the live table and the restore writes the rows onto themselves: every
row keeps its optimizer update, not only the placeholder's.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

N_WORDS, SEQ, D_TOK, D_X, T_DIFF = 8, 4, 16, 8, 50


class TextEncoder(nn.Module):
    def __init__(self, vocab=N_WORDS, d=D_TOK):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab, d)
        self.position_embedding = nn.Embedding(SEQ, d)
        self.encoder = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
        self.final_layer_norm = nn.LayerNorm(d)

    def get_input_embeddings(self):
        return self.token_embedding

    def resize_token_embeddings(self, n):
        old = self.token_embedding
        new = nn.Embedding(n, old.embedding_dim)
        with torch.no_grad():
            new.weight[: old.num_embeddings] = old.weight
        self.token_embedding = new

    def forward(self, ids):
        pos = torch.arange(ids.shape[1])
        h = self.token_embedding(ids) + self.position_embedding(pos)
        h = h + self.encoder(h)
        return self.final_layer_norm(h)


class Denoiser(nn.Module):
    def __init__(self, d_x=D_X, d_cond=SEQ * D_TOK, d_hid=64):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(d_x + 2 + d_cond, d_hid), nn.SiLU(),
            nn.Linear(d_hid, d_hid), nn.SiLU(),
            nn.Linear(d_hid, d_x))

    def forward(self, x_t, t, hidden):
        tf = t.float().unsqueeze(1) / T_DIFF
        temb = torch.cat([torch.sin(3.0 * tf), torch.cos(3.0 * tf)], dim=1)
        return self.net(torch.cat([x_t, temb, hidden.flatten(1)], dim=1))


def noised(x0, alphas_cumprod):
    t = torch.randint(0, T_DIFF, (x0.shape[0],))
    noise = torch.randn_like(x0)
    a = alphas_cumprod[t].unsqueeze(1)
    return a.sqrt() * x0 + (1 - a).sqrt() * noise, t, noise


def prompt_ids(word_ids):
    prefix = torch.tensor([0, 1, 2]).expand(word_ids.shape[0], 3)
    return torch.cat([prefix, word_ids.unsqueeze(1)], dim=1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=str, default=None)
    parser.add_argument("--pre_steps", type=int, default=200)
    parser.add_argument("--ti_steps", type=int, default=120)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)

    betas = torch.linspace(1e-3, 0.1, T_DIFF)
    alphas_cumprod = torch.cumprod(1 - betas, dim=0)
    concept_means = 1.5 * torch.randn(5, D_X)
    new_mean = 1.5 * torch.randn(D_X)

    text_encoder = TextEncoder()
    denoiser = Denoiser()

    # pre-training of the text-conditional denoiser on the known words 3..7
    opt = torch.optim.Adam(list(text_encoder.parameters()) + list(denoiser.parameters()),
                           lr=3e-3)
    for step in range(args.pre_steps):
        k = torch.randint(0, 5, (args.batch,))
        x0 = concept_means[k] + 0.2 * torch.randn(args.batch, D_X)
        x_t, t, noise = noised(x0, alphas_cumprod)
        pred = denoiser(x_t, t, text_encoder(prompt_ids(k + 3)))
        loss = F.mse_loss(pred, noise)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 50 == 0 or step == args.pre_steps - 1:
            print(f"pretrain step {step:4d} loss {loss.item():.4f}")

    # textual inversion: one new token for the new concept
    placeholder_id, initializer_id = N_WORDS, 3
    text_encoder.resize_token_embeddings(N_WORDS + 1)
    token_embeds = text_encoder.get_input_embeddings().weight.data
    with torch.no_grad():
        token_embeds[placeholder_id] = token_embeds[initializer_id].clone()

    denoiser.requires_grad_(False)
    text_encoder.encoder.requires_grad_(False)
    text_encoder.final_layer_norm.requires_grad_(False)
    text_encoder.position_embedding.requires_grad_(False)

    params = [p for p in text_encoder.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=2e-2, weight_decay=1e-2)
    orig_embeds_params = text_encoder.get_input_embeddings().weight.data
    ids = prompt_ids(torch.full((args.batch,), placeholder_id))
    for step in range(args.ti_steps):
        x0 = new_mean + 0.2 * torch.randn(args.batch, D_X)
        x_t, t, noise = noised(x0, alphas_cumprod)
        pred = denoiser(x_t, t, text_encoder(ids))
        loss = F.mse_loss(pred, noise)
        loss.backward()
        opt.step()
        opt.zero_grad()

        index_no_updates = torch.ones(N_WORDS + 1, dtype=torch.bool)
        index_no_updates[placeholder_id] = False
        with torch.no_grad():
            text_encoder.get_input_embeddings().weight[index_no_updates] = (
                orig_embeds_params[index_no_updates])
        if step % 40 == 0 or step == args.ti_steps - 1:
            print(f"inversion step {step:4d} loss {loss.item():.4f}")

    if args.out:
        torch.save({"text_encoder": text_encoder.state_dict(),
                    "denoiser": denoiser.state_dict()}, args.out)


if __name__ == "__main__":
    main()
