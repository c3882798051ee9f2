"""COMA, counterfactual multi-agent policy gradients, for three cooperating agents in a small
partially observed game, written after Foerster, Farquhar, Afouras, Nardelli and Whiteson,
"Counterfactual Multi-Agent Policy Gradients" (AAAI 2018, arXiv:1705.08926): decentralised
actors (one network shared by the agents, fed the agent's own observation, its last action and
its id) are trained with a centralised critic that sees the global state and the other agents'
actions and outputs Q(s, (u^-a, u'^a)) for every action u'^a of agent a; the advantage of agent
a is its counterfactual one, A^a = Q(s, u) - sum_u' pi^a(u' | tau^a) Q(s, (u^-a, u')), the
value of the joint action minus the expectation over agent a's own actions with the others'
kept fixed, and the actor loss is -A^a log pi^a(u^a | tau^a) with A^a held constant; the critic
regresses on TD(lambda) targets built from a target critic that is copied from the critic every
so many critic updates. With the COMA of the WhiRL group's code, oxwhirl/pymarl
(https://github.com/oxwhirl/pymarl: src/learners/coma_learner.py COMALearner.__init__ makes
target_critic = copy.deepcopy(critic) and separate RMSprop optimisers over the agents' and the
critic's parameters; _train_critic computes the target critic's Q-values of the taken actions,
turns them into TD(lambda) targets with src/utils/rl_utils.py build_td_lambda_targets, then
walks the time steps backwards, regressing the critic's Q of the taken action at step t on the
detached target with its own zero_grad / backward / clip / step each time and collecting the
Q-values; train then takes the agents' policies (src/controllers/basic_controller.py
BasicMAC.forward: softmax of the logits with an epsilon floor), the baseline
(pi * q_vals).sum(-1).detach(), advantages = (q_taken - baseline).detach() and the masked mean
of -(advantages * log pi_taken), zeroes, backpropagates, clips and steps the agents' optimiser,
and calls _update_targets, target_critic.load_state_dict(critic.state_dict()), once
target_update_interval critic steps have passed; src/modules/critics/coma.py COMACritic builds
its input from the state, the agent's observation, the joint action with the agent's own one
masked out, the last joint action and the agent's id), whose steps this script follows; here the
Q-values are stored detached as the critic walks the time steps, the advantages are detached
once, and the actors are MLPs in place of pymarl's GRU agents. The game: every step, the team is
paid for each agent that picks the action a hidden linear rule of the global state prefers, plus
a bonus when all agents agree; each agent sees only part of the state, and the joint action
moves the next state.
As published: clean."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iterations", type=int, default=30, help="batches of episodes trained on")
parser.add_argument("--batch-size", type=int, default=8, help="episodes per batch")
parser.add_argument("--episode-length", type=int, default=6)
parser.add_argument("--lr", type=float, default=5e-3)
parser.add_argument("--critic-lr", type=float, default=5e-3)
parser.add_argument("--gamma", type=float, default=0.99)
parser.add_argument("--td-lambda", type=float, default=0.8)
parser.add_argument("--target-update-interval", type=int, default=50, help="in critic steps")
parser.add_argument("--grad-norm-clip", type=float, default=10.0)
parser.add_argument("--out", default=None, help="where to save the agents and the critics")
args = parser.parse_args()
torch.manual_seed(args.seed)
torch.set_num_threads(1)  # tiny networks: intra-op threads only add overhead

n_agents, n_actions, state_dim, hidden = 3, 4, 6, 64
T, B = args.episode_length, args.batch_size
obs_slices = [slice(0, 3), slice(2, 5), slice(3, 6)]
obs_dim = 3 + 1
goal_readout = torch.randn(state_dim, n_actions)
action_effect = torch.randn(n_actions, state_dim) * 0.5
agent_ids = torch.eye(n_agents)


def observe(state, t):
    """Each agent's view: its slice of the state, plus the time left."""
    time_left = torch.full((state.shape[0], 1), 1.0 - t / T)
    return torch.stack([torch.cat([state[:, s], time_left], 1) for s in obs_slices], 1)


def env_step(state, actions):
    goal = (state @ goal_readout).argmax(1, keepdim=True)
    on_goal = (actions == goal).float().mean(1)
    agree = (actions == actions[:, :1]).all(1).float()
    reward = on_goal + 0.5 * agree
    histogram = F.one_hot(actions, n_actions).float().mean(1)
    next_state = 0.7 * state + 0.5 * torch.randn_like(state) + histogram @ action_effect
    return next_state, reward


