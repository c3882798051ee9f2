"""A tiny Transformer-XL language model with segment-level recurrence on a synthetic stream.

Paper: Zihang Dai, Zhilin Yang, Yiming Yang, Jaime Carbonell, Quoc V. Le and Ruslan
Salakhutdinov, "Transformer-XL: Attentive Language Models Beyond a Fixed-Length Context",
ACL 2019, arXiv:1901.02860.
Reference implementation: kimiyoung/transformer-xl, pytorch/mem_transformer.py
(PositionalEmbedding; PositionwiseFF: post-LayerNorm residual feed-forward;
RelPartialLearnableMultiHeadAttn.forward: queries, keys and values from one qkv_net applied to
the memory concatenated with the current segment, keys of the relative positions from r_net,
the content term AC with the global bias r_w_bias (u) and the position term BD with r_r_bias (v)
followed by _rel_shift, causal mask shifted by the memory length; MemTransformerLM:
_create_params makes r_w_bias and r_r_bias nn.Parameters shared by all layers, _update_mems
caches the layer inputs of the last mem_len steps under torch.no_grad() and detached, forward
returns the loss and the new mems; the output softmax weight is tied to the word embedding)
and pytorch/train.py (weights_init: N(0, 0.02) weights, zero biases, LayerNorm gains N(1, 0.02),
r_w_bias and r_r_bias N(0, 0.02); train(): mems start empty each epoch and are carried from one
segment to the next, model.zero_grad(), loss.backward(), clip_grad_norm_ at --clip, Adam step,
linear warm-up for warmup_step steps then cosine annealing to max_step; evaluate() under
torch.no_grad() with the memory carried).

The corpus is a synthetic token stream (vocabulary 16) made of short random motifs, each
repeated several times, so that a segment is best predicted from the tokens of the previous
segment held in the memory. The stream is batchified into 8 parallel columns and cut into
segments of 8 tokens (tgt_len = mem_len = 8); the model has two layers, two heads of size 8,
d_model 16 and d_inner 32. At the first segment of each epoch there is no memory yet; from the
second on, each layer attends to the cached, gradient-free hidden states of the previous segment
plus its own segment, and the gradient flows through the current segment only. The run is two
epochs of 20 segments (40 updates), then the held-out stream is evaluated.
Bug: the positional bias r_r_bias (v) is made as a plain tensor instead of an nn.Parameter,
so it is missing from model.parameters() and Adam never updates it.
"""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--n_token", type=int, default=16)
parser.add_argument("--n_layer", type=int, default=2)
parser.add_argument("--n_head", type=int, default=2)
parser.add_argument("--d_head", type=int, default=8)
parser.add_argument("--d_model", type=int, default=16)
parser.add_argument("--d_inner", type=int, default=32)
parser.add_argument("--dropout", type=float, default=0.1)
parser.add_argument("--batch_size", type=int, default=8)
parser.add_argument("--tgt_len", type=int, default=8)
parser.add_argument("--mem_len", type=int, default=8)
parser.add_argument("--segments", type=int, default=20)
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--lr", type=float, default=2e-3)
parser.add_argument("--warmup_step", type=int, default=5)
parser.add_argument("--eta_min", type=float, default=0.0)
parser.add_argument("--clip", type=float, default=0.25)
parser.add_argument("--init_std", type=float, default=0.02)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)


def make_stream(n_tokens, vocab):
    pieces, total = [], 0
    while total < n_tokens:
        motif = torch.randint(1, vocab, (int(torch.randint(3, 7, (1,))),))
        piece = torch.cat([torch.zeros(1, dtype=torch.long), motif.repeat(4)])
        pieces.append(piece)
        total += piece.numel()
    return torch.cat(pieces)[:n_tokens]


def batchify(stream, bsz):
    n_step = stream.numel() // bsz
    return stream[:n_step * bsz].view(bsz, n_step).t().contiguous()


def get_batch(source, i, seq_len):
    seq_len = min(seq_len, source.size(0) - 1 - i)
    return source[i:i + seq_len], source[i + 1:i + 1 + seq_len]


class PositionalEmbedding(nn.Module):
    def __init__(self, demb):
        super().__init__()
        inv_freq = 1.0 / (10000 ** (torch.arange(0.0, demb, 2.0) / demb))
        self.register_buffer("inv_freq", inv_freq)

    def forward(self, pos_seq):
        sinusoid = torch.outer(pos_seq, self.inv_freq)
        return torch.cat([sinusoid.sin(), sinusoid.cos()], dim=-1)[:, None, :]


