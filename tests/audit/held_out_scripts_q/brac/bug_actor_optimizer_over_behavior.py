"""Behavior Regularized Actor Critic (BRAC, primal form with a KL value penalty) for offline RL at a
tiny size, written after Wu, Tucker and Nachum, "Behavior Regularized Offline Reinforcement
Learning" (arXiv:1911.11361, 2019), sections 3 and 4: first a behaviour policy is fitted to the data
set by maximum likelihood, then, with that behaviour policy frozen, an actor-critic is trained in
which a sampled estimate of KL(pi(.|s) || pi_b(.|s)) = E_{a ~ pi}[log pi(a|s) - log pi_b(a|s)] is
subtracted, times alpha, from the next state's value in the TD target (value penalty) and added,
times alpha, to the actor's loss (policy regularisation), the actor maximising the minimum of a pair
of Q functions only after a warm start in which it minimises the divergence alone. With
google-research/google-research (https://github.com/google-research/google-research,
behavior_regularized_offline_rl/brac/: bc_agent.py Agent._build_p_loss: the behaviour network
trained on minus the log density of the data actions, clipped away from the action bounds, plus an
entropy term with a learnt weight that is left out here; brac_primal_agent.py Agent: the behaviour
network b_net restored from that checkpoint and never among the trained variables, _build_q_loss:
the next action sampled from the current policy, the minimum over the target Q networks, less alpha
times the divergence estimate at the next state, the whole target under tf.stop_gradient, summed
squared errors over the Q networks; _build_p_loss: alpha times the divergence estimate minus the
minimum Q of the policy's sampled action, the Q term switched on after warm_start steps; _optimize_q
and _optimize_p: each GradientTape differentiates only the Q variables or only the policy variables;
divergences.py KL._primal_estimate_with_densities and FDivergence.primal_estimate: n policy samples,
the behaviour log density taken on those samples, clipped by CLIP_EPS, and the mean of log pi - log
pi_b over the samples, so the gradient reaches the policy through the samples too; networks.py
ActorNetwork: a Gaussian pushed through a Tanh bijector, whose log density holds the squashing's
correction). Here the behaviour policy is frozen with requires_grad_(False) before the second phase,
and the target networks follow by Polyak averaging at the start of each step as in the reference.
The data: a point on the plane logged by a noisy policy that heads for a goal with a systematic
bias, made in the script.
Bug: the second phase's actor optimizer is built over the behaviour policy, actor_optimizer =
torch.optim.Adam(behavior.parameters(), ...), the first phase's optimizer line carried over with
only its name changed (google-research's brac_primal_agent.py Agent._optimize_p applies the
policy gradients to self._p_vars, the variables of p_net, while b_net, restored from the
behaviour-cloning checkpoint, is never trained): the behaviour policy is frozen, so its
parameters never get a gradient and the step does nothing, while the actor's parameters, which
do get the KL and Q gradients, are in no optimizer; the actor stays at its random
initialisation for the whole second phase and the critics evaluate that policy instead of an
improving, behaviour-regularised one."""

import argparse
import copy

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--bc-steps", type=int, default=40, help="phase 1: behaviour cloning steps")
parser.add_argument("--steps", type=int, default=40, help="phase 2: actor-critic steps")
parser.add_argument("--warm-start", type=int, default=10, help="phase-2 steps without the Q term")
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--n-div-samples", type=int, default=4)
parser.add_argument("--alpha", type=float, default=1.0)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--discount", type=float, default=0.99)
parser.add_argument("--tau", type=float, default=0.005)
parser.add_argument("--out", default=None, help="where to save the trained networks")
args = parser.parse_args()
torch.manual_seed(args.seed)

state_dim, action_dim, hidden, clip_eps = 2, 2, 32, 1e-3

# offline data: a point on the plane stepped by a noisy behaviour policy with a biased heading
n_data, goal = 2000, torch.tensor([0.8, 0.8])
states = torch.rand(n_data, state_dim) * 2 - 1
heading = (goal - states) / (goal - states).norm(dim=1, keepdim=True).clamp(min=0.1)
actions = torch.tanh(0.8 * heading + torch.tensor([0.4, -0.4]) + 0.4 * torch.randn(n_data, 2))
next_states = (states + 0.2 * actions).clamp(-1.5, 1.5)
rewards = -(next_states - goal).norm(dim=1, keepdim=True)
discounts = (next_states - goal).norm(dim=1, keepdim=True).gt(0.1).float()


