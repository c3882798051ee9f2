"""R2D2: recurrent experience replay with stored recurrent states and burn-in.

Paper: Steven Kapturowski, Georg Ostrovski, John Quan, Remi Munos and Will Dabney, "Recurrent
Experience Replay in Distributed Reinforcement Learning", ICLR 2019 (OpenReview r1lyTjAqYX).
Reference implementation: google-research/seed_rl, agents/r2d2/learner.py
(compute_loss_and_priorities: the online network is unrolled over the burn-in prefix from the
stored recurrent state, its state is passed through tf.stop_gradient, the target network is
burned in separately from the same stored state, then both are unrolled over the suffix;
compute_loss_and_priorities_from_agent_outputs: double Q-learning, the greedy action of the
online network evaluated by the target network, h^-1 before and h after the n-step target,
the whole Bellman target under tf.stop_gradient, loss 0.5 * sum over time of the squared TD
errors, priorities eta * max + (1 - eta) * mean of |TD| with eta 0.9; n_step_bellman_target;
value_function_rescaling and inverse_value_function_rescaling; learner_loop: the target network
is a separate copy of the agent whose variables are assigned from the online ones every
update_target_every_n_step iterations, gradients are clipped by global norm 40, new priorities
go back into the prioritized replay; get_envs_epsilon: per-actor epsilons 0.4^(1..8)),
atari/networks.py (DuelingLSTMDQNNet: torso features concatenated with the previous reward and
one-hot previous action, an LSTM core reset to the zero state where done, dueling value and
advantage heads; _unroll_cell), and common/utils.py (PrioritizedReplay: priority exponent 0.9,
importance weights with exponent 0.6 normalised by their maximum; UnrollStore: consecutive
unrolls overlap by burn_in steps).

The task is a tiny memory POMDP: each episode lasts 6 steps, the first observation shows a cue
(one of two), later observations show only the time and noise, and the last action earns a
reward of 1 if it names the cue. Four actors with their own epsilons act with the online network
under torch.no_grad(), carrying the LSTM state; every unroll of burn_in + unroll_length steps
(overlapping the previous one by burn_in) is stored with the LSTM state the actor had at its
first step and an initial priority computed from the acting Q values. The learner samples a
prioritized batch, burns the online and target networks in from the stored state, detaches the
online state after burn-in, computes the double-Q n-step rescaled targets under torch.no_grad(),
weights the loss by the importance weights, clips the gradient norm and steps Adam; the target
network is a deepcopy synchronised every target_every learner steps.
Bug: the target network is the online network itself instead of a deep copy, so the periodic
synchronisation does nothing and the bootstrap values move with every update.
"""
import argparse
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--steps", type=int, default=50)
parser.add_argument("--num_actors", type=int, default=4)
parser.add_argument("--ep_len", type=int, default=6)
parser.add_argument("--burn_in", type=int, default=4)
parser.add_argument("--unroll_length", type=int, default=8)
parser.add_argument("--batch_size", type=int, default=16)
parser.add_argument("--replay_size", type=int, default=64)
parser.add_argument("--replay_min", type=int, default=16)
parser.add_argument("--hidden", type=int, default=32)
parser.add_argument("--n_steps", type=int, default=3)
parser.add_argument("--gamma", type=float, default=0.97)
parser.add_argument("--eta", type=float, default=0.9)
parser.add_argument("--priority_exponent", type=float, default=0.9)
parser.add_argument("--is_exponent", type=float, default=0.6)
parser.add_argument("--rescale_eps", type=float, default=1e-3)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--adam_eps", type=float, default=1e-3)
parser.add_argument("--clip_norm", type=float, default=40.0)
parser.add_argument("--target_every", type=int, default=10)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)

OBS_DIM, NUM_ACTIONS = 4, 2


class CueEnv:
    """Batched memory task: remember the cue of the first step until the last step."""

    def __init__(self, n):
        self.n = n
        self.cue = torch.randint(NUM_ACTIONS, (n,))
        self.t = torch.zeros(n, dtype=torch.long)

    def observe(self):
        obs = torch.zeros(self.n, OBS_DIM)
        first = self.t == 0
        obs[first, self.cue[first]] = 1.0
        obs[:, 2] = self.t.float() / args.ep_len
        obs[:, 3] = 0.1 * torch.randn(self.n)
        return obs

    def step(self, action):
        last = self.t == args.ep_len - 1
        reward = (last & (action == self.cue)).float()
        self.t = self.t + 1
        done = self.t == args.ep_len
        self.cue = torch.where(done, torch.randint(NUM_ACTIONS, (self.n,)), self.cue)
        self.t = torch.where(done, torch.zeros_like(self.t), self.t)
        return reward, done, self.observe()


