"""(IA)^3: a frozen pre-trained encoder-decoder adapted by learned rescaling vectors.

Paper: Haokun Liu, Derek Tam, Mohammed Muqeeth, Jay Mohta, Tenghao Huang, Mohit Bansal and
Colin Raffel, "Few-Shot Parameter-Efficient Fine-Tuning is Better and Cheaper than In-Context
Learning", NeurIPS 2022, arXiv:2205.05638.
Reference implementation: r-three/t-few, src/models/lora.py (LoRALinear with rank 0 and
scaling_rank 1: the frozen linear's output multiplied by the vector multi_lora_b, initialised to
ones; modify_with_lora replaces the children matched by lora_layers inside the modules matched
by lora_modules), configs/ia3.json (lora_modules ".*SelfAttention|.*EncDecAttention|
.*DenseReluDense", lora_layers "k|v|wi_1.*", trainable_param_names ".*lora_b.*", lr 3e-3),
src/utils/get_optimizer.py (get_optimizer: parameters whose names match trainable_param_names go
to Adam, every other one gets requires_grad = False) and src/models/EncoderDecoder.py
(EncoderDecoder.training_step: the encoder is run once and its states repeated for every answer
choice; lm_loss on the correct choice, mc_loss = cross-entropy of the length-normalised negative
choice scores, unlikely_loss = -log(1 - p + 0.01) on the tokens of the wrong choices).

Two phases with their own loops. Phase 1 pre-trains a tiny T5-style encoder-decoder (RMS layer
norms, gated-GELU feed-forward wi_0/wi_1/wo, learned positions, untied LM head) on a seq2seq task
(write the three smallest input tokens in order) with teacher forcing and Adam over all weights.
Phase 2 is a new few-shot task (32 labelled sequences: are most tokens from the lower half of the
vocabulary?) answered by rank classification between two two-token verbalisers. The (IA)^3
vectors l_k, l_v (keys and values of every self- and cross-attention) and l_ff (the wi_1 branch,
i.e. the FFN's inner activation) are inserted as IA3Linear wrappers, every other weight is frozen,
and Adam trains only the vectors with the T-Few loss lm_loss + mc_loss + unlikely_loss (lr
3e-2 rather than ia3.json's 3e-3, so that 40 updates move the vectors visibly).
As published: clean.
"""
import argparse
import re

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--d_model", type=int, default=32)
parser.add_argument("--d_ff", type=int, default=64)
parser.add_argument("--n_heads", type=int, default=2)
parser.add_argument("--seq_len", type=int, default=9)
parser.add_argument("--pt_steps", type=int, default=40)
parser.add_argument("--pt_batch", type=int, default=32)
parser.add_argument("--pt_lr", type=float, default=2e-3)
parser.add_argument("--n_shot", type=int, default=32)
parser.add_argument("--ft_steps", type=int, default=40)
parser.add_argument("--ft_batch", type=int, default=8)
parser.add_argument("--ft_lr", type=float, default=3e-2)
parser.add_argument("--ia3_modules", type=str, default=".*self_attn|.*cross_attn|.*ffn")
parser.add_argument("--ia3_layers", type=str, default="k|v|wi_1")
parser.add_argument("--trainable_param_names", type=str, default=".*ia3_scale")
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)

VOCAB, PAD, FIRST_CONTENT = 32, 0, 4
VERBALIZERS = torch.tensor([[1, 2], [1, 3]])  # "is low" / "is high", shared first token


class T5LayerNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


