"""MADDPG at a tiny size, written after Lowe, Wu, Tamar, Harb, Abbeel and Mordatch, "Multi-Agent
Actor-Critic for Mixed Cooperative-Competitive Environments" (NeurIPS 2017, arXiv:1706.02275),
section 4.2 and algorithm 1, with openai/maddpg (https://github.com/openai/maddpg,
maddpg/trainer/maddpg.py p_train, q_train, make_update_exp, MADDPGAgentTrainer.update) and the
PyTorch layout of shariqiqbal2810/maddpg-pytorch (https://github.com/shariqiqbal2810/maddpg-pytorch,
utils/agents.py DDPGAgent, algorithms/maddpg.py MADDPG.update and update_all_targets,
utils/misc.py soft_update and hard_update). Each agent has a deterministic tanh policy of its own
observation and a centralised critic Q_i(x, a_1, ..., a_N) of every observation and action, each
with a target network (a deep copy). For each agent in turn the critic is trained by TD against
r_i + gamma * Q'_i(x', mu'_1(o'_1), ..., mu'_N(o'_N)), computed under torch.no_grad() with every
agent's target policy, and then the policy by -Q_i(x, a_1, ..., mu_i(o_i), ..., a_N), the other
agents' actions those of the replay buffer as in the paper's gradient, plus a small penalty on the
policy's output; each network has its own Adam, cleared before its backward, and its gradient norm
is clipped at 0.5. After all the agents are updated every target network is moved towards its
online network by Polyak averaging. Transitions of a small two-agent cooperative navigation task
(each agent sees its own position and its landmark, and both share the reward of the summed
distances), with a random behaviour policy, made in the script. Injected bug: the critic's
optimizer is never cleared (no agent.critic_optimizer.zero_grad()), so from each agent's second
update its critic's Adam reads the sum of every TD gradient so far and of the gradients that each
policy loss, backpropagated through the critic to the action, has left on the critic's weights."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--gamma", type=float, default=0.95)
parser.add_argument("--tau", type=float, default=0.01)
parser.add_argument("--lr", type=float, default=1e-2)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_agents, obs_dim, action_dim, hidden_dim, n_transitions = 2, 4, 2, 32, 512


def make_dataset(n):
    """Each agent moves by its action towards its own landmark; the reward is shared."""
    positions = 2 * torch.rand(n, n_agents, 2) - 1
    landmarks = 2 * torch.rand(n, n_agents, 2) - 1
    actions = 2 * torch.rand(n, n_agents, action_dim) - 1
    next_positions = (positions + 0.3 * actions).clamp(-1, 1)
    distances = (next_positions - landmarks).norm(dim=2)
    rewards = -distances.sum(dim=1, keepdim=True).expand(n, n_agents)
    dones = torch.zeros(n, 1)
    return (torch.cat([positions, landmarks], 2), actions, rewards,
            torch.cat([next_positions, landmarks], 2), dones)


def mlp(in_dim, out_dim):
    return nn.Sequential(nn.Linear(in_dim, hidden_dim), nn.ReLU(),
                         nn.Linear(hidden_dim, hidden_dim), nn.ReLU(),
                         nn.Linear(hidden_dim, out_dim))


class DDPGAgent:
    def __init__(self):
        self.policy = mlp(obs_dim, action_dim)
        self.critic = mlp(n_agents * (obs_dim + action_dim), 1)
        self.target_policy = copy.deepcopy(self.policy)
        self.target_critic = copy.deepcopy(self.critic)
        self.policy_optimizer = torch.optim.Adam(self.policy.parameters(), lr=args.lr)
        self.critic_optimizer = torch.optim.Adam(self.critic.parameters(), lr=args.lr)

    def act(self, obs):
        return torch.tanh(self.policy(obs))

    def target_act(self, obs):
        return torch.tanh(self.target_policy(obs))


def critic_input(obs, actions):
    """obs (batch, agents, obs_dim), actions (batch, agents, action_dim) -> the critic's input."""
    return torch.cat([obs.flatten(1), actions.flatten(1)], dim=1)


def soft_update(target, source, tau):
    for target_param, param in zip(target.parameters(), source.parameters()):
        target_param.data.copy_(target_param.data * (1.0 - tau) + param.data * tau)


dataset = make_dataset(n_transitions)
agents = [DDPGAgent() for _ in range(n_agents)]
for step in range(args.steps):
    for agent_i, agent in enumerate(agents):
        idx = torch.randint(0, n_transitions, (args.batch_size,))
        obs, actions, rewards, next_obs, dones = (t[idx] for t in dataset)
        # centralised critic: TD against the target critic at the target policies' actions
        with torch.no_grad():
            next_actions = torch.stack([a.target_act(next_obs[:, j])
                                        for j, a in enumerate(agents)], dim=1)
            target_value = (rewards[:, agent_i:agent_i + 1] + args.gamma * (1 - dones)
                            * agent.target_critic(critic_input(next_obs, next_actions)))
        actual_value = agent.critic(critic_input(obs, actions))
        critic_loss = F.mse_loss(actual_value, target_value)
        critic_loss.backward()
        nn.utils.clip_grad_norm_(agent.critic.parameters(), 0.5)
        agent.critic_optimizer.step()
        # policy: the critic at its own action, the others' actions from the buffer
        policy_out = agent.policy(obs[:, agent_i])
        own_action = torch.tanh(policy_out)
        joint_actions = torch.cat([actions[:, :agent_i], own_action.unsqueeze(1),
                                   actions[:, agent_i + 1:]], dim=1)
        policy_loss = -agent.critic(critic_input(obs, joint_actions)).mean()
        policy_loss = policy_loss + 1e-3 * (policy_out ** 2).mean()
        agent.policy_optimizer.zero_grad()
        policy_loss.backward()
        nn.utils.clip_grad_norm_(agent.policy.parameters(), 0.5)
        agent.policy_optimizer.step()
        print(f"step {step} agent {agent_i} critic {critic_loss.item():.4f} "
              f"policy {policy_loss.item():.4f}")
    for agent in agents:
        soft_update(agent.target_critic, agent.critic, args.tau)
        soft_update(agent.target_policy, agent.policy, args.tau)

if args.out:
    weights = {}
    for agent_i, agent in enumerate(agents):
        for name in ("policy", "critic", "target_policy", "target_critic"):
            weights[f"agent_{agent_i}.{name}"] = getattr(agent, name).state_dict()
    torch.save(weights, args.out)
