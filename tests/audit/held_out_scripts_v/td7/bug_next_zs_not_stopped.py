"""TD7 on a tiny continuous-control task, written after Fujimoto, Chang, Smith, Gu, Precup and
Meger, "For SALE: State-Action Representation Learning for Deep Reinforcement Learning"
(NeurIPS 2023, arXiv:2306.02451): TD3 with SALE embeddings, an encoder f(s) = z_s and
g(z_s, a) = z_sa trained to predict the next state's embedding, min ||g(f(s), a) - |f(s')|_x||^2
with the target embedding f(s') held fixed (stop-gradient), AvgL1Norm on the embeddings, and
an actor and twin critics that read the embeddings of a frozen copy of the encoder (refreshed at
every target update), plus LAP prioritised replay with its Huber loss and clipping of the target
values to the range seen so far. With the authors' code, sfujim/TD7
(https://github.com/sfujim/TD7, TD7.py: AvgL1Norm, LAP_huber, Actor, Encoder (zs, zsa), Critic
and Agent.train), whose steps this script follows: the encoder step computes next_zs under
torch.no_grad() and regresses encoder.zsa(encoder.zs(s), a) onto it with an MSE loss; the
critic step builds, under no_grad, the target from fixed_encoder_target's embeddings, the target
actor with clipped noise and the min of the target critic's two heads, clamped to
[min_target, max_target], and reads the state and state-action embeddings of fixed_encoder;
its loss is LAP_huber of |Q - Q_target| and the new priorities are max |TD| clamped at
min_priority to the power alpha; every policy_freq steps the actor maximises Q(s, pi(s)) with
zsa recomputed by fixed_encoder for the actor's action; every target_update_rate steps the
target actor, target critic and fixed_encoder_target take their online weights, fixed_encoder
takes the encoder's, the priority maximum resets and the value range is updated. Each network
has its own Adam optimizer, zeroed right before its own backward. The task: a 2-D point mass
pushed by a bounded force towards the origin (failure when it leaves the box), hidden sizes of
32 and a 16-dimensional embedding; the policy checkpoints of the paper (used for evaluation
only) are left out.
Bug: next_zs is computed outside torch.no_grad(), so the encoder loss also moves its target."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--max-timesteps", type=int, default=300)
parser.add_argument("--start-timesteps", type=int, default=100)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--discount", type=float, default=0.99)
parser.add_argument("--target-update-rate", type=int, default=25)
parser.add_argument("--exploration-noise", type=float, default=0.1)
parser.add_argument("--target-policy-noise", type=float, default=0.2)
parser.add_argument("--noise-clip", type=float, default=0.5)
parser.add_argument("--policy-freq", type=int, default=2)
parser.add_argument("--alpha", type=float, default=0.4)
parser.add_argument("--min-priority", type=float, default=1.0)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--out", default=None, help="where to save every network of the agent")
args = parser.parse_args()
torch.manual_seed(args.seed)
torch.set_num_threads(1)

state_dim, action_dim, zs_dim, hdim, max_episode_steps = 4, 2, 16, 32, 25


def AvgL1Norm(x, eps=1e-8):
    return x / x.abs().mean(-1, keepdim=True).clamp(min=eps)


def LAP_huber(x, min_priority=1.0):
    return torch.where(x < min_priority, 0.5 * x.pow(2), min_priority * x).sum(1).mean()


class Actor(nn.Module):
    def __init__(self):
        super().__init__()
        self.l0 = nn.Linear(state_dim, hdim)
        self.l1 = nn.Linear(zs_dim + hdim, hdim)
        self.l2 = nn.Linear(hdim, hdim)
        self.l3 = nn.Linear(hdim, action_dim)

    def forward(self, state, zs):
        a = torch.cat([AvgL1Norm(self.l0(state)), zs], 1)
        a = F.relu(self.l1(a))
        a = F.relu(self.l2(a))
        return torch.tanh(self.l3(a))


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.zs1 = nn.Linear(state_dim, hdim)
        self.zs2 = nn.Linear(hdim, hdim)
        self.zs3 = nn.Linear(hdim, zs_dim)
        self.zsa1 = nn.Linear(zs_dim + action_dim, hdim)
        self.zsa2 = nn.Linear(hdim, hdim)
        self.zsa3 = nn.Linear(hdim, zs_dim)

    def zs(self, state):
        zs = F.elu(self.zs1(state))
        zs = F.elu(self.zs2(zs))
        return AvgL1Norm(self.zs3(zs))

    def zsa(self, zs, action):
        zsa = F.elu(self.zsa1(torch.cat([zs, action], 1)))
        zsa = F.elu(self.zsa2(zsa))
        return self.zsa3(zsa)


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.q01 = nn.Linear(state_dim + action_dim, hdim)
        self.q1 = nn.Linear(2 * zs_dim + hdim, hdim)
        self.q2 = nn.Linear(hdim, hdim)
        self.q3 = nn.Linear(hdim, 1)
        self.q02 = nn.Linear(state_dim + action_dim, hdim)
        self.q4 = nn.Linear(2 * zs_dim + hdim, hdim)
        self.q5 = nn.Linear(hdim, hdim)
        self.q6 = nn.Linear(hdim, 1)

    def forward(self, state, action, zsa, zs):
        sa = torch.cat([state, action], 1)
        embeddings = torch.cat([zsa, zs], 1)
        q1 = torch.cat([AvgL1Norm(self.q01(sa)), embeddings], 1)
        q1 = self.q3(F.elu(self.q2(F.elu(self.q1(q1)))))
        q2 = torch.cat([AvgL1Norm(self.q02(sa)), embeddings], 1)
        q2 = self.q6(F.elu(self.q5(F.elu(self.q4(q2)))))
        return torch.cat([q1, q2], 1)


def env_reset():
    return torch.cat([torch.rand(2) * 2 - 1, torch.zeros(2)])


def env_step(state, action):
    """Point mass: the force changes the velocity; reward for staying near the origin."""
    vel = 0.9 * state[2:] + 0.2 * action
    pos = state[:2] + 0.1 * vel
    reward = -pos.norm() - 0.05 * action.pow(2).sum()
    failed = bool(pos.abs().max() > 2.0)
    return torch.cat([pos, vel]), float(reward) - 5.0 * failed, failed


actor = Actor()
actor_optimizer = torch.optim.Adam(actor.parameters(), lr=args.lr)
actor_target = copy.deepcopy(actor)
critic = Critic()
critic_optimizer = torch.optim.Adam(critic.parameters(), lr=args.lr)
critic_target = copy.deepcopy(critic)
encoder = Encoder()
encoder_optimizer = torch.optim.Adam(encoder.parameters(), lr=args.lr)
fixed_encoder = copy.deepcopy(encoder)
fixed_encoder_target = copy.deepcopy(encoder)

# LAP replay buffer: transitions are sampled in proportion to their priority
capacity = args.max_timesteps
buf_state = torch.zeros(capacity, state_dim)
buf_action = torch.zeros(capacity, action_dim)
buf_next_state = torch.zeros(capacity, state_dim)
buf_reward = torch.zeros(capacity, 1)
buf_not_done = torch.zeros(capacity, 1)
priority = torch.zeros(capacity)
max_priority, size = 1.0, 0

training_steps = 0
value_max, value_min, max_target, min_target = -1e8, 1e8, 0.0, 0.0


def train():
    global training_steps, max_priority, value_max, value_min, max_target, min_target
    training_steps += 1
    ind = torch.multinomial(priority[:size], args.batch_size, replacement=True)
    state, action, next_state = buf_state[ind], buf_action[ind], buf_next_state[ind]
    reward, not_done = buf_reward[ind], buf_not_done[ind]

    # encoder: predict the next state's embedding
    next_zs = encoder.zs(next_state)
    zs = encoder.zs(state)
    pred_zs = encoder.zsa(zs, action)
    encoder_loss = F.mse_loss(pred_zs, next_zs)
    encoder_optimizer.zero_grad()
    encoder_loss.backward()
    encoder_optimizer.step()

    # critic
    with torch.no_grad():
        fixed_target_zs = fixed_encoder_target.zs(next_state)
        noise = (torch.randn_like(action) * args.target_policy_noise).clamp(-args.noise_clip,
                                                                             args.noise_clip)
        next_action = (actor_target(next_state, fixed_target_zs) + noise).clamp(-1, 1)
        fixed_target_zsa = fixed_encoder_target.zsa(fixed_target_zs, next_action)
        Q_target = critic_target(next_state, next_action, fixed_target_zsa, fixed_target_zs)
        Q_target = Q_target.min(1, keepdim=True)[0]
        Q_target = reward + not_done * args.discount * Q_target.clamp(min_target, max_target)
        value_max = max(value_max, float(Q_target.max()))
        value_min = min(value_min, float(Q_target.min()))
        fixed_zs = fixed_encoder.zs(state)
        fixed_zsa = fixed_encoder.zsa(fixed_zs, action)
    Q = critic(state, action, fixed_zsa, fixed_zs)
    td_loss = (Q - Q_target).abs()
    critic_loss = LAP_huber(td_loss, args.min_priority)
    critic_optimizer.zero_grad()
    critic_loss.backward()
    critic_optimizer.step()

    # LAP priorities
    new_priority = td_loss.max(1)[0].clamp(min=args.min_priority).pow(args.alpha).detach()
    priority[ind] = new_priority
    max_priority = max(max_priority, float(new_priority.max()))

    # actor, every policy_freq steps
    if training_steps % args.policy_freq == 0:
        pi = actor(state, fixed_zs)
        fixed_zsa = fixed_encoder.zsa(fixed_zs, pi)
        actor_loss = -critic(state, pi, fixed_zsa, fixed_zs).mean()
        actor_optimizer.zero_grad()
        actor_loss.backward()
        actor_optimizer.step()

    # target networks, fixed encoders, priority maximum and value range
    if training_steps % args.target_update_rate == 0:
        actor_target.load_state_dict(actor.state_dict())
        critic_target.load_state_dict(critic.state_dict())
        fixed_encoder_target.load_state_dict(fixed_encoder.state_dict())
        fixed_encoder.load_state_dict(encoder.state_dict())
        max_priority = float(priority[:size].max())
        max_target, min_target = value_max, value_min
    return critic_loss.item()


state, ep_steps, ep_return = env_reset(), 0, 0.0
for t in range(args.max_timesteps):
    if t < args.start_timesteps:
        action = torch.rand(action_dim) * 2 - 1
    else:
        with torch.no_grad():
            s = state.unsqueeze(0)
            action = actor(s, fixed_encoder.zs(s))[0]
            action = (action + torch.randn_like(action) * args.exploration_noise).clamp(-1, 1)
    next_state, reward, failed = env_step(state, action)
    ep_steps += 1
    ep_return += reward
    buf_state[size], buf_action[size], buf_next_state[size] = state, action, next_state
    buf_reward[size], buf_not_done[size] = reward, 1.0 - float(failed)
    priority[size] = max_priority
    size += 1
    state = next_state
    if t >= args.start_timesteps:
        critic_loss_value = train()
        if t % 100 == 0:
            print(f"t {t} critic loss {critic_loss_value:.4f} episode return {ep_return:.2f}")
    if failed or ep_steps == max_episode_steps:
        state, ep_steps, ep_return = env_reset(), 0, 0.0

if args.out:
    torch.save({"encoder": encoder.state_dict(), "fixed_encoder": fixed_encoder.state_dict(),
                "fixed_encoder_target": fixed_encoder_target.state_dict(),
                "actor": actor.state_dict(), "actor_target": actor_target.state_dict(),
                "critic": critic.state_dict(), "critic_target": critic_target.state_dict()},
               args.out)
