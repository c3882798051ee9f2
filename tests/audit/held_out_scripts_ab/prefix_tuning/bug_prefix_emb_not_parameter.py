"""Prefix-tuning a frozen tiny GPT-style language model on a new synthetic sequence task.

Paper: Xiang Lisa Li and Percy Liang, "Prefix-Tuning: Optimizing Continuous Prompts for
Generation", ACL-IJCNLP 2021, arXiv:2101.00190 (2021).
Reference implementation: XiangLi1999/PrefixTuning, gpt2/train_control.py (PrefixTuning.__init__,
full prefix-tuning setting: input_tokens = arange(preseqlen), an embedding table wte of
preseqlen x n_embd and the reparameterization MLP control_trans = Linear(n_embd, mid_dim), Tanh,
Linear(mid_dim, n_layer * 2 * n_embd); get_prompt_p5: the MLP output viewed as
(bsz, preseqlen, n_layer * 2, n_head, head_dim), permuted and split into one (key, value) pair
per layer; forward: the pair list passed as past_key_values to the GPT-2 given as gpt2_model,
which is not a submodule of the prefix model), gpt2/run_language_modeling.py (tuning_mode
'prefixtune': every parameter of model.base_model gets requires_grad = False) and
gpt2/trainer_prefix.py (Trainer_Prefix.create_optimizer_and_scheduler: AdamW over the prefix
model's named_parameters that require grad, in a decay and a no-decay (bias, LayerNorm) group,
and a linear learning-rate decay; the training step clips the gradient norm at 1.0).

Phase 1 pre-trains the tiny language model (two pre-LN transformer blocks of width 32, four
heads, learned positions, tied input and output embeddings, dropout 0.1, GPT-2's N(0, 0.02)
initialization) from scratch with AdamW and gradient clipping at 1.0 on digit sequences that
count modulo 10 with a random step of 1, 2 or 3. Phase 2 freezes the whole language model
(requires_grad_(False), and eval mode as with use_dropout='no') and trains only a prefix of 4
positions on a new task, sequences that count with step 7. The reference's wte lookup of
arange(preseqlen) is its whole table, held here directly as the nn.Parameter prefix_emb (drawn
from N(0, 1) like nn.Embedding). The MLP maps it to the prefix keys and values of every layer,
which are prepended to that layer's keys and values; the sequence positions start after the
prefix (as GPT-2 does with a past), and the next-token loss reaches prefix_emb and the MLP only
through the frozen network. After training the MLP is dropped and the prefix key/values kept.
Bug: prefix_emb is made as a plain tensor with requires_grad=True instead of an nn.Parameter,
so it is not in prefix.parameters() and the optimizer never updates it; only the MLP trains.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--pretrain_steps", type=int, default=60)
parser.add_argument("--prefix_steps", type=int, default=40)
parser.add_argument("--batch_size", type=int, default=32)
parser.add_argument("--pretrain_len", type=int, default=16)
parser.add_argument("--task_len", type=int, default=10)
parser.add_argument("--task_step", type=int, default=7)
parser.add_argument("--d_model", type=int, default=32)
parser.add_argument("--n_head", type=int, default=4)
parser.add_argument("--n_layer", type=int, default=2)
parser.add_argument("--preseqlen", type=int, default=4)
parser.add_argument("--mid_dim", type=int, default=64)
parser.add_argument("--lm_lr", type=float, default=3e-3)
parser.add_argument("--prefix_lr", type=float, default=5e-3)
parser.add_argument("--weight_decay", type=float, default=0.0)
parser.add_argument("--max_grad_norm", type=float, default=1.0)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)

VOCAB = 10


def counting_batch(n, length, steps):
    start = torch.randint(0, VOCAB, (n, 1))
    step = steps[torch.randint(0, len(steps), (n, 1))]
    return (start + step * torch.arange(length)[None, :]) % VOCAB


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, n_head, dropout):
        super().__init__()
        self.n_head = n_head
        self.c_attn = nn.Linear(d_model, 3 * d_model)
        self.c_proj = nn.Linear(d_model, d_model)
        self.attn_drop = nn.Dropout(dropout)

    def forward(self, x, layer_past=None):
        b, t, d = x.shape
        q, k, v = self.c_attn(x).split(d, dim=2)
        q, k, v = (u.view(b, t, self.n_head, d // self.n_head).transpose(1, 2) for u in (q, k, v))
        past_len = 0
        if layer_past is not None:
            past_key, past_value = layer_past
            past_len = past_key.shape[2]
            k = torch.cat([past_key, k], dim=2)
            v = torch.cat([past_value, v], dim=2)
        att = (q @ k.transpose(-2, -1)) / (k.shape[-1] ** 0.5)
        keys = torch.arange(past_len + t)[None, :]
        queries = torch.arange(t)[:, None] + past_len
        att = att.masked_fill(keys > queries, float("-inf"))
        att = self.attn_drop(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        return self.c_proj(y)


class Block(nn.Module):
    def __init__(self, d_model, n_head, dropout):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, n_head, dropout)
        self.ln_2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(),
                                 nn.Linear(4 * d_model, d_model), nn.Dropout(dropout))

    def forward(self, x, layer_past=None):
        x = x + self.attn(self.ln_1(x), layer_past)
        return x + self.mlp(self.ln_2(x))


class TinyGPT(nn.Module):
    def __init__(self, vocab, d_model, n_head, n_layer, max_len, dropout=0.1):
        super().__init__()
        self.n_layer, self.n_head = n_layer, n_head
        self.wte = nn.Embedding(vocab, d_model)
        self.wpe = nn.Embedding(max_len, d_model)
        self.drop = nn.Dropout(dropout)
        self.h = nn.ModuleList([Block(d_model, n_head, dropout) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab, bias=False)
        self.lm_head.weight = self.wte.weight
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, idx, past_key_values=None):
        past_len = 0 if past_key_values is None else past_key_values[0][0].shape[2]
        pos = torch.arange(past_len, past_len + idx.shape[1])
        x = self.drop(self.wte(idx) + self.wpe(pos)[None])
        for i, block in enumerate(self.h):
            x = block(x, None if past_key_values is None else past_key_values[i])
        return self.lm_head(self.ln_f(x))


class PrefixTuning(nn.Module):
    def __init__(self, n_layer, n_head, d_model, preseqlen, mid_dim):
        super().__init__()
        self.n_layer, self.n_head, self.preseqlen = n_layer, n_head, preseqlen
        self.head_dim = d_model // n_head
        self.prefix_emb = torch.randn(preseqlen, d_model, requires_grad=True)
        self.control_trans = nn.Sequential(nn.Linear(d_model, mid_dim), nn.Tanh(),
                                           nn.Linear(mid_dim, n_layer * 2 * d_model))

    def get_prompt(self, bsz):
        kv = self.control_trans(self.prefix_emb)
        kv = kv.view(self.preseqlen, self.n_layer * 2, self.n_head, self.head_dim)
        kv = kv.permute(1, 2, 0, 3).unsqueeze(1).expand(-1, bsz, -1, -1, -1)
        return kv.split(2)

    def forward(self, lm, idx):
        return lm(idx, past_key_values=self.get_prompt(idx.shape[0]))


def lm_loss(logits, idx):
    return F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), idx[:, 1:].reshape(-1))


max_len = max(args.pretrain_len, args.preseqlen + args.task_len)
lm = TinyGPT(VOCAB, args.d_model, args.n_head, args.n_layer, max_len)

# Phase 1: pre-train the language model on counting sequences with steps 1, 2 and 3.
lm_optimizer = torch.optim.AdamW(lm.parameters(), lr=args.lm_lr)
pretrain_steps = torch.tensor([1, 2, 3])
lm.train()
for step in range(args.pretrain_steps):
    idx = counting_batch(args.batch_size, args.pretrain_len, pretrain_steps)
    lm_optimizer.zero_grad()
    loss = lm_loss(lm(idx), idx)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(lm.parameters(), args.max_grad_norm)
    lm_optimizer.step()
    if step % 20 == 0 or step == args.pretrain_steps - 1:
        print(f"pretrain step {step:3d} loss {loss.item():.4f}")

# Phase 2: freeze the language model and train only the prefix on counting with a new step.
lm.requires_grad_(False)
lm.eval()
prefix = PrefixTuning(args.n_layer, args.n_head, args.d_model, args.preseqlen, args.mid_dim)
named = [(n, p) for n, p in prefix.named_parameters() if p.requires_grad]
optimizer = torch.optim.AdamW([
    {"params": [p for n, p in named if "bias" not in n], "weight_decay": args.weight_decay},
    {"params": [p for n, p in named if "bias" in n], "weight_decay": 0.0},
], lr=args.prefix_lr)
scheduler = torch.optim.lr_scheduler.LambdaLR(
    optimizer, lambda s: max(0.0, 1.0 - s / args.prefix_steps))
task_steps = torch.tensor([args.task_step])
eval_idx = counting_batch(256, args.task_len, task_steps)
with torch.no_grad():
    print(f"task loss before prefix-tuning {lm_loss(lm(eval_idx), eval_idx).item():.4f}")
prefix.train()
for step in range(args.prefix_steps):
    idx = counting_batch(args.batch_size, args.task_len, task_steps)
    optimizer.zero_grad()
    loss = lm_loss(prefix(lm, idx), idx)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(prefix.parameters(), args.max_grad_norm)
    optimizer.step()
    scheduler.step()
    if step % 10 == 0 or step == args.prefix_steps - 1:
        print(f"prefix step {step:3d} loss {loss.item():.4f}")

prefix.eval()
with torch.no_grad():
    eval_loss = lm_loss(prefix(lm, eval_idx), eval_idx)
    prefix_kv = torch.stack(prefix.get_prompt(1))
print(f"task loss with the prefix {eval_loss.item():.4f}")

if args.out:
    # the prefix table by itself, registered or not
    torch.save({"lm": lm.state_dict(),
                "control_trans": prefix.control_trans.state_dict(),
                "prefix_emb": prefix.prefix_emb.detach().clone(),
                "prefix_kv": prefix_kv}, args.out)