class Attention(nn.Module):
    def __init__(self, d, n_heads, causal=False):
        super().__init__()
        self.n_heads, self.causal = n_heads, causal
        self.q = nn.Linear(d, d, bias=False)
        self.k = nn.Linear(d, d, bias=False)
        self.v = nn.Linear(d, d, bias=False)
        self.o = nn.Linear(d, d, bias=False)

    def split(self, x):
        b, t, d = x.shape
        return x.view(b, t, self.n_heads, d // self.n_heads).transpose(1, 2)

    def forward(self, x, kv):
        q, k, v = self.split(self.q(x)), self.split(self.k(kv)), self.split(self.v(kv))
        scores = q @ k.transpose(-1, -2) / q.size(-1) ** 0.5
        if self.causal:
            t = x.size(1)
            mask = torch.ones(t, t, dtype=torch.bool).triu(1)
            scores = scores.masked_fill(mask, float("-inf"))
        out = scores.softmax(-1) @ v
        return self.o(out.transpose(1, 2).reshape(x.shape))


class GatedFFN(nn.Module):
    def __init__(self, d, d_ff):
        super().__init__()
        self.wi_0 = nn.Linear(d, d_ff, bias=False)
        self.wi_1 = nn.Linear(d, d_ff, bias=False)
        self.wo = nn.Linear(d_ff, d, bias=False)

    def forward(self, x):
        return self.wo(F.gelu(self.wi_0(x)) * self.wi_1(x))


class EncoderBlock(nn.Module):
    def __init__(self, d, d_ff, n_heads):
        super().__init__()
        self.ln1, self.self_attn = T5LayerNorm(d), Attention(d, n_heads)
        self.ln2, self.ffn = T5LayerNorm(d), GatedFFN(d, d_ff)

    def forward(self, x):
        h = self.ln1(x)
        x = x + self.self_attn(h, h)
        return x + self.ffn(self.ln2(x))


class DecoderBlock(nn.Module):
    def __init__(self, d, d_ff, n_heads):
        super().__init__()
        self.ln1, self.self_attn = T5LayerNorm(d), Attention(d, n_heads, causal=True)
        self.ln2, self.cross_attn = T5LayerNorm(d), Attention(d, n_heads)
        self.ln3, self.ffn = T5LayerNorm(d), GatedFFN(d, d_ff)

    def forward(self, x, enc):
        h = self.ln1(x)
        x = x + self.self_attn(h, h)
        x = x + self.cross_attn(self.ln2(x), enc)
        return x + self.ffn(self.ln3(x))


class TinyT5(nn.Module):
    def __init__(self, d, d_ff, n_heads, max_len=16):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, d)
        self.enc_pos = nn.Parameter(torch.randn(max_len, d) * 0.1)
        self.dec_pos = nn.Parameter(torch.randn(max_len, d) * 0.1)
        self.encoder = nn.ModuleList([EncoderBlock(d, d_ff, n_heads) for _ in range(2)])
        self.enc_norm = T5LayerNorm(d)
        self.decoder = nn.ModuleList([DecoderBlock(d, d_ff, n_heads) for _ in range(2)])
        self.dec_norm = T5LayerNorm(d)
        self.lm_head = nn.Linear(d, VOCAB, bias=False)

    def encode(self, input_ids):
        x = self.embed(input_ids) + self.enc_pos[:input_ids.size(1)]
        for block in self.encoder:
            x = block(x)
        return self.enc_norm(x)

    def decode(self, decoder_input_ids, enc):
        x = self.embed(decoder_input_ids) + self.dec_pos[:decoder_input_ids.size(1)]
        for block in self.decoder:
            x = block(x, enc)
        return self.lm_head(self.dec_norm(x))

    def forward(self, input_ids, decoder_input_ids):
        return self.decode(decoder_input_ids, self.encode(input_ids))


class IA3Linear(nn.Module):
    """A frozen linear whose output features are rescaled by a learned vector (init ones)."""

    def __init__(self, linear):
        super().__init__()
        self.weight, self.bias = linear.weight, linear.bias
        self.ia3_scale = nn.Parameter(torch.ones(linear.out_features))

    def forward(self, x):
        return F.linear(x, self.weight, self.bias) * self.ia3_scale


def modify_with_ia3(model, modules_regex, layers_regex):
    for m_name, module in dict(model.named_modules()).items():
        if re.fullmatch(modules_regex, m_name):
            for c_name, layer in dict(module.named_children()).items():
                if re.fullmatch(layers_regex, c_name):
                    setattr(module, c_name, IA3Linear(layer))
    return model


def shift_right(target_ids):
    return torch.cat([torch.full_like(target_ids[:, :1], PAD), target_ids[:, :-1]], 1)


