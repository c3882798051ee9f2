"""Decision Transformer, return-conditioned behaviour cloning with a tiny causal transformer on
synthetic offline trajectories, written after Chen, Lu, Rajeswaran, Lee, Grover, Laskin,
Abbeel, Srinivas and Mordatch, "Decision Transformer: Reinforcement Learning via Sequence
Modeling" (NeurIPS 2021, arXiv:2106.01345): a trajectory is the token sequence (R_1, s_1, a_1,
R_2, s_2, a_2, ...) of returns-to-go, states and actions, each modality embedded by its own
linear layer plus a learned embedding of the timestep, and a causal (GPT) transformer predicts
a_t from the output at the token of s_t, which has seen R_1..R_t, s_1..s_t and a_1..a_{t-1};
training is supervised regression of the dataset's actions. With the authors' code,
kzl/decision-transformer (https://github.com/kzl/decision-transformer),
gym/decision_transformer/models/decision_transformer.py DecisionTransformer (embed_timestep,
embed_return, embed_state, embed_action, forward: the time embedding added to each token,
the tokens stacked as (R, s, a) per step, embed_ln, the stacked attention mask, the GPT-2 body
without positional embeddings, predict_action = Linear + Tanh on x[:, 1], the state tokens),
gym/decision_transformer/training/seq_trainer.py SequenceTrainer.train_step (action_target =
a clone of the actions, the masked predictions and targets, optimizer.zero_grad(),
loss.backward(), torch.nn.utils.clip_grad_norm_(model.parameters(), .25), optimizer.step())
and gym/experiment.py (get_batch: random windows of K steps, left-padded with zero states,
-10 actions and a 0 attention mask, returns-to-go by discount_cumsum with gamma 1 divided by
a scale, normalised states; AdamW with weight decay 1e-4; LambdaLR warm-up
min((step + 1) / warmup_steps, 1) stepped after every update; loss mean((a_hat - a)^2)),
whose steps this script follows. The GPT-2 body is written out here: one head, pre-LayerNorm
blocks, a ReLU MLP of width 2 * d_model (4 * in the reference), dropout 0.1, a final
LayerNorm and a -1e4 additive causal and padding mask as in GPT-2; the heads that predict
states and returns, unused by the paper's loss, are left out. The timestep table starts from
sinusoids (a choice of this script) and is learned, as the reference's nn.Embedding is. The
offline data are 2-D point-reaching episodes of 20 steps by proportional controllers of
random gain and noise, so returns vary and condition the actions; d_model = 32, two blocks,
context K = 5.
Bug: nn.Embedding.from_pretrained freezes by default and freeze=False is missing, so the
timestep embedding stays at its sinusoidal initialisation instead of being learned."""

import argparse
import math

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=120)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--K", type=int, default=5, help="context length in timesteps")
parser.add_argument("--embed-dim", type=int, default=32)
parser.add_argument("--n-layer", type=int, default=2)
parser.add_argument("--dropout", type=float, default=0.1)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--weight-decay", type=float, default=1e-4)
parser.add_argument("--warmup-steps", type=int, default=20)
parser.add_argument("--out", default=None, help="where to save the trained model")
args = parser.parse_args()
torch.manual_seed(args.seed)

# offline data: point reaching, s = (position, goal), a = clipped gain * (goal - position) + noise
n_traj, max_ep_len, state_dim, act_dim, scale = 96, 20, 4, 2, 10.0
position, goal = torch.rand(n_traj, 2) * 2 - 1, torch.rand(n_traj, 2) * 2 - 1
gain, noise = torch.rand(n_traj, 1), 0.5 * torch.rand(n_traj, 1)
states, actions, rewards = [], [], []
for t in range(max_ep_len):
    s = torch.cat([position, goal], 1)
    a = (gain * (goal - position) + noise * torch.randn(n_traj, 2)).clamp(-1, 1)
    position = position + 0.5 * a
    states.append(s)
    actions.append(a)
    rewards.append(-(position - goal).norm(dim=1))
states, actions, rewards = torch.stack(states, 1), torch.stack(actions, 1), torch.stack(rewards, 1)
returns_to_go = rewards.flip(1).cumsum(1).flip(1)  # discount_cumsum with gamma = 1
state_mean, state_std = states.mean((0, 1)), states.std((0, 1)) + 1e-6


def get_batch(batch_size, K=args.K):
    s, a, rtg, timesteps, mask = [], [], [], [], []
    for i in torch.randint(0, n_traj, (batch_size,)).tolist():
        si = int(torch.randint(0, max_ep_len, ()))
        tlen = min(K, max_ep_len - si)
        pad = K - tlen
        s.append(torch.cat([torch.zeros(pad, state_dim),
                            (states[i, si:si + tlen] - state_mean) / state_std]))
        a.append(torch.cat([torch.full((pad, act_dim), -10.0), actions[i, si:si + tlen]]))
        rtg.append(torch.cat([torch.zeros(pad), returns_to_go[i, si:si + tlen] / scale]))
        timesteps.append(torch.cat([torch.zeros(pad, dtype=torch.long),
                                    torch.arange(si, si + tlen)]))
        mask.append(torch.cat([torch.zeros(pad), torch.ones(tlen)]))
    return (torch.stack(s), torch.stack(a), torch.stack(rtg).unsqueeze(-1),
            torch.stack(timesteps), torch.stack(mask))


