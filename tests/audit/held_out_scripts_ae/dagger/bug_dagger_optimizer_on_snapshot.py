"""DAgger (dataset aggregation) on a tiny 2-D point-mass reaching task.

Paper: Stephane Ross, Geoffrey J. Gordon and J. Andrew Bagnell, "A Reduction of Imitation
Learning and Structured Prediction to No-Regret Online Learning", AISTATS 2011,
arXiv:1011.0686 (2010).
Reference implementation: HumanCompatibleAI/imitation, src/imitation/algorithms/dagger.py
(LinearBetaSchedule: beta = min(1, max(0, (rampdown_rounds - round) / rampdown_rounds));
InteractiveTrajectoryCollector.step_async: at each step the robot action replaces the expert's
with probability 1 - beta, while the expert action is the one recorded; SimpleDAggerTrainer.train
and DAggerTrainer.extend_and_update: each round collects expert-labelled rollouts, appends them
to all earlier demonstrations and trains the same BC policy and optimizer on the aggregate) and
src/imitation/algorithms/bc.py (BehaviorCloningLossCalculator: loss = -mean log pi(a_expert|s)
- ent_weight * mean entropy; BehaviorCloningTrainer: zero_grad, backward, Adam step over
policy.parameters()), with the Gaussian MLP policy of stable-baselines3 ActorCriticPolicy
(two tanh layers of 32, a linear action_net for the mean and a state-independent learned
log_std parameter).

The environment is a point mass in the plane: state (x, y, vx, vy), action a force in [-2, 2]^2,
v' = 0.9 v + 0.2 a, p' = p + 0.2 v', episodes of 15 steps from a random start. The expert is
the linear controller a* = -1.0 p - 1.2 v. Phase 1 is behaviour cloning: its own loop of
minibatch Adam updates on expert rollouts (round 0, beta = 1). A snapshot bc_policy of the
cloned policy is kept for comparison. Phase 2 runs the DAgger rounds: the learner's mean action
is executed with probability 1 - beta (beta ramps down linearly), every visited state is
labelled with the expert action, the new data are aggregated with the old and a fresh Adam
optimizer over the policy trains on minibatches of the aggregate. Rollouts and evaluation (16
fixed start states, the learner's mean action) run under torch.no_grad().
Bug: the phase-2 DAgger optimizer is built over the BC snapshot bc_policy instead of
the learner, so the DAgger rounds never update the policy that is rolled out and retrained.
"""
import argparse
import copy

import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--hidden", type=int, default=32)
parser.add_argument("--horizon", type=int, default=15)
parser.add_argument("--episodes_per_round", type=int, default=4)
parser.add_argument("--bc_updates", type=int, default=30)
parser.add_argument("--rounds", type=int, default=4)
parser.add_argument("--updates_per_round", type=int, default=10)
parser.add_argument("--rampdown_rounds", type=int, default=4)
parser.add_argument("--batch_size", type=int, default=32)
parser.add_argument("--lr", type=float, default=1e-2)
parser.add_argument("--dagger_lr", type=float, default=5e-3)
parser.add_argument("--ent_weight", type=float, default=1e-3)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)


def env_reset(n, generator=None):
    return torch.cat([torch.rand(n, 2, generator=generator) * 4 - 2, torch.zeros(n, 2)], 1)


def env_step(state, action):
    vel = 0.9 * state[:, 2:] + 0.2 * action.clamp(-2.0, 2.0)
    pos = state[:, :2] + 0.2 * vel
    return torch.cat([pos, vel], 1)


def expert(state):
    return -1.0 * state[:, :2] - 1.2 * state[:, 2:]