class DuelingLSTMNet(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.torso = nn.Linear(OBS_DIM + 1 + NUM_ACTIONS, hidden)
        self.core = nn.LSTMCell(hidden, hidden)
        self.value = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))
        self.advantage = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(),
                                       nn.Linear(hidden, NUM_ACTIONS, bias=False))

    def initial_state(self, batch):
        return (torch.zeros(batch, self.core.hidden_size),
                torch.zeros(batch, self.core.hidden_size))

    def forward(self, prev_action, reward, done, obs, state):
        """Inputs are [time, batch, ...]; the state is reset to zero where done is set."""
        x = torch.cat([obs, reward.unsqueeze(-1), F.one_hot(prev_action, NUM_ACTIONS).float()],
                      -1)
        x = F.relu(self.torso(x))
        h, c = state
        outputs = []
        for t in range(x.shape[0]):
            keep = (~done[t]).float().unsqueeze(-1)
            h, c = self.core(x[t], (h * keep, c * keep))
            outputs.append(h)
        core = torch.stack(outputs, 0)
        adv = self.advantage(core)
        q = self.value(core) + adv - adv.mean(-1, keepdim=True)
        return q, (h, c)


def rescale(x):
    return torch.sign(x) * (torch.sqrt(x.abs() + 1.0) - 1.0) + args.rescale_eps * x


def inv_rescale(x):
    eps = args.rescale_eps
    inner = (torch.sqrt(1.0 + 4.0 * eps * (x.abs() + 1.0 + eps)) - 1.0) / (2.0 * eps)
    return torch.sign(x) * (inner ** 2 - 1.0)


def n_step_targets(reward, done, q_boot, gamma, n):
    """Index t holds the reward and done seen on arriving at step t, and the target of the
    transition that arrived there: sum_i gamma^i r[t+i] + gamma^n q_boot[t+n-1], cut at episode
    ends; near the end of the unroll fewer steps and the last bootstrap value are used."""
    T = reward.shape[0]
    targets = []
    for t in range(T):
        ret = torch.zeros_like(reward[0])
        alive = torch.ones_like(reward[0])
        k_end = min(t + n, T)
        for k in range(t, k_end):
            ret = ret + (gamma ** (k - t)) * alive * reward[k]
            alive = alive * (1.0 - done[k].float())
        ret = ret + (gamma ** (k_end - t)) * alive * q_boot[k_end - 1]
        targets.append(ret)
    return torch.stack(targets, 0)


def loss_and_priorities(q_online, q_target, reward, done, action):
    """Double-Q n-step loss over the unroll suffix (all tensors [time, batch, ...])."""
    with torch.no_grad():
        best = q_online.argmax(-1, keepdim=True)
        q_boot = inv_rescale(q_target.gather(-1, best).squeeze(-1))
        targets = n_step_targets(reward, done, q_boot, args.gamma, args.n_steps)
        targets = rescale(targets[1:])
    q_taken = q_online.gather(-1, action.unsqueeze(-1)).squeeze(-1)[:-1]
    td = targets - q_taken
    abs_td = td.abs().detach()
    priorities = args.eta * abs_td.max(0).values + (1 - args.eta) * abs_td.mean(0)
    loss = 0.5 * (td ** 2).sum(0)
    return loss, priorities


online_net = DuelingLSTMNet(args.hidden)
target_net = online_net
optimizer = torch.optim.Adam(online_net.parameters(), lr=args.lr, eps=args.adam_eps)

envs = CueEnv(args.num_actors)
epsilons = 0.4 ** torch.linspace(1.0, 8.0, args.num_actors)
seq_len = args.burn_in + args.unroll_length
replay, priorities = [], []

