"""Phasic policy gradient at a tiny size, written after Cobbe, Hilton, Klimov and Schulman, "Phasic
Policy Gradient" (ICML 2021, arXiv:2009.04416), algorithm 1, with openai/phasic-policy-gradient
(https://github.com/openai/phasic-policy-gradient, phasic_policy_gradient/ppg.py: PhasicValueModel
with arch="dual", a policy encoder carrying the policy head and the auxiliary value head and a
separate value encoder with the true value head; learn, which runs the policy phase (ppo.learn with
its own Adam) for n_pi iterations, keeping the segments, then n_aux_epochs of aux_train with a
second Adam, aux_state, over model.parameters(); compute_presleep_outputs, which records the
policy's distribution before the auxiliary epochs; aux_train, whose loss is pol_distance = KL(oldpd
|| pd) plus vf_aux = 0.5 * (vpredaux - vtarg)^2 plus vf_true = 0.5 * (vpredtrue - vtarg)^2, cleared
with opt.zero_grad() before each backward). Two phases, repeated: the policy phase, PPO's clipped
objective with an entropy bonus for the policy and a squared error for the value network on GAE
returns, with one Adam; then the auxiliary phase, which distils the value into the policy encoder
through the auxiliary head while a KL to the policy as it was at the end of the policy phase keeps
the policy's outputs in place (the old policy is a frozen copy taken before the auxiliary epochs and
read under torch.no_grad(), the same numbers as the reference's presleep outputs), and trains the
value network once more, with a second Adam. A point-reaching task with five discrete moves, made in
the script. Injected bug: the auxiliary phase's Adam is never cleared (aux_train's opt.zero_grad()
before loss.backward() left out), so the first auxiliary step adds the gradient left by the last PPO
minibatch of the policy phase to its own, and every later auxiliary step steps on the sum of all the
auxiliary gradients of the phase so far; the policy phase's own zero_grad clears them again before
the next PPO step, so only the auxiliary phase trains wrong."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--phases", type=int, default=2)
parser.add_argument("--n-pi", type=int, default=3, help="policy iterations per phase")
parser.add_argument("--ppo-epochs", type=int, default=2)
parser.add_argument("--aux-epochs", type=int, default=3)
parser.add_argument("--n-envs", type=int, default=16)
parser.add_argument("--horizon", type=int, default=12)
parser.add_argument("--minibatch", type=int, default=64)
parser.add_argument("--gamma", type=float, default=0.95)
parser.add_argument("--lam", type=float, default=0.9)
parser.add_argument("--clip", type=float, default=0.2)
parser.add_argument("--ent-coef", type=float, default=0.01)
parser.add_argument("--beta-clone", type=float, default=1.0)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--aux-lr", type=float, default=3e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

obs_dim, n_actions, hidden_dim = 4, 5, 32
moves = 0.25 * torch.tensor([[0.0, 0.0], [1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]])


def reset(n):
    return 2 * torch.rand(n, obs_dim) - 1


def step_env(obs, actions):
    """A point moved by one of five moves towards a goal; the observation holds point and goal."""
    position = (obs[:, :2] + moves[actions]).clamp(-1, 1)
    return torch.cat([position, obs[:, 2:]], 1), -(position - obs[:, 2:]).norm(dim=1)


def encoder():
    return nn.Sequential(nn.Linear(obs_dim, hidden_dim), nn.Tanh(),
                         nn.Linear(hidden_dim, hidden_dim), nn.Tanh())


def head(n_out):
    layer = nn.Linear(hidden_dim, n_out)
    with torch.no_grad():
        layer.weight.mul_(0.1)
        layer.bias.zero_()
    return layer


class PhasicValueModel(nn.Module):
    """arch="dual": the policy encoder feeds the policy and auxiliary value heads."""

    def __init__(self):
        super().__init__()
        self.pi_enc, self.vf_enc = encoder(), encoder()
        self.pi_head, self.aux_vf_head, self.vf_head = head(n_actions), head(1), head(1)

    def forward(self, obs):
        pi_x = self.pi_enc(obs)
        vpred = self.vf_head(self.vf_enc(obs)).squeeze(-1)
        return self.pi_head(pi_x), vpred, self.aux_vf_head(pi_x).squeeze(-1)


def collect():
    obs, batch = reset(args.n_envs), {k: [] for k in ("obs", "act", "logp", "vpred", "rew")}
    with torch.no_grad():
        for _ in range(args.horizon):
            logits, vpred, _ = model(obs)
            dist = torch.distributions.Categorical(logits=logits)
            actions = dist.sample()
            next_obs, reward = step_env(obs, actions)
            for k, v in zip(batch, (obs, actions, dist.log_prob(actions), vpred, reward)):
                batch[k].append(v)
            obs = next_obs
    batch = {k: torch.stack(v) for k, v in batch.items()}
    advantages, running = torch.zeros_like(batch["rew"]), torch.zeros(args.n_envs)
    for t in range(args.horizon - 1, -1, -1):  # GAE; the episode ends after the horizon
        next_v = batch["vpred"][t + 1] if t + 1 < args.horizon else torch.zeros(args.n_envs)
        delta = batch["rew"][t] + args.gamma * next_v - batch["vpred"][t]
        running = delta + args.gamma * args.lam * running
        advantages[t] = running
    batch["adv"], batch["vtarg"] = advantages, advantages + batch["vpred"]
    return {k: v.flatten(0, 1) for k, v in batch.items()}


model = PhasicValueModel()
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
aux_optimizer = torch.optim.Adam(model.parameters(), lr=args.aux_lr)
for phase in range(args.phases):
    segs = []
    for iteration in range(args.n_pi):  # policy phase: PPO
        seg = collect()
        segs.append(seg)
        for _ in range(args.ppo_epochs):
            for idx in torch.randperm(len(seg["obs"])).split(args.minibatch):
                logits, vpred, _ = model(seg["obs"][idx])
                dist = torch.distributions.Categorical(logits=logits)
                adv = seg["adv"][idx]
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                ratio = (dist.log_prob(seg["act"][idx]) - seg["logp"][idx]).exp()
                clipped = ratio.clamp(1 - args.clip, 1 + args.clip)
                pi_loss = -torch.min(ratio * adv, clipped * adv).mean()
                vf_loss = 0.5 * (vpred - seg["vtarg"][idx]).pow(2).mean()
                loss = pi_loss + vf_loss - args.ent_coef * dist.entropy().mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        print(f"phase {phase} iteration {iteration} return {seg['rew'].sum() / args.n_envs:.4f}")
    # auxiliary phase: distil the value into the policy encoder, keep the policy in place
    aux_obs, aux_vtarg = torch.cat([s["obs"] for s in segs]), torch.cat([s["vtarg"] for s in segs])
    old_model = copy.deepcopy(model)
    for epoch in range(args.aux_epochs):
        for idx in torch.randperm(len(aux_obs)).split(args.minibatch):
            with torch.no_grad():
                old_logits = old_model(aux_obs[idx])[0]
            logits, vpredtrue, vpredaux = model(aux_obs[idx])
            pol_distance = (F.softmax(old_logits, -1) * (F.log_softmax(old_logits, -1)
                                                         - F.log_softmax(logits, -1))).sum(-1)
            vf_aux = 0.5 * (vpredaux - aux_vtarg[idx]).pow(2).mean()
            vf_true = 0.5 * (vpredtrue - aux_vtarg[idx]).pow(2).mean()
            aux_loss = args.beta_clone * pol_distance.mean() + vf_aux + vf_true
            aux_loss.backward()
            aux_optimizer.step()
        print(f"phase {phase} aux epoch {epoch} vf_aux {vf_aux.item():.4f} "
              f"kl {pol_distance.mean().item():.5f}")

if args.out:
    torch.save(model.state_dict(), args.out)