class GaussianMLPPolicy(nn.Module):
    def __init__(self, obs_dim, act_dim, hidden, log_std_init=0.0):
        super().__init__()
        self.policy_net = nn.Sequential(nn.Linear(obs_dim, hidden), nn.Tanh(),
                                        nn.Linear(hidden, hidden), nn.Tanh())
        self.action_net = nn.Linear(hidden, act_dim)
        self.log_std = nn.Parameter(torch.full((act_dim,), log_std_init))

    def distribution(self, obs):
        mean = self.action_net(self.policy_net(obs))
        return torch.distributions.Normal(mean, self.log_std.exp().expand_as(mean))

    def evaluate_actions(self, obs, acts):
        dist = self.distribution(obs)
        return dist.log_prob(acts).sum(-1), dist.entropy().sum(-1)

    def predict(self, obs):
        with torch.no_grad():
            return self.action_net(self.policy_net(obs))


def bc_loss(policy, obs, acts, ent_weight):
    log_prob, entropy = policy.evaluate_actions(obs, acts)
    neglogp = -log_prob.mean()
    ent_loss = -ent_weight * entropy.mean()
    return neglogp + ent_loss, neglogp


def collect(policy, beta, n_episodes, horizon, generator=None):
    """Roll out the beta-mixture; record every visited state with the expert's action."""
    obs_list, act_list = [], []
    state, ret = env_reset(n_episodes, generator), torch.zeros(n_episodes)
    with torch.no_grad():
        for _ in range(horizon):
            expert_act = expert(state)
            obs_list.append(state)
            act_list.append(expert_act)
            use_robot = torch.rand(n_episodes, 1, generator=generator) > beta
            action = torch.where(use_robot, policy.predict(state), expert_act)
            state = env_step(state, action)
            ret -= state[:, :2].norm(dim=1)
    return torch.cat(obs_list), torch.cat(act_list), ret.mean().item()


def evaluate(policy, beta=0.0, n_episodes=16):
    eval_gen = torch.Generator().manual_seed(1234)
    _, _, ret = collect(policy, beta, n_episodes, args.horizon, eval_gen)
    return ret


def beta_schedule(round_num):
    return min(1.0, max(0.0, (args.rampdown_rounds - round_num) / args.rampdown_rounds))


policy = GaussianMLPPolicy(4, 2, args.hidden)

# Phase 1: behaviour cloning on expert demonstrations (round 0, beta = 1).
obs_data, act_data, _ = collect(policy, beta_schedule(0), args.episodes_per_round, args.horizon)
optimizer = torch.optim.Adam(policy.parameters(), lr=args.lr)
for step in range(args.bc_updates):
    idx = torch.randint(0, obs_data.shape[0], (args.batch_size,))
    loss, neglogp = bc_loss(policy, obs_data[idx], act_data[idx], args.ent_weight)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 10 == 0 or step == args.bc_updates - 1:
        print(f"bc step {step:3d} loss {loss.item():.4f} neglogp {neglogp.item():.4f}")
print(f"expert return {evaluate(policy, 1.0):.3f} bc return {evaluate(policy):.3f}")

# Phase 2: DAgger rounds on the aggregated dataset.
bc_policy = copy.deepcopy(policy)
dagger_optimizer = torch.optim.Adam(bc_policy.parameters(), lr=args.dagger_lr)
for round_num in range(1, args.rounds + 1):
    beta = beta_schedule(round_num)
    new_obs, new_act, _ = collect(policy, beta, args.episodes_per_round, args.horizon)
    obs_data = torch.cat([obs_data, new_obs])
    act_data = torch.cat([act_data, new_act])
    for step in range(args.updates_per_round):
        idx = torch.randint(0, obs_data.shape[0], (args.batch_size,))
        loss, neglogp = bc_loss(policy, obs_data[idx], act_data[idx], args.ent_weight)
        dagger_optimizer.zero_grad()
        loss.backward()
        dagger_optimizer.step()
    print(f"round {round_num} beta {beta:.2f} data {obs_data.shape[0]:4d} "
          f"loss {loss.item():.4f} return {evaluate(policy):.3f}")

print(f"bc_policy return {evaluate(bc_policy):.3f} dagger return {evaluate(policy):.3f}")

if args.out:
    torch.save({"policy": policy.state_dict(), "bc_policy": bc_policy.state_dict()}, args.out)
