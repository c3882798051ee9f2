"""Distral, multitask reinforcement learning with task policies regularised towards a distilled
shared policy, on three small grid-world tasks, written after Teh, Bapst, Czarnecki, Quan,
Kirkpatrick, Hadsell, Heess and Pascanu, "Distral: Robust Multitask Reinforcement Learning"
(NeurIPS 2017, arXiv:1707.04175): each task i maximises its return with a KL penalty towards the
distilled policy pi_0 and an entropy bonus, whose optimum for fixed pi_0 is the soft-Q policy
pi_i(a|s) proportional to pi_0(a|s)^alpha exp(beta Q_i(s, a)), with Q_i trained by soft
Q-learning towards r + gamma V_i(s'), V_i(s) = (1 / beta) log sum_a pi_0(a|s)^alpha
exp(beta Q_i(s, a)); pi_0 in turn is trained by distillation, maximising the log-likelihood under
pi_0 of the task policies' behaviour on the states they visit. With the public PyTorch
reproduction Alfo5123/Robust-Multitask-RL (https://github.com/Alfo5123/Robust-Multitask-RL,
code/distral_2col/network.py: select_action samples from pi_0^alpha exp(beta (Q - V));
optimize_model regresses Q(s_t, a_t) by mean squared error on reward + gamma * V(s_{t+1}), the
soft value being computed from the volatile (no-gradient) next states with both the Q network and
the policy network, so the target is a constant; optimize_policy sums over the tasks minus the
log-probability under the policy network of the actions in each task's memory and steps the
policy's own optimizer; code/distral_2col/trainingDistral2col.py trainD alternates one action and
one optimize_model per task with one optimize_policy, each network with its own Adam), whose
steps this script follows. Two phases: a warm-up of the task Q networks alone by soft Q-learning
under a uniform prior, then the joint Distral loop. Differences: the distillation takes the
expectation over the task policy's actions at replayed states, -sum_a pi_i(a|s) log pi_0(a|s),
with pi_i a fixed (detached) teacher, instead of the single stored action (the same gradient in
expectation, without the reference's gamma^t weights or gradient clamping); the tasks are
5 x 5 grids with one-hot states, a goal on the right-hand column for each task (+1 and the episode
ends), a step cost and a 20-step time limit; the networks are MLPs.
Bug: the distillation's teacher pi_i is not detached; it is built from the student's own
log pi_0, so the distillation loss also differentiates pi_0 through the teacher."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--warmup-steps", type=int, default=40)
parser.add_argument("--distral-steps", type=int, default=80)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--n-envs", type=int, default=8)
parser.add_argument("--alpha", type=float, default=0.5)
parser.add_argument("--beta", type=float, default=20.0)
parser.add_argument("--gamma", type=float, default=0.9)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--out", default=None, help="where to save the task Q networks and pi_0")
args = parser.parse_args()
torch.manual_seed(args.seed)

size, n_actions, hidden, horizon, step_cost = 5, 4, 32, 20, 0.02
n_states = size * size
goals = torch.tensor([0 * size + 4, 2 * size + 4, 4 * size + 4])
n_tasks = len(goals)
moves = torch.tensor([[-1, 0], [1, 0], [0, -1], [0, 1]])


def mlp():
    return nn.Sequential(nn.Linear(n_states, hidden), nn.ReLU(), nn.Linear(hidden, n_actions))


def one_hot(cells):
    return F.one_hot(cells, n_states).float()


q_nets = nn.ModuleList([mlp() for _ in range(n_tasks)])
pi0 = mlp()
q_optimizers = [torch.optim.Adam(q.parameters(), lr=args.lr) for q in q_nets]
pi0_optimizer = torch.optim.Adam(pi0.parameters(), lr=args.lr)
uniform_log_prior = torch.full((1, n_actions), -math.log(n_actions))


def task_logits(q, log_prior):
    """Logits of the task policy pi_i, proportional to pi_0^alpha exp(beta Q_i)."""
    return args.alpha * log_prior + args.beta * q


def soft_value(q, log_prior):
    return torch.logsumexp(task_logits(q, log_prior), -1) / args.beta


# per-task replay memories and parallel environments
capacity = args.n_envs * (args.warmup_steps + args.distral_steps)
memory = [{"obs": torch.zeros(capacity, dtype=torch.long), "act": torch.zeros(capacity, dtype=torch.long),
           "rew": torch.zeros(capacity), "next_obs": torch.zeros(capacity, dtype=torch.long),
           "done": torch.zeros(capacity)} for _ in range(n_tasks)]
memory_len = [0] * n_tasks
cells = torch.randint(0, n_states, (n_tasks, args.n_envs))
t_env = torch.zeros(n_tasks, args.n_envs)


def env_step(i, action):
    """Moves task i's agents, stores the transitions and resets finished episodes."""
    rc = torch.stack([cells[i] // size, cells[i] % size], 1) + moves[action]
    next_cells = rc.clamp(0, size - 1) @ torch.tensor([size, 1])
    done = (next_cells == goals[i]).float()
    reward = done - step_cost
    idx = torch.arange(memory_len[i], memory_len[i] + args.n_envs)
    for key, value in (("obs", cells[i]), ("act", action), ("rew", reward), ("next_obs", next_cells),
                       ("done", done)):
        memory[i][key][idx] = value
    memory_len[i] += args.n_envs
    t_env[i] += 1
    reset = (done > 0) | (t_env[i] >= horizon)
    cells[i] = torch.where(reset, torch.randint(0, n_states, (args.n_envs,)), next_cells)
    t_env[i] = torch.where(reset, torch.zeros_like(t_env[i]), t_env[i])
    return reward


def sample_batch(i):
    idx = torch.randint(0, memory_len[i], (args.batch_size,))
    m = memory[i]
    return one_hot(m["obs"][idx]), m["act"][idx], m["rew"][idx], one_hot(m["next_obs"][idx]), m["done"][idx]


# phase 1: warm-up of the task Q networks alone, soft Q-learning under a uniform prior
for step in range(args.warmup_steps):
    for i in range(n_tasks):
        with torch.no_grad():
            logits = task_logits(q_nets[i](one_hot(cells[i])), uniform_log_prior)
        reward = env_step(i, torch.distributions.Categorical(logits=logits).sample())
        obs, act, rew, next_obs, done = sample_batch(i)
        with torch.no_grad():
            v_next = soft_value(q_nets[i](next_obs), uniform_log_prior)
        target = rew + args.gamma * (1 - done) * v_next
        q_sa = q_nets[i](obs).gather(1, act.unsqueeze(1)).squeeze(1)
        q_loss = F.mse_loss(q_sa, target)
        q_optimizers[i].zero_grad()
        q_loss.backward()
        q_optimizers[i].step()
    if step % 20 == 0:
        print(f"warm-up {step} q_loss {q_loss.item():.4f}")

# phase 2: Distral, task policies regularised towards pi_0, pi_0 distilled from them
for step in range(args.distral_steps):
    returns = []
    for i in range(n_tasks):
        with torch.no_grad():
            obs_now = one_hot(cells[i])
            logits = task_logits(q_nets[i](obs_now), pi0(obs_now).log_softmax(-1))
        reward = env_step(i, torch.distributions.Categorical(logits=logits).sample())
        returns.append(reward.mean())
        obs, act, rew, next_obs, done = sample_batch(i)
        with torch.no_grad():
            log_pi0_next = pi0(next_obs).log_softmax(-1)
            v_next = soft_value(q_nets[i](next_obs), log_pi0_next)
        target = rew + args.gamma * (1 - done) * v_next
        q_sa = q_nets[i](obs).gather(1, act.unsqueeze(1)).squeeze(1)
        q_loss = F.mse_loss(q_sa, target)
        q_optimizers[i].zero_grad()
        q_loss.backward()
        q_optimizers[i].step()

    distill_loss = 0.0
    for i in range(n_tasks):
        obs = sample_batch(i)[0]
        log_pi0 = pi0(obs).log_softmax(-1)
        teacher = task_logits(q_nets[i](obs), log_pi0).softmax(-1)
        distill_loss = distill_loss - (teacher * log_pi0).sum(-1).mean()
    pi0_optimizer.zero_grad()
    distill_loss.backward()
    pi0_optimizer.step()
    if step % 20 == 0:
        print(f"distral {step} q_loss {q_loss.item():.4f} distill {distill_loss.item():.4f} "
              f"reward {torch.stack(returns).mean().item():.3f}")

if args.out:
    torch.save({"q_nets": q_nets.state_dict(), "pi0": pi0.state_dict()}, args.out)
