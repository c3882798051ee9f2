"""PETS, probabilistic ensembles with trajectory sampling, on a tiny synthetic 1-D cart with a
nonlinear restoring force, written after Chua, Calandra, McAllister and Levine, "Deep
Reinforcement Learning in a Handful of Trials using Probabilistic Dynamics Models" (NeurIPS
2018, arXiv:1805.12114): an ensemble of B probabilistic networks, each predicting a Gaussian
over the change of state given state and action, every member trained on its own bootstrap of
the data by the Gaussian negative log-likelihood; the predicted log-variance is kept between a
learned upper and lower bound by soft clamps, and the two bounds are themselves trained, with a
small penalty 0.01 * (sum max_logvar - sum min_logvar) that pulls them together (Appendix A.1);
actions are chosen by model-predictive control with the cross-entropy method, each candidate
action sequence scored by the known reward along trajectory-sampling (TS1) particles, a random
member drawn for every particle at every step. Two phases: random actions fill the data set,
then every trial retrains the ensemble on all data and runs one episode with CEM planning. With
the authors' code, kchua/handful-of-trials (https://github.com/kchua/handful-of-trials,
dmbrl/modeling/models/BNN.py BNN.finalize: max_logvar and min_logvar are variables in optvars,
trained with the layers by one optimizer on the summed per-member losses, the weight decays and
0.01 * sum(max_logvar) - 0.01 * sum(min_logvar); BNN.train: the scaler fit on the inputs, one
bootstrap draw of indices per member per call, the rows reshuffled every epoch) and the PyTorch
port facebookresearch/mbrl-lib (https://github.com/facebookresearch/mbrl-lib), whose steps this
script follows: mbrl/algorithms/pets.py train (rollout_agent_trajectories with a RandomAgent
first, then per trial update_normalizer and train_model_and_save_model_and_data, then env steps
with the trajectory-optimisation agent); mbrl/models/gaussian_mlp.py GaussianMLP (ensemble
linear layers; _default_forward's soft bounds logvar = max_logvar - softplus(max_logvar -
logvar), then min_logvar + softplus(logvar - min_logvar); learn_logvar_bounds=True makes both
bounds trainable nn.Parameters, as in the paper; _nll_loss: gaussian_nll averaged over batch and
outputs, summed over members, plus the bound penalty); OneDTransitionRewardModel (normalised
inputs, the state difference as target); mbrl/models/model_trainer.py DynamicsModelTrainer (one
Adam with weight decay over model.parameters() for the whole run) and model.py Model.update
(zero_grad, loss, backward, step per batch); mbrl/planning/trajectory_opt.py
CEMOptimizer.optimize (a population around mu, its variance kept inside the action bounds, top-k
elites, mu and var moved with momentum alpha, the best sequence returned) and
TrajectoryOptimizer (the last solution shifted as the next initial mean); mbrl/models/model_env.py
ModelEnv.evaluate_action_sequences and step (particles, under no_grad). Here the ensemble has 5
members of three SiLU layers of width 32, the reward function is known and CEM's population is
clipped at two standard deviations where mbrl-lib redraws it.
Bug: built without learn_logvar_bounds=True, the log-variance bounds stay frozen at -10 and 0.5."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--random-episodes", type=int, default=4)
parser.add_argument("--trials", type=int, default=3)
parser.add_argument("--episode-len", type=int, default=20)
parser.add_argument("--ensemble-size", type=int, default=5)
parser.add_argument("--epochs", type=int, default=20, help="model epochs per trial")
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--horizon", type=int, default=8)
parser.add_argument("--population", type=int, default=60)
parser.add_argument("--elites", type=int, default=6)
parser.add_argument("--cem-iters", type=int, default=3)
parser.add_argument("--particles", type=int, default=4)
parser.add_argument("--out", default=None, help="where to save the dynamics ensemble")
args = parser.parse_args()
torch.manual_seed(args.seed)

state_dim, action_dim, hidden, goal = 2, 1, 32, 1.0


def env_step(state, action):
    """True system: a cart pulled back by a sine force, noise growing with the speed."""
    p, v = state[..., 0], state[..., 1]
    v_next = 0.9 * v + 0.2 * (action[..., 0] - 0.5 * torch.sin(2.0 * p))
    next_state = torch.stack([p + 0.2 * v_next, v_next], -1)
    return next_state + (0.005 + 0.02 * v_next.abs().unsqueeze(-1)) * torch.randn_like(next_state)


def reward_fn(action, next_state):
    return -(next_state[..., 0] - goal) ** 2 - 0.1 * next_state[..., 1] ** 2 - 0.01 * action[..., 0] ** 2


class EnsembleLinear(nn.Module):
    def __init__(self, members, d_in, d_out):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(members, d_in, d_out))
        self.bias = nn.Parameter(torch.zeros(members, 1, d_out))
        for w in self.weight:
            nn.init.trunc_normal_(w, std=1.0 / (2.0 * d_in ** 0.5))

    def forward(self, x):
        return torch.baddbmm(self.bias, x, self.weight)


class GaussianEnsemble(nn.Module):
    def __init__(self, d_in, d_out, members, learn_logvar_bounds=False):
        super().__init__()
        self.d_out = d_out
        self.layers = nn.ModuleList([EnsembleLinear(members, d_in, hidden),
                                     EnsembleLinear(members, hidden, hidden),
                                     EnsembleLinear(members, hidden, hidden)])
        self.mean_and_logvar = EnsembleLinear(members, hidden, 2 * d_out)
        self.min_logvar = nn.Parameter(-10 * torch.ones(1, 1, d_out), requires_grad=learn_logvar_bounds)
        self.max_logvar = nn.Parameter(0.5 * torch.ones(1, 1, d_out), requires_grad=learn_logvar_bounds)
        self.register_buffer("in_mean", torch.zeros(d_in))
        self.register_buffer("in_std", torch.ones(d_in))

    def update_normalizer(self, inputs):
        self.in_mean.copy_(inputs.mean(0))
        self.in_std.copy_(inputs.std(0).clamp(min=1e-6))

    def forward(self, x):
        """x: members x batch x d_in, raw inputs; returns the mean and the bounded log-variance."""
        h = (x - self.in_mean) / self.in_std
        for layer in self.layers:
            h = F.silu(layer(h))
        out = self.mean_and_logvar(h)
        mean, logvar = out[..., :self.d_out], out[..., self.d_out:]
        logvar = self.max_logvar - F.softplus(self.max_logvar - logvar)
        logvar = self.min_logvar + F.softplus(logvar - self.min_logvar)
        return mean, logvar


def nll_loss(model, inputs, targets):
    """inputs/targets: members x batch x dim (one bootstrap batch per member)."""
    mean, logvar = model(inputs)
    nll = 0.5 * ((mean - targets) ** 2 * torch.exp(-logvar) + logvar)
    return nll.mean((1, 2)).sum() + 0.01 * (model.max_logvar.sum() - model.min_logvar.sum())


def rollout(policy):
    states, actions, next_states = [], [], []
    state = 0.05 * torch.randn(state_dim)
    for _ in range(args.episode_len):
        action = policy(state)
        next_state = env_step(state, action)
        states.append(state), actions.append(action), next_states.append(next_state)
        state = next_state
    return torch.stack(states), torch.stack(actions), torch.stack(next_states)


@torch.no_grad()
def evaluate_sequences(model, state, sequences):
    """Mean return of each action sequence (population x horizon x 1) over TS1 particles."""
    n = sequences.shape[0] * args.particles
    s = state.expand(n, state_dim)
    total = torch.zeros(n)
    for t in range(args.horizon):
        a = sequences[:, t].repeat_interleave(args.particles, 0)
        x = torch.cat([s, a], -1).expand(args.ensemble_size, n, state_dim + action_dim)
        mean, logvar = model(x)
        member = torch.randint(0, args.ensemble_size, (n,))
        mean, std = mean[member, torch.arange(n)], torch.exp(0.5 * logvar[member, torch.arange(n)])
        s = s + mean + std * torch.randn_like(std)
        total = total + reward_fn(a, s)
    return total.view(-1, args.particles).mean(1)


def cem_plan(model, state, init_mean):
    mu, var = init_mean.clone(), torch.full_like(init_mean, 0.25)
    best_value, best = -float("inf"), init_mean
    for _ in range(args.cem_iters):
        constrained_var = torch.min(torch.min(((mu + 1) / 2) ** 2, ((1 - mu) / 2) ** 2), var)
        noise = torch.randn(args.population, args.horizon, action_dim).clamp(-2.0, 2.0)
        population = mu + noise * constrained_var.sqrt()
        values = evaluate_sequences(model, state, population)
        top_values, elite_idx = values.topk(args.elites)
        elite = population[elite_idx]
        mu = 0.1 * mu + 0.9 * elite.mean(0)
        var = 0.1 * var + 0.9 * elite.var(0, unbiased=False)
        if top_values[0] > best_value:
            best_value, best = top_values[0].item(), population[elite_idx[0]].clone()
    return best


# phase 1: random actions fill the data set
data = [rollout(lambda s: torch.rand(action_dim) * 2 - 1) for _ in range(args.random_episodes)]

# phase 2: per trial, retrain the ensemble on all data, then one episode of CEM planning
model = GaussianEnsemble(state_dim + action_dim, state_dim, args.ensemble_size)
optimizer = torch.optim.Adam(model.parameters(), lr=2e-3, weight_decay=5e-5)
for trial in range(args.trials):
    states, actions, next_states = (torch.cat(d) for d in zip(*data))
    inputs, targets = torch.cat([states, actions], -1), next_states - states
    model.update_normalizer(inputs)
    n = len(inputs)
    boot = torch.randint(0, n, (args.ensemble_size, n))
    for epoch in range(args.epochs):
        order = boot[:, torch.randperm(n)]
        for start in range(0, n, args.batch_size):
            idx = order[:, start:start + args.batch_size]
            loss = nll_loss(model, inputs[idx], targets[idx])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    print(f"trial {trial} model loss {loss.item():.4f}")

    plan = torch.zeros(args.horizon, action_dim)

    def mpc_policy(state):
        global plan
        best = cem_plan(model, state, plan)
        plan = torch.cat([best[1:], torch.zeros(1, action_dim)])
        return best[0]

    episode = rollout(mpc_policy)
    data.append(episode)
    print(f"trial {trial} return {reward_fn(episode[1], episode[2]).sum().item():.3f}")

if args.out:
    torch.save({"model": model.state_dict()}, args.out)
