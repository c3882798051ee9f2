"""Value-Decomposition Networks (VDN) for a small cooperative multi-agent game, written after
Sunehag, Lever, Gruslys, Czarnecki, Zambaldi, Jaderberg, Lanctot, Sonnerat, Leibo, Tuyls and
Graepel, "Value-Decomposition Networks For Cooperative Multi-Agent Learning Based On Team
Reward" (AAMAS 2018, arXiv:1706.05296): every agent has a Q-function over its own
action-observation history, the joint action-value is their sum, Q_tot = sum_a Q_a(h_a, u_a),
and the sum is trained end to end with one-step Q-learning on the team reward, so each agent's
network is learned only through the team's TD error. With the code of oxwhirl/pymarl
(https://github.com/oxwhirl/pymarl, src/learners/q_learner.py QLearner and
src/modules/mixers/vdn.py VDNMixer), whose steps this script follows: one recurrent agent
network (fc, GRUCell, fc) shared by all agents, its input the observation with the last action
and a one-hot agent id; QLearner.train unrolls the agent over the whole episode batch from a
zero hidden state, gathers the Q-values of the taken actions, unrolls a deep-copied target
agent the same way, masks unavailable actions, picks the next actions by double Q-learning
(argmax of a detached clone of the online Q-values, evaluated by the target agent), sums over
agents with VDNMixer (and the target mixer, a deep copy; VDN has no parameters), forms the
targets r + gamma * (1 - terminated) * Q_tot' and the TD error against targets.detach(),
masks padded steps, and takes the masked mean squared error; RMSprop over the agent's (and
mixer's) parameters, gradient-norm clipping, and _update_targets copies the agent's weights into
the target agent every target_update_interval episodes. Episodes come from epsilon-greedy
acting with the online agent into an episode replay buffer. The game: each agent sees a noisy
cue of its own hidden goal; the team gets one point per agent whose action matches its goal,
goals shift with the actions, one random non-goal action per agent is unavailable each step,
and an episode ends early when every agent matches.
As published: clean."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iterations", type=int, default=30)
parser.add_argument("--batch-size-run", type=int, default=8, help="episodes per iteration")
parser.add_argument("--batch-size", type=int, default=16, help="episodes per training batch")
parser.add_argument("--buffer-size", type=int, default=200)
parser.add_argument("--gamma", type=float, default=0.99)
parser.add_argument("--lr", type=float, default=5e-3)
parser.add_argument("--grad-norm-clip", type=float, default=10.0)
parser.add_argument("--target-update-interval", type=int, default=40, help="in episodes")
parser.add_argument("--out", default=None, help="where to save the agent and the target agent")
args = parser.parse_args()
torch.manual_seed(args.seed)
torch.set_num_threads(1)

n_agents, n_actions, episode_limit, hidden = 3, 4, 6, 32
input_dim = n_actions + n_actions + n_agents  # goal cue, last action, agent id


class RNNAgent(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(input_dim, hidden)
        self.rnn = nn.GRUCell(hidden, hidden)
        self.fc2 = nn.Linear(hidden, n_actions)

    def init_hidden(self, n):
        return self.fc1.weight.new_zeros(n, hidden)

    def forward(self, inputs, h):
        h = self.rnn(F.relu(self.fc1(inputs)), h)
        return self.fc2(h), h


def vdn_mixer(agent_qs):
    """VDNMixer: the joint value is the sum of the agent values (B x T x n_agents -> B x T x 1)"""
    return agent_qs.sum(dim=2, keepdim=True)


def build_inputs(cue, last_action):
    agent_ids = torch.eye(n_agents).expand(cue.shape[0], n_agents, n_agents)
    return torch.cat([cue, F.one_hot(last_action, n_actions).float(), agent_ids], -1)


def unroll(net, inputs):
    """Q-values of every agent at every step of the batch (B x T x n_agents x n_actions)."""
    b, t_len = inputs.shape[:2]
    h = net.init_hidden(b * n_agents)
    outs = []
    for t in range(t_len):
        q, h = net(inputs[:, t].reshape(b * n_agents, -1), h)
        outs.append(q.view(b, n_agents, n_actions))
    return torch.stack(outs, dim=1)


def available_actions(goals):
    """All actions but one random non-goal action per agent (B x n_agents x n_actions)."""
    shift = torch.randint(1, n_actions, goals.shape)
    return 1 - F.one_hot((goals + shift) % n_actions, n_actions)


@torch.no_grad()
def run_episodes(net, n, epsilon):
    """Epsilon-greedy episodes in the layout of pymarl's EpisodeBatch (max_seq_length = T + 1)."""
    t_len = episode_limit + 1
    inputs = torch.zeros(n, t_len, n_agents, input_dim)
    actions = torch.zeros(n, t_len, n_agents, dtype=torch.long)
    avail = torch.ones(n, t_len, n_agents, n_actions, dtype=torch.long)
    reward = torch.zeros(n, t_len, 1)
    terminated = torch.zeros(n, t_len, 1)
    filled = torch.zeros(n, t_len, 1)
    goals = torch.randint(0, n_actions, (n, n_agents))
    last_action = torch.zeros(n, n_agents, dtype=torch.long)
    alive = torch.ones(n, dtype=torch.bool)
    h = net.init_hidden(n * n_agents)
    for t in range(t_len):
        cue = F.one_hot(goals, n_actions).float() + 0.3 * torch.randn(n, n_agents, n_actions)
        inputs[:, t] = build_inputs(cue, last_action)
        avail[:, t] = available_actions(goals)
        filled[:, t, 0] = alive.float()
        q, h = net(inputs[:, t].reshape(n * n_agents, -1), h)
        q = q.view(n, n_agents, n_actions).masked_fill(avail[:, t] == 0, -float("inf"))
        uniform = avail[:, t].reshape(-1, n_actions).float()
        random_actions = torch.multinomial(uniform, 1).view(n, n_agents)
        explore = torch.rand(n, n_agents) < epsilon
        chosen = torch.where(explore, random_actions, q.argmax(-1))
        if t == episode_limit:
            break  # the last step only holds the observation used for bootstrapping
        actions[:, t] = chosen
        matches = (chosen == goals).float()
        reward[:, t, 0] = matches.sum(1) * alive.float()
        done = (matches.sum(1) == n_agents) & alive
        terminated[:, t, 0] = done.float()
        alive = alive & ~done
        goals = (goals + chosen + 1) % n_actions
        last_action = chosen
    return dict(inputs=inputs, actions=actions, avail=avail, reward=reward,
                terminated=terminated, filled=filled)