class Block(nn.Module):
    """A GPT-2 block with one attention head: pre-LayerNorm attention and MLP, residuals."""

    def __init__(self, h, dropout):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(h), nn.LayerNorm(h)
        self.c_attn, self.c_proj = nn.Linear(h, 3 * h), nn.Linear(h, h)
        self.mlp = nn.Sequential(nn.Linear(h, 2 * h), nn.ReLU(), nn.Linear(2 * h, h),
                                 nn.Dropout(dropout))
        self.attn_dropout, self.resid_dropout = nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(self, x, attn_bias):
        q, k, v = self.c_attn(self.ln_1(x)).split(x.shape[-1], dim=2)
        att = q @ k.transpose(1, 2) / math.sqrt(x.shape[-1]) + attn_bias
        att = self.attn_dropout(att.softmax(-1))
        x = x + self.resid_dropout(self.c_proj(att @ v))
        return x + self.mlp(self.ln_2(x))


def sinusoid_table(n, h):
    pos = torch.arange(n, dtype=torch.float32).unsqueeze(1)
    freq = torch.exp(torch.arange(0, h, 2, dtype=torch.float32) * (-math.log(1e4) / h))
    return torch.cat([torch.sin(pos * freq), torch.cos(pos * freq)], 1)


class DecisionTransformer(nn.Module):
    def __init__(self, h, n_layer, dropout):
        super().__init__()
        self.hidden_size = h
        table = sinusoid_table(max_ep_len, h)  # the timestep table starts from sinusoids
        self.embed_timestep = nn.Embedding.from_pretrained(table)
        self.embed_return = nn.Linear(1, h)
        self.embed_state = nn.Linear(state_dim, h)
        self.embed_action = nn.Linear(act_dim, h)
        self.embed_ln = nn.LayerNorm(h)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList([Block(h, dropout) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(h)
        self.predict_action = nn.Sequential(nn.Linear(h, act_dim), nn.Tanh())

    def forward(self, states, actions, returns_to_go, timesteps, attention_mask):
        batch_size, seq_length = states.shape[0], states.shape[1]
        time_embeddings = self.embed_timestep(timesteps)
        state_embeddings = self.embed_state(states) + time_embeddings
        action_embeddings = self.embed_action(actions) + time_embeddings
        returns_embeddings = self.embed_return(returns_to_go) + time_embeddings
        # (R_1, s_1, a_1, R_2, s_2, a_2, ...)
        stacked_inputs = torch.stack((returns_embeddings, state_embeddings, action_embeddings),
                                     dim=1).permute(0, 2, 1, 3).reshape(batch_size,
                                                                        3 * seq_length, -1)
        x = self.drop(self.embed_ln(stacked_inputs))
        stacked_mask = attention_mask.repeat_interleave(3, dim=1)
        causal = torch.ones(3 * seq_length, 3 * seq_length).tril().bool()
        attn_bias = (torch.zeros(3 * seq_length, 3 * seq_length).masked_fill(~causal, -1e4)
                     + (1.0 - stacked_mask[:, None, :]) * -1e4)
        for block in self.blocks:
            x = block(x, attn_bias)
        x = self.ln_f(x)
        # x[:, 1, t] is the output at the token of s_t
        x = x.reshape(batch_size, seq_length, 3, self.hidden_size).permute(0, 2, 1, 3)
        return self.predict_action(x[:, 1])


model = DecisionTransformer(args.embed_dim, args.n_layer, args.dropout)
for name, p in model.blocks.named_parameters():
    if name.endswith("weight") and p.dim() == 2:
        nn.init.normal_(p, std=0.02)  # GPT-2's initialisation of the body
optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
scheduler = torch.optim.lr_scheduler.LambdaLR(
    optimizer, lambda steps: min((steps + 1) / args.warmup_steps, 1))

model.train()
for step in range(args.steps):
    states_b, actions_b, rtg_b, timesteps_b, mask_b = get_batch(args.batch_size)
    action_target = torch.clone(actions_b)
    action_preds = model(states_b, actions_b, rtg_b, timesteps_b, mask_b)
    action_preds = action_preds.reshape(-1, act_dim)[mask_b.reshape(-1) > 0]
    action_target = action_target.reshape(-1, act_dim)[mask_b.reshape(-1) > 0]
    loss = torch.mean((action_preds - action_target) ** 2)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
    optimizer.step()
    scheduler.step()
    if step % 40 == 0:
        print(f"step {step} action mse {loss.item():.4f}")

if args.out:
    torch.save({"model": model.state_dict()}, args.out)
