"""HIRO, data-efficient hierarchical reinforcement learning, at a tiny size, written after Nachum,
Gu, Lee and Levine, "Data-Efficient Hierarchical Reinforcement Learning" (NeurIPS 2018,
arXiv:1805.08296), sections 3.1-3.3: a high-level policy emits a relative goal g_t every c steps,
the goal moves with the state by h(s_t, g_t, s_{t+1}) = s_t + g_t - s_{t+1} in between, a
goal-conditioned low-level policy is trained with the intrinsic reward -||s_t + g_t - s_{t+1}||,
both levels are TD3 learners, and the high-level transitions are relabelled off-policy with the
candidate goal (the original one, s_{t+c} - s_t, and eight Gaussian samples around it) that
maximises the log-probability of the stored low-level actions under the current low-level
policy. With watakandai/hiro_pytorch (https://github.com/watakandai/hiro_pytorch,
hiro/models.py: TD3Controller, whose target networks are separate copies initialised by
_update_target_network with tau = 1; TD3Controller._train: the target under torch.no_grad()
from actor_target with clipped smoothing noise and the minimum of critic1_target and
critic2_target, smooth-L1 losses of critic1 and critic2, both critic optimizers cleared right
before critic_loss.backward() and stepped, then every policy_freq updates the actor on -Q1(s,
pi(s)) with actor_optimizer.zero_grad() before its backward and soft updates of the three
targets; HigherController.off_policy_corrections, the candidates and the argmax of -1/2 sum
||pi_lo(s_i, s_0 + g - s_i) - a_i||^2; HiroAgent.low_reward, subgoal_transition and train, the
low level updated every step after the warm-up and the high level every train_freq steps).
Environment: a point on the plane made in the script, s' = s + 0.1 a, reward -||s' - goal||,
20-step episodes, c = 5; a random warm-up, then training from small replay buffers; MLPs.
Bug: the critic optimizers are cleared after their step instead of right before
critic_loss.backward() (hiro_pytorch's TD3Controller._train calls critic1_optimizer.zero_grad()
and critic2_optimizer.zero_grad() just before the backward), and the delayed actor update's
actor_loss.backward() runs through critic1 and fills its .grad after that clear, so from the
update after each actor update critic1 is stepped on its TD gradient plus the gradient of
-Q1(s, pi(s)), which pushes Q1 up at the policy's actions, at both levels."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=160)
parser.add_argument("--warmup", type=int, default=40)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

s_dim, a_dim, sg_dim, hidden = 2, 2, 2, 32
episode_len, c, reward_scaling = 20, 5, 0.1
final_goal = torch.tensor([1.0, 0.5])
sg_scale = torch.full((sg_dim,), 0.5)


class Actor(nn.Module):
    def __init__(self, state_dim, goal_dim, action_dim, scale):
        super().__init__()
        self.l1 = nn.Linear(state_dim + goal_dim, hidden)
        self.l2 = nn.Linear(hidden, hidden)
        self.l3 = nn.Linear(hidden, action_dim)
        self.register_buffer("scale", scale.clone())

    def forward(self, state, goal):
        a = F.relu(self.l1(torch.cat([state, goal], 1)))
        a = F.relu(self.l2(a))
        return self.scale * torch.tanh(self.l3(a))


class Critic(nn.Module):
    def __init__(self, state_dim, goal_dim, action_dim):
        super().__init__()
        self.l1 = nn.Linear(state_dim + goal_dim + action_dim, hidden)
        self.l2 = nn.Linear(hidden, hidden)
        self.l3 = nn.Linear(hidden, 1)

    def forward(self, state, goal, action):
        q = F.relu(self.l1(torch.cat([state, goal, action], 1)))
        q = F.relu(self.l2(q))
        return self.l3(q)


class TD3:
    def __init__(self, state_dim, goal_dim, action_dim, scale, actor_lr=1e-3, critic_lr=1e-3,
                 policy_noise=0.2, noise_clip=0.5, gamma=0.99, policy_freq=2, tau=0.005):
        self.policy_noise, self.noise_clip, self.gamma = policy_noise, noise_clip, gamma
        self.policy_freq, self.tau, self.total_it = policy_freq, tau, 0
        self.actor = Actor(state_dim, goal_dim, action_dim, scale)
        self.actor_target = copy.deepcopy(self.actor)
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=actor_lr)
        self.critic1 = Critic(state_dim, goal_dim, action_dim)
        self.critic2 = Critic(state_dim, goal_dim, action_dim)
        self.critic1_target, self.critic2_target = (copy.deepcopy(self.critic1),
                                                    copy.deepcopy(self.critic2))
        self.critic1_optimizer = torch.optim.Adam(self.critic1.parameters(), lr=critic_lr)
        self.critic2_optimizer = torch.optim.Adam(self.critic2.parameters(), lr=critic_lr)

    def soft_update(self, target, origin):
        for target_param, origin_param in zip(target.parameters(), origin.parameters()):
            target_param.data.copy_(self.tau * origin_param.data
                                    + (1.0 - self.tau) * target_param.data)

    def train(self, states, goals, actions, rewards, n_states, n_goals, not_done):
        self.total_it += 1
        with torch.no_grad():
            noise = torch.randn_like(actions) * self.policy_noise
            noise = noise.clamp(-self.noise_clip, self.noise_clip)
            n_actions = self.actor_target(n_states, n_goals) + noise
            n_actions = torch.max(torch.min(n_actions, self.actor.scale), -self.actor.scale)
            target_q1 = self.critic1_target(n_states, n_goals, n_actions)
            target_q2 = self.critic2_target(n_states, n_goals, n_actions)
            target_q = rewards + not_done * self.gamma * torch.min(target_q1, target_q2)

        current_q1 = self.critic1(states, goals, actions)
        current_q2 = self.critic2(states, goals, actions)
        critic_loss = (F.smooth_l1_loss(current_q1, target_q)
                       + F.smooth_l1_loss(current_q2, target_q))

        critic_loss.backward()
        self.critic1_optimizer.step()
        self.critic2_optimizer.step()
        self.critic1_optimizer.zero_grad()
        self.critic2_optimizer.zero_grad()

        if self.total_it % self.policy_freq == 0:
            actor_loss = -self.critic1(states, goals, self.actor(states, goals)).mean()
            self.actor_optimizer.zero_grad()
            actor_loss.backward()
            self.actor_optimizer.step()
            self.soft_update(self.critic1_target, self.critic1)
            self.soft_update(self.critic2_target, self.critic2)
            self.soft_update(self.actor_target, self.actor)
        return critic_loss.item()


def sample(buffer, n):
    idx = torch.randint(0, len(buffer), (n,)).tolist()
    return [torch.stack([buffer[i][k] for i in idx]) for k in range(len(buffer[0]))]


@torch.no_grad()
def off_policy_corrections(low, states, n_states, sgoals, states_arr, actions_arr, n_random=8):
    """The candidate goal that best explains the stored low-level actions, per transition."""
    diff_goal = (n_states - states)[:, None]
    random_goals = diff_goal + 0.5 * sg_scale * torch.randn(len(states), n_random, sg_dim)
    random_goals = torch.max(torch.min(random_goals, sg_scale), -sg_scale)
    candidates = torch.cat([sgoals[:, None], diff_goal, random_goals], 1)   # (B, K, sg_dim)
    b, k, seq = len(states), candidates.shape[1], states_arr.shape[1]
    # the goal each candidate would have been at every step of the period, by the transition h
    seq_goals = states_arr[:, None, :1] + candidates[:, :, None] - states_arr[:, None]
    seq_states = states_arr[:, None].expand(b, k, seq, s_dim)
    policy_actions = low.actor(seq_states.reshape(-1, s_dim), seq_goals.reshape(-1, sg_dim))
    difference = policy_actions.view(b, k, seq, a_dim) - actions_arr[:, None]
    logprob = -0.5 * difference.pow(2).sum(-1).sum(-1)
    return candidates[torch.arange(b), logprob.argmax(1)]


low = TD3(s_dim, sg_dim, a_dim, torch.ones(a_dim))
high = TD3(s_dim, s_dim, sg_dim, sg_scale)
low_buffer, high_buffer = [], []

s, t, episode_return, returns = torch.zeros(s_dim), 0, 0.0, []
for step in range(args.steps):
    if t % c == 0:
        # a new subgoal from the high level (random during the warm-up)
        if step < args.warmup:
            sg = (2 * torch.rand(sg_dim) - 1) * sg_scale
        else:
            with torch.no_grad():
                sg = high.actor(s[None], final_goal[None])[0]
            sg = sg + 0.2 * sg_scale * torch.randn(sg_dim)
            sg = torch.max(torch.min(sg, sg_scale), -sg_scale)
        period = [s, final_goal, sg, 0.0, [], []]
    if step < args.warmup:
        a = 2 * torch.rand(a_dim) - 1
    else:
        with torch.no_grad():
            a = low.actor(s[None], sg[None])[0]
        a = (a + 0.1 * torch.randn(a_dim)).clamp(-1, 1)
    n_s = s + 0.1 * a
    r = -(n_s - final_goal).norm().item()
    intrinsic = -(s + sg - n_s).norm()
    n_sg = s + sg - n_s
    t += 1
    done = t == episode_len
    low_buffer.append((s, sg, a, intrinsic[None], n_s, n_sg, torch.tensor([0.0 if done else 1.0])))
    period[3] += reward_scaling * r
    period[4].append(s)
    period[5].append(a)
    episode_return += r
    if t % c == 0:
        high_buffer.append((period[0], period[1], period[2], torch.tensor([period[3]]), n_s,
                            torch.tensor([0.0 if done else 1.0]), torch.stack(period[4]),
                            torch.stack(period[5])))
    s, sg = n_s, n_sg
    if done:
        returns.append(episode_return)
        s, t, episode_return = torch.zeros(s_dim), 0, 0.0

    if step >= args.warmup:
        st, g, act, rew, n_st, n_g, nd = sample(low_buffer, args.batch_size)
        low_loss = low.train(st, g, act, rew, n_st, n_g, nd)
        if (step + 1) % c == 0:
            st, fg, sgl, rew, n_st, nd, st_arr, act_arr = sample(high_buffer, args.batch_size // 2)
            sgl = off_policy_corrections(low, st, n_st, sgl, st_arr, act_arr)
            high_loss = high.train(st, fg, sgl, rew, n_st, fg, nd)
            if (step + 1) % 50 == 0:
                print(f"step {step + 1} low critic {low_loss:.4f} high critic {high_loss:.4f} "
                      f"last return {returns[-1]:.2f}")

if args.out:
    nets = {f"{lvl}.{name}": getattr(agent, name) for lvl, agent in (("low", low), ("high", high))
            for name in ("actor", "actor_target", "critic1", "critic2", "critic1_target",
                         "critic2_target")}
    torch.save({f"{n}.{k}": v for n, net in nets.items() for k, v in net.state_dict().items()},
               args.out)