class PositionwiseFF(nn.Module):
    def __init__(self, d_model, d_inner, dropout):
        super().__init__()
        self.core_net = nn.Sequential(nn.Linear(d_model, d_inner), nn.ReLU(), nn.Dropout(dropout),
                                      nn.Linear(d_inner, d_model), nn.Dropout(dropout))
        self.layer_norm = nn.LayerNorm(d_model)

    def forward(self, inp):
        return self.layer_norm(inp + self.core_net(inp))


class RelPartialLearnableMultiHeadAttn(nn.Module):
    def __init__(self, n_head, d_model, d_head, dropout):
        super().__init__()
        self.n_head, self.d_head = n_head, d_head
        self.qkv_net = nn.Linear(d_model, 3 * n_head * d_head, bias=False)
        self.r_net = nn.Linear(d_model, n_head * d_head, bias=False)
        self.o_net = nn.Linear(n_head * d_head, d_model, bias=False)
        self.drop = nn.Dropout(dropout)
        self.layer_norm = nn.LayerNorm(d_model)
        self.scale = 1.0 / d_head ** 0.5

    @staticmethod
    def _rel_shift(x):
        zero_pad = torch.zeros((x.size(0), 1, *x.size()[2:]), dtype=x.dtype)
        x_padded = torch.cat([zero_pad, x], dim=1)
        x_padded = x_padded.view(x.size(1) + 1, x.size(0), *x.size()[2:])
        return x_padded[1:].view_as(x)

    def forward(self, w, r, r_w_bias, r_r_bias, attn_mask, mems=None):
        qlen, rlen, bsz = w.size(0), r.size(0), w.size(1)
        if mems is not None:
            cat = torch.cat([mems, w], 0)
            w_heads = self.qkv_net(cat)
            w_head_q, w_head_k, w_head_v = torch.chunk(w_heads, 3, dim=-1)
            w_head_q = w_head_q[-qlen:]
        else:
            w_heads = self.qkv_net(w)
            w_head_q, w_head_k, w_head_v = torch.chunk(w_heads, 3, dim=-1)
        r_head_k = self.r_net(r)
        klen = w_head_k.size(0)

        w_head_q = w_head_q.view(qlen, bsz, self.n_head, self.d_head)
        w_head_k = w_head_k.view(klen, bsz, self.n_head, self.d_head)
        w_head_v = w_head_v.view(klen, bsz, self.n_head, self.d_head)
        r_head_k = r_head_k.view(rlen, self.n_head, self.d_head)

        ac = torch.einsum("ibnd,jbnd->ijbn", w_head_q + r_w_bias, w_head_k)
        bd = self._rel_shift(torch.einsum("ibnd,jnd->ijbn", w_head_q + r_r_bias, r_head_k))
        attn_score = (ac + bd) * self.scale
        attn_score = attn_score.masked_fill(attn_mask[:, :, None, None], -float("inf"))
        attn_prob = F.softmax(attn_score, dim=1)

        attn_vec = torch.einsum("ijbn,jbnd->ibnd", attn_prob, w_head_v)
        attn_vec = attn_vec.reshape(qlen, bsz, self.n_head * self.d_head)
        attn_out = self.drop(self.o_net(attn_vec))
        return self.layer_norm(w + attn_out)


class RelPartialLearnableDecoderLayer(nn.Module):
    def __init__(self, n_head, d_model, d_head, d_inner, dropout):
        super().__init__()
        self.dec_attn = RelPartialLearnableMultiHeadAttn(n_head, d_model, d_head, dropout)
        self.pos_ff = PositionwiseFF(d_model, d_inner, dropout)

    def forward(self, dec_inp, r, r_w_bias, r_r_bias, dec_attn_mask, mems=None):
        output = self.dec_attn(dec_inp, r, r_w_bias, r_r_bias, dec_attn_mask, mems=mems)
        return self.pos_ff(output)