def pretrain_batch(n):
    x = torch.randint(FIRST_CONTENT, VOCAB, (n, args.seq_len))
    return x, x.sort(1).values[:, :3]


def fewshot_data(n):
    x = torch.randint(FIRST_CONTENT, VOCAB, (n, args.seq_len))
    low = (x < (FIRST_CONTENT + VOCAB) // 2).sum(1)
    return x, (low > args.seq_len // 2).long()


def choice_log_likelihood(model, input_ids, n_choices):
    """Per-token log-likelihood of every verbaliser, encoder run once (as in T-Few)."""
    bs = input_ids.size(0)
    enc = model.encode(input_ids)
    enc = enc.unsqueeze(1).repeat(1, n_choices, 1, 1).flatten(0, 1)
    choices = VERBALIZERS.unsqueeze(0).repeat(bs, 1, 1).flatten(0, 1)
    logits = model.decode(shift_right(choices), enc)
    token_ll = -F.cross_entropy(logits.flatten(0, 1), choices.flatten(), reduction="none")
    return token_ll.view(bs, n_choices, -1)


model = TinyT5(args.d_model, args.d_ff, args.n_heads)

# Phase 1: pre-train the whole model on a seq2seq task.
optimizer = torch.optim.Adam(model.parameters(), lr=args.pt_lr)
for step in range(args.pt_steps):
    input_ids, target_ids = pretrain_batch(args.pt_batch)
    optimizer.zero_grad()
    logits = model(input_ids, shift_right(target_ids))
    loss = F.cross_entropy(logits.flatten(0, 1), target_ids.flatten())
    loss.backward()
    optimizer.step()
    if step % 10 == 0 or step == args.pt_steps - 1:
        print(f"pretrain step {step:3d} lm loss {loss.item():.4f}")

# Phase 2: insert (IA)^3, freeze everything else, train only the rescaling vectors.
model = modify_with_ia3(model, args.ia3_modules, args.ia3_layers)
trainable = []
for name, param in model.named_parameters():
    if re.fullmatch(args.trainable_param_names, name):
        trainable.append(param)
    else:
        param.requires_grad = False
print(f"(IA)^3 trains {sum(p.numel() for p in trainable)} of "
      f"{sum(p.numel() for p in model.parameters())} parameters")
ft_optimizer = torch.optim.Adam(trainable, lr=args.ft_lr)

train_x, train_y = fewshot_data(args.n_shot)
test_x, test_y = fewshot_data(256)
n_choices = VERBALIZERS.size(0)
for step in range(args.ft_steps):
    i = (step * args.ft_batch) % args.n_shot
    input_ids, labels = train_x[i:i + args.ft_batch], train_y[i:i + args.ft_batch]
    bs = input_ids.size(0)
    ft_optimizer.zero_grad()
    token_ll = choice_log_likelihood(model, input_ids, n_choices)
    choices_scores = -token_ll.sum(-1) / VERBALIZERS.size(1)  # length-normalised
    lm_loss = -token_ll[torch.arange(bs), labels].mean()
    mc_loss = F.cross_entropy(-choices_scores, labels)
    wrong = torch.ones(bs, n_choices, dtype=torch.bool)
    wrong[torch.arange(bs), labels] = False
    cand_ll = token_ll[wrong]
    unlikely_loss = -torch.log(1 - torch.exp(cand_ll) + 1e-2).mean()
    loss = lm_loss + mc_loss + unlikely_loss
    loss.backward()
    ft_optimizer.step()
    if step % 10 == 0 or step == args.ft_steps - 1:
        print(f"ia3 step {step:3d} loss {loss.item():.4f} (lm {lm_loss.item():.3f} "
              f"mc {mc_loss.item():.3f} ul {unlikely_loss.item():.3f})")

with torch.no_grad():
    scores = -choice_log_likelihood(model, test_x, n_choices).sum(-1)
    acc = (scores.argmin(1) == test_y).float().mean()
print(f"few-shot test accuracy {acc.item():.3f}")

if args.out:
    torch.save({"model": model.state_dict()}, args.out)
