"""Random network distillation at a tiny size, written after Burda, Edwards, Storkey and Klimov,
"Exploration by Random Network Distillation" (ICLR 2019, arXiv:1810.12894), with
openai/random-network-distillation (https://github.com/openai/random-network-distillation,
policies/cnn_policy_param_matched.py: the predictor regresses the fixed random target's features
under tf.stop_gradient, and the intrinsic reward is computed in the rollout, outside the graph of
the update) and the PyTorch layout of jcwleo/random-network-distillation-pytorch (agents.py
RNDAgent: one Adam over the agent and the predictor; two value heads, the advantages of the
extrinsic and intrinsic returns mixed 2 to 1). The target's features are cut with ``.detach()``
(the target, in the optimizer as in the reference's trainable variables, gets no gradient and never
moves); the intrinsic rewards are computed under torch.no_grad(). A synchronous actor-critic update
stands in for PPO. A chain with a reward at its far end, made in the script. As published: clean."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--updates", type=int, default=10)
parser.add_argument("--envs", type=int, default=16)
parser.add_argument("--horizon", type=int, default=10)
parser.add_argument("--ext-coef", type=float, default=2.0)
parser.add_argument("--int-coef", type=float, default=1.0)
parser.add_argument("--gamma-ext", type=float, default=0.999)
parser.add_argument("--gamma-int", type=float, default=0.99)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_states, n_actions, hidden, feat = 8, 2, 32, 16


class Agent(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(n_states, hidden), nn.ReLU())
        self.actor = nn.Linear(hidden, n_actions)
        self.critic_ext = nn.Linear(hidden, 1)
        self.critic_int = nn.Linear(hidden, 1)

    def forward(self, obs):
        h = self.body(obs)
        return self.actor(h), self.critic_ext(h).squeeze(-1), self.critic_int(h).squeeze(-1)


class RNDModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.predictor = nn.Sequential(nn.Linear(n_states, hidden), nn.ReLU(),
                                       nn.Linear(hidden, feat))
        self.target = nn.Sequential(nn.Linear(n_states, hidden), nn.ReLU(),
                                    nn.Linear(hidden, feat))


def observe(states):
    return F.one_hot(states, n_states).float()


def intrinsic_reward(next_obs):
    with torch.no_grad():
        return (rnd.target(next_obs) - rnd.predictor(next_obs)).pow(2).sum(-1) / 2


def discounted(rewards, gamma):
    returns, running = torch.zeros_like(rewards), torch.zeros_like(rewards[0])
    for t in reversed(range(len(rewards))):
        running = rewards[t] + gamma * running
        returns[t] = running
    return returns


agent, rnd = Agent(), RNDModel()
optimizer = torch.optim.Adam([*agent.parameters(), *rnd.parameters()], lr=3e-3)
for update in range(args.updates):
    states = torch.zeros(args.envs, dtype=torch.long)
    obs, actions, next_obs, ext_rewards, int_rewards = [], [], [], [], []
    for _ in range(args.horizon):
        with torch.no_grad():
            logits, _, _ = agent(observe(states))
        action = torch.distributions.Categorical(logits=logits).sample()
        next_states = (states + 2 * action - 1).clamp(0, n_states - 1)
        obs.append(observe(states))
        actions.append(action)
        next_obs.append(observe(next_states))
        ext_rewards.append((next_states == n_states - 1).float())
        int_rewards.append(intrinsic_reward(next_obs[-1]))
        states = next_states
    obs, actions, next_obs = torch.stack(obs), torch.stack(actions), torch.stack(next_obs)
    ext_returns = discounted(torch.stack(ext_rewards), args.gamma_ext)
    int_returns = discounted(torch.stack(int_rewards), args.gamma_int)

    logits, value_ext, value_int = agent(obs)
    advantages = (args.ext_coef * (ext_returns - value_ext.detach())
                  + args.int_coef * (int_returns - value_int.detach()))
    log_prob = F.log_softmax(logits, -1).gather(-1, actions.unsqueeze(-1)).squeeze(-1)
    entropy = -(F.softmax(logits, -1) * F.log_softmax(logits, -1)).sum(-1).mean()
    actor_loss = -(advantages * log_prob).mean()
    critic_loss = 0.5 * (F.mse_loss(value_ext, ext_returns) + F.mse_loss(value_int, int_returns))
    predict_feature = rnd.predictor(next_obs)
    target_feature = rnd.target(next_obs).detach()
    forward_loss = F.mse_loss(predict_feature, target_feature)
    loss = actor_loss + critic_loss - 0.001 * entropy + forward_loss
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"update {update} extrinsic {torch.stack(ext_rewards).sum().item():.0f} "
          f"intrinsic {int_returns.mean().item():.4f} forward loss {forward_loss.item():.4f}")

if args.out:
    torch.save({"agent": agent.state_dict(), "rnd": rnd.state_dict()}, args.out)