obs = envs.observe()
reward = torch.zeros(args.num_actors)
done = torch.zeros(args.num_actors, dtype=torch.bool)
prev_action = torch.zeros(args.num_actors, dtype=torch.long)
agent_state = online_net.initial_state(args.num_actors)
history = []  # per step: (prev_action, reward, done, obs, action, q, state before the step)


def act(steps):
    """Run the actors for `steps` steps and store every completed unroll."""
    global obs, reward, done, prev_action, agent_state
    for _ in range(steps):
        with torch.no_grad():
            q, new_state = online_net(prev_action[None], reward[None], done[None], obs[None],
                                      agent_state)
        greedy = q[0].argmax(-1)
        explore = torch.rand(args.num_actors) < epsilons
        action = torch.where(explore, torch.randint(NUM_ACTIONS, (args.num_actors,)), greedy)
        history.append((prev_action, reward, done, obs, action, q[0], agent_state))
        agent_state = new_state
        prev_action = action
        reward, done, obs = envs.step(action)
        if len(history) == seq_len:
            add_unrolls()
            del history[:args.unroll_length]


def add_unrolls():
    fields = [torch.stack([h[i] for h in history], 0) for i in range(6)]
    h0, c0 = history[0][6]
    suffix = slice(args.burn_in, None)
    with torch.no_grad():
        _, prio = loss_and_priorities(fields[5][suffix], fields[5][suffix], fields[1][suffix],
                                      fields[2][suffix], fields[4][suffix])
    for b in range(args.num_actors):
        replay.append({"prev_action": fields[0][:, b], "reward": fields[1][:, b],
                       "done": fields[2][:, b], "obs": fields[3][:, b],
                       "action": fields[4][:, b], "state": (h0[b], c0[b])})
        priorities.append(prio[b].item())
    while len(replay) > args.replay_size:
        replay.pop(0)
        priorities.pop(0)


def sample():
    p = torch.tensor(priorities) ** args.priority_exponent
    probs = p / p.sum()
    idx = torch.multinomial(probs, args.batch_size, replacement=True)
    weights = (len(replay) * probs[idx]) ** (-args.is_exponent)
    weights = weights / weights.max()
    items = [replay[i] for i in idx.tolist()]
    batch = {k: torch.stack([it[k] for it in items], 1) for k in items[0] if k != "state"}
    state = (torch.stack([it["state"][0] for it in items], 0),
             torch.stack([it["state"][1] for it in items], 0))
    return idx, weights, batch, state


while len(replay) < args.replay_min:
    act(args.unroll_length)
print(f"replay warm: {len(replay)} unrolls")

for step in range(args.steps):
    if step % args.target_every == 0:
        target_net.load_state_dict(online_net.state_dict())
    act(args.unroll_length)
    idx, weights, batch, stored_state = sample()
    pre = {k: v[:args.burn_in] for k, v in batch.items()}
    suf = {k: v[args.burn_in:] for k, v in batch.items()}

    _, online_state = online_net(pre["prev_action"], pre["reward"], pre["done"], pre["obs"],
                                 stored_state)
    online_state = (online_state[0].detach(), online_state[1].detach())
    with torch.no_grad():
        _, target_state = target_net(pre["prev_action"], pre["reward"], pre["done"],
                                     pre["obs"], stored_state)
        q_target, _ = target_net(suf["prev_action"], suf["reward"], suf["done"], suf["obs"],
                                 target_state)
    q_online, _ = online_net(suf["prev_action"], suf["reward"], suf["done"], suf["obs"],
                             online_state)
    loss, new_prio = loss_and_priorities(q_online, q_target, suf["reward"], suf["done"],
                                         suf["action"])
    loss = (loss * weights).mean()
    optimizer.zero_grad()
    loss.backward()
    grad_norm = nn.utils.clip_grad_norm_(online_net.parameters(), args.clip_norm)
    optimizer.step()
    for i, pr in zip(idx.tolist(), new_prio.tolist()):
        priorities[i] = pr
    if step % 15 == 0 or step == args.steps - 1:
        mean_r = torch.stack([it["reward"] for it in replay]).sum(1).mean().item()
        print(f"step {step:3d} loss {loss.item():.4f} grad_norm {grad_norm.item():.3f} "
              f"replay reward/unroll {mean_r:.3f}")

if args.out:
    torch.save({"online_net": online_net.state_dict(), "target_net": target_net.state_dict()},
               args.out)