class TanhGaussianPolicy(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(state_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                                  nn.ReLU())
        self.mean, self.log_std = nn.Linear(hidden, action_dim), nn.Linear(hidden, action_dim)

    def dist(self, state):
        h = self.body(state)
        return torch.distributions.Normal(self.mean(h), self.log_std(h).clamp(-5.0, 2.0).exp())

    def sample_n(self, state, n):
        """n reparameterised actions per state and their log densities: n x B x A and n x B."""
        dist = self.dist(state)
        pre = dist.rsample((n,))
        action = torch.tanh(pre)
        return action, dist.log_prob(pre).sum(-1) - torch.log(1 - action.pow(2) + 1e-6).sum(-1)

    def log_density(self, state, action):
        pre = torch.atanh(action)
        return (self.dist(state).log_prob(pre).sum(-1)
                - torch.log(1 - action.pow(2) + 1e-6).sum(-1))


def q_net():
    return nn.Sequential(nn.Linear(state_dim + action_dim, hidden), nn.ReLU(),
                         nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))


def kl_estimate(state):
    """Sampled KL(pi || pi_b) per state: mean over policy samples of log pi - log pi_b."""
    a_p, log_p = actor.sample_n(state, args.n_div_samples)
    log_b = behavior.log_density(state, a_p.clamp(-1 + clip_eps, 1 - clip_eps))
    return (log_p - log_b).mean(0)


# phase 1: the behaviour policy by maximum likelihood on the data actions
behavior = TanhGaussianPolicy()
behavior_optimizer = torch.optim.Adam(behavior.parameters(), lr=args.lr)
for step in range(args.bc_steps):
    idx = torch.randint(0, n_data, (args.batch_size,))
    data_action = actions[idx].clamp(-1 + clip_eps, 1 - clip_eps)
    bc_loss = -behavior.log_density(states[idx], data_action).mean()
    behavior_optimizer.zero_grad()
    bc_loss.backward()
    behavior_optimizer.step()
    if step % 10 == 0:
        print(f"bc step {step} nll {bc_loss.item():.4f}")
behavior.requires_grad_(False)

# phase 2: actor-critic with the KL value penalty and policy regularisation
actor = TanhGaussianPolicy()
actor_optimizer = torch.optim.Adam(behavior.parameters(), lr=args.lr)
critics = nn.ModuleList([q_net(), q_net()])
critic_targets = copy.deepcopy(critics)
critic_optimizer = torch.optim.Adam(critics.parameters(), lr=args.lr)

for step in range(args.steps):
    idx = torch.randint(0, n_data, (args.batch_size,))
    state, action, next_state = states[idx], actions[idx], next_states[idx]
    reward, discount = rewards[idx], discounts[idx]

    with torch.no_grad():
        for p, tp in zip(critics.parameters(), critic_targets.parameters()):
            tp.mul_(1 - args.tau).add_(args.tau * p)

    # critics: the target is penalised by alpha times the divergence at the next state
    with torch.no_grad():
        next_action, _ = actor.sample_n(next_state, 1)
        next_sa = torch.cat([next_state, next_action[0]], 1)
        next_q = torch.min(critic_targets[0](next_sa), critic_targets[1](next_sa))
        next_v = next_q - args.alpha * kl_estimate(next_state).unsqueeze(1)
        target_q = reward + discount * args.discount * next_v
    sa = torch.cat([state, action], 1)
    critic_loss = sum((q(sa) - target_q).pow(2).mean() for q in critics)
    critic_optimizer.zero_grad()
    critic_loss.backward()
    critic_optimizer.step()

    # actor: the divergence, and after the warm start the ensemble minimum of its own action
    pi_action, _ = actor.sample_n(state, 1)
    pi_sa = torch.cat([state, pi_action[0]], 1)
    q_pi = torch.min(critics[0](pi_sa), critics[1](pi_sa)).squeeze(1)
    kl = kl_estimate(state)
    q_start = float(step >= args.warm_start)
    actor_loss = (args.alpha * kl - q_start * q_pi).mean()
    actor_optimizer.zero_grad()
    actor_loss.backward()
    actor_optimizer.step()
    if step % 10 == 0:
        print(f"step {step} critic {critic_loss.item():.4f} actor {actor_loss.item():.4f} "
              f"kl {kl.mean().item():.4f}")

if args.out:
    torch.save({**{f"behavior.{k}": v for k, v in behavior.state_dict().items()},
                **{f"actor.{k}": v for k, v in actor.state_dict().items()},
                **{f"critics.{k}": v for k, v in critics.state_dict().items()},
                **{f"critic_targets.{k}": v for k, v in critic_targets.state_dict().items()}},
               args.out)