agent = RNNAgent()
target_agent = copy.deepcopy(agent)
params = list(agent.parameters())  # VDNMixer has no parameters to add
optimiser = torch.optim.RMSprop(params, lr=args.lr, alpha=0.99, eps=1e-5)

buffer = None
episodes_seen, last_target_update_episode = 0, 0
for iteration in range(args.iterations):
    epsilon = max(0.05, 1.0 - iteration / 20)
    new = run_episodes(agent, args.batch_size_run, epsilon)
    if buffer is None:
        buffer = new
    else:
        buffer = {k: torch.cat([buffer[k], new[k]])[-args.buffer_size:] for k in buffer}
    episodes_seen += args.batch_size_run
    if buffer["inputs"].shape[0] < args.batch_size:
        continue
    idx = torch.randperm(buffer["inputs"].shape[0])[:args.batch_size]
    batch = {k: v[idx] for k, v in buffer.items()}

    rewards = batch["reward"][:, :-1]
    actions = batch["actions"][:, :-1]
    terminated = batch["terminated"][:, :-1]
    mask = batch["filled"][:, :-1].clone()
    mask[:, 1:] = mask[:, 1:] * (1 - terminated[:, :-1])
    avail_actions = batch["avail"]

    mac_out = unroll(agent, batch["inputs"])
    chosen_action_qvals = torch.gather(mac_out[:, :-1], 3, actions.unsqueeze(3)).squeeze(3)

    target_mac_out = unroll(target_agent, batch["inputs"])[:, 1:]
    target_mac_out[avail_actions[:, 1:] == 0] = -9999999

    mac_out_detach = mac_out.clone().detach()
    mac_out_detach[avail_actions == 0] = -9999999
    cur_max_actions = mac_out_detach[:, 1:].max(dim=3, keepdim=True)[1]
    target_max_qvals = torch.gather(target_mac_out, 3, cur_max_actions).squeeze(3)

    chosen_action_qvals = vdn_mixer(chosen_action_qvals)
    target_max_qvals = vdn_mixer(target_max_qvals)

    targets = rewards + args.gamma * (1 - terminated) * target_max_qvals
    td_error = chosen_action_qvals - targets.detach()
    masked_td_error = td_error * mask
    loss = (masked_td_error ** 2).sum() / mask.sum()

    optimiser.zero_grad()
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(params, args.grad_norm_clip)
    optimiser.step()

    if (episodes_seen - last_target_update_episode) / args.target_update_interval >= 1.0:
        target_agent.load_state_dict(agent.state_dict())
        last_target_update_episode = episodes_seen
    if iteration % 10 == 0:
        ep_return = new["reward"].sum((1, 2)).mean().item()
        print(f"iter {iteration} loss {loss.item():.4f} return {ep_return:.2f} eps {epsilon:.2f}")

if args.out:
    torch.save({"agent": agent.state_dict(), "target_agent": target_agent.state_dict()}, args.out)