class Agent(nn.Module):
    """Shared actor: own observation, own last action and agent id -> action logits."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(obs_dim + n_actions + n_agents, hidden), nn.ReLU(),
                                 nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, n_actions))

    def forward(self, obs, last_actions_onehot, epsilon):
        ids = agent_ids.expand(*obs.shape[:-2], -1, -1)
        logits = self.net(torch.cat([obs, last_actions_onehot, ids], -1))
        probs = F.softmax(logits, -1)
        return (1 - epsilon) * probs + epsilon / n_actions


class COMACritic(nn.Module):
    """Q(s, (u^-a, .)) for every agent a: state, obs, others' actions, last joint action, id."""

    def __init__(self):
        super().__init__()
        in_dim = state_dim + obs_dim + 2 * n_agents * n_actions + n_agents
        self.net = nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                                 nn.ReLU(), nn.Linear(hidden, n_actions))

    def forward(self, state, obs, actions_onehot, last_actions_onehot):
        lead = state.shape[:-1]
        joint = actions_onehot.reshape(*lead, 1, n_agents * n_actions).expand(*lead, n_agents, -1)
        others = joint * (1 - agent_ids).repeat_interleave(n_actions, 1)
        last_joint = last_actions_onehot.reshape(*lead, 1, -1).expand(*lead, n_agents, -1)
        inputs = torch.cat([state.unsqueeze(-2).expand(*lead, n_agents, -1), obs, others,
                            last_joint, agent_ids.expand(*lead, -1, -1)], -1)
        return self.net(inputs)


def build_td_lambda_targets(rewards, target_qs):
    """Forward-view TD(lambda) returns of fixed-length episodes that terminate at step T - 1."""
    ret = torch.zeros_like(target_qs)
    ret[:, -1] = rewards[:, -1].unsqueeze(1)
    for t in range(T - 2, -1, -1):
        ret[:, t] = (args.td_lambda * args.gamma * ret[:, t + 1]
                     + rewards[:, t].unsqueeze(1) + (1 - args.td_lambda) * args.gamma * target_qs[:, t + 1])
    return ret


agent = Agent()
critic = COMACritic()
target_critic = copy.deepcopy(critic)
agent_optimiser = torch.optim.RMSprop(agent.parameters(), lr=args.lr, alpha=0.99, eps=1e-5)
critic_optimiser = torch.optim.RMSprop(critic.parameters(), lr=args.critic_lr, alpha=0.99, eps=1e-5)
critic_training_steps, last_target_update_step = 0, 0

for it in range(args.iterations):
    epsilon = max(0.05, 0.5 - 0.45 * it / (0.75 * args.iterations))

    # a batch of episodes with the decentralised actors (multinomial action selection)
    states, observations, actions, rewards = [], [], [], []
    state = torch.randn(B, state_dim)
    last = torch.zeros(B, n_agents, n_actions)
    with torch.no_grad():
        for t in range(T):
            obs = observe(state, t)
            u = torch.multinomial(agent(obs, last, epsilon).reshape(-1, n_actions), 1).reshape(B, n_agents)
            next_state, r = env_step(state, u)
            states.append(state), observations.append(obs), actions.append(u), rewards.append(r)
            state, last = next_state, F.one_hot(u, n_actions).float()
    states, observations = torch.stack(states, 1), torch.stack(observations, 1)
    actions, rewards = torch.stack(actions, 1), torch.stack(rewards, 1)
    actions_onehot = F.one_hot(actions, n_actions).float()
    last_onehot = torch.cat([torch.zeros_like(actions_onehot[:, :1]), actions_onehot[:, :-1]], 1)

    # critic: TD(lambda) targets from the target critic, one update per step, walking backwards
    with torch.no_grad():
        target_q_vals = target_critic(states, observations, actions_onehot, last_onehot)
        targets_taken = target_q_vals.gather(3, actions.unsqueeze(3)).squeeze(3)
        targets = build_td_lambda_targets(rewards, targets_taken)
    q_vals = torch.zeros(B, T, n_agents, n_actions)
    for t in reversed(range(T)):
        q_t = critic(states[:, t], observations[:, t], actions_onehot[:, t], last_onehot[:, t])
        q_vals[:, t] = q_t.detach()
        q_taken = q_t.gather(2, actions[:, t].unsqueeze(2)).squeeze(2)
        critic_loss = (q_taken - targets[:, t]).pow(2).mean()
        critic_optimiser.zero_grad()
        critic_loss.backward()
        nn.utils.clip_grad_norm_(critic.parameters(), args.grad_norm_clip)
        critic_optimiser.step()
        critic_training_steps += 1

    # actors: counterfactual advantage against the baseline sum_u' pi(u') Q(s, (u^-a, u'))
    pi = agent(observations, last_onehot, epsilon)
    baseline = (pi * q_vals).sum(-1)
    q_taken = q_vals.gather(3, actions.unsqueeze(3)).squeeze(3)
    log_pi_taken = torch.log(pi.gather(3, actions.unsqueeze(3)).squeeze(3))
    advantages = (q_taken - baseline).detach()
    coma_loss = -(advantages * log_pi_taken).mean()
    agent_optimiser.zero_grad()
    coma_loss.backward()
    nn.utils.clip_grad_norm_(agent.parameters(), args.grad_norm_clip)
    agent_optimiser.step()

    if critic_training_steps - last_target_update_step >= args.target_update_interval:
        target_critic.load_state_dict(critic.state_dict())
        last_target_update_step = critic_training_steps
    if it % 10 == 0:
        print(f"iteration {it} return {rewards.sum(1).mean().item():.3f} "
              f"critic loss {critic_loss.item():.4f} coma loss {coma_loss.item():.4f}")

if args.out:
    torch.save({"agent": agent.state_dict(), "critic": critic.state_dict(),
                "target_critic": target_critic.state_dict()}, args.out)