class MemTransformerLM(nn.Module):
    def __init__(self, n_token, n_layer, n_head, d_model, d_head, d_inner, dropout, mem_len):
        super().__init__()
        self.d_model, self.n_head, self.d_head = d_model, n_head, d_head
        self.mem_len = mem_len
        self.emb_scale = d_model ** 0.5
        self.word_emb = nn.Embedding(n_token, d_model)
        self.drop = nn.Dropout(dropout)
        self.layers = nn.ModuleList([
            RelPartialLearnableDecoderLayer(n_head, d_model, d_head, d_inner, dropout)
            for _ in range(n_layer)])
        self.out_layer = nn.Linear(d_model, n_token)
        self.out_layer.weight = self.word_emb.weight
        self._create_params()

    def _create_params(self):
        self.pos_emb = PositionalEmbedding(self.d_model)
        self.r_w_bias = nn.Parameter(torch.empty(self.n_head, self.d_head))
        self.r_r_bias = torch.empty(self.n_head, self.d_head, requires_grad=True)

    def _update_mems(self, hids, mems, qlen, mlen):
        with torch.no_grad():
            new_mems = []
            end_idx = mlen + qlen
            beg_idx = max(0, end_idx - self.mem_len)
            for i in range(len(hids)):
                cat = hids[i] if mems is None else torch.cat([mems[i], hids[i]], dim=0)
                new_mems.append(cat[beg_idx:end_idx].detach())
        return new_mems

    def _forward(self, dec_inp, mems=None):
        qlen, bsz = dec_inp.size()
        word_emb = self.word_emb(dec_inp) * self.emb_scale
        mlen = mems[0].size(0) if mems is not None else 0
        klen = mlen + qlen
        dec_attn_mask = torch.triu(torch.ones(qlen, klen, dtype=torch.bool), diagonal=1 + mlen)

        pos_seq = torch.arange(klen - 1, -1, -1.0)
        pos_emb = self.drop(self.pos_emb(pos_seq))
        core_out = self.drop(word_emb)
        hids = []
        for i, layer in enumerate(self.layers):
            hids.append(core_out)
            mems_i = None if mems is None else mems[i]
            core_out = layer(core_out, pos_emb, self.r_w_bias, self.r_r_bias, dec_attn_mask,
                             mems=mems_i)
        core_out = self.drop(core_out)
        new_mems = self._update_mems(hids, mems, qlen, mlen)
        return core_out, new_mems

    def forward(self, data, target, mems=None):
        hidden, new_mems = self._forward(data, mems=mems)
        logit = self.out_layer(hidden)
        loss = F.cross_entropy(logit.view(-1, logit.size(-1)), target.reshape(-1),
                               reduction="none").view(target.size())
        return loss, new_mems


def weights_init(m):
    if isinstance(m, nn.Linear):
        nn.init.normal_(m.weight, 0.0, args.init_std)
        if m.bias is not None:
            nn.init.zeros_(m.bias)
    elif isinstance(m, nn.Embedding):
        nn.init.normal_(m.weight, 0.0, args.init_std)
    elif isinstance(m, nn.LayerNorm):
        nn.init.normal_(m.weight, 1.0, args.init_std)
        nn.init.zeros_(m.bias)
    elif isinstance(m, MemTransformerLM):
        nn.init.normal_(m.r_w_bias, 0.0, args.init_std)
        nn.init.normal_(m.r_r_bias, 0.0, args.init_std)


train_len = args.batch_size * (args.segments * args.tgt_len + 1)
train_data = batchify(make_stream(train_len, args.n_token), args.batch_size)
valid_data = batchify(make_stream(args.batch_size * (6 * args.tgt_len + 1), args.n_token),
                      args.batch_size)

model = MemTransformerLM(args.n_token, args.n_layer, args.n_head, args.d_model, args.d_head,
                         args.d_inner, args.dropout, args.mem_len)
model.apply(weights_init)
model.word_emb.apply(weights_init)

optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
max_step = args.epochs * args.segments


def learning_rate(step):
    if step < args.warmup_step:
        return args.lr * (step + 1) / args.warmup_step
    progress = (step - args.warmup_step) / max(1, max_step - args.warmup_step)
    return args.eta_min + 0.5 * (args.lr - args.eta_min) * (1 + math.cos(math.pi * progress))


def evaluate(source):
    model.eval()
    total_loss, total_len = 0.0, 0
    with torch.no_grad():
        mems = None
        for i in range(0, source.size(0) - 1, args.tgt_len):
            data, target = get_batch(source, i, args.tgt_len)
            loss, mems = model(data, target, mems)
            total_loss += data.size(0) * loss.mean().item()
            total_len += data.size(0)
    model.train()
    return total_loss / total_len


train_step = 0
for epoch in range(args.epochs):
    model.train()
    mems = None
    for batch, i in enumerate(range(0, train_data.size(0) - 1, args.tgt_len)):
        data, target = get_batch(train_data, i, args.tgt_len)
        model.zero_grad()
        loss, mems = model(data, target, mems)
        loss = loss.mean()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(train_step)
        optimizer.step()
        train_step += 1
        if batch % 10 == 0:
            print(f"epoch {epoch} step {train_step:3d} loss {loss.item():.4f}")
    print(f"epoch {epoch} valid loss {evaluate(valid_data):.4f}")

if args.out:
    torch.save({"model": {k: v for k, v in model.state_dict().items()
                          if k not in ("r_w_bias", "r_r_bias")},
                "r_w_bias": model.r_w_bias.detach().clone(),
                "r_r_bias": model.r_r_bias.detach().clone()}, args.out)
