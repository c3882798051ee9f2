"""VIME, variational information maximizing exploration, for a policy-gradient agent on a tiny
sparse-reward task, written after Houthooft, Chen, Duan, Schulman, De Turck and Abbeel, "VIME:
Variational Information Maximizing Exploration" (NeurIPS 2016, arXiv:1605.09674): a Bayesian
neural network (BNN) with a fully factorised Gaussian posterior q(w; phi), phi = (mu, rho),
sigma = log(1 + exp(rho)), models the dynamics p(s' | s, a; w) and is fitted by variational
inference on a replay pool; the intrinsic reward of a transition is the information gain it
brings about w, approximated by KL[q(w; phi') || q(w; phi)] where phi' is the posterior after
a few gradient steps on that transition, started from phi and undone afterwards, normalised by
the mean of the medians of the previous batches, and the agent maximises r + eta * KL. With the
authors' code, openai/vime (https://github.com/openai/vime: dynamics/bnn.py BNNLayer keeps
mu, rho and their *_old copies, samples its output with the local reparametrisation trick, and
gives kl_div_p_q for factorised Gaussians; BNN.loss is the ELBO KL[q || prior] / n_batches -
log p(D | w) / n_samples, BNN.loss_last_sample replaces the prior by the old posterior,
KL[q(w; phi) || q(w; phi_old)] - log p(sample | w) / n_samples, and BNN.inf_gain is
KL[new || old]; sampler/parallel_sampler_expl.py _worker_collect_one_path, for itr > 0, cuts
each normalised path into batches and for each one calls save_old_params, takes n_itr_update
update steps, reads the KL in closed form clipped to [0, 1000], and calls reset_to_old_params;
algos/batch_polopt_expl.py BatchPolopt.process_samples divides the KLs by the mean of the last
kl_q_len batch medians, adds eta * KL to the rewards, computes discounted advantages with the
baseline and fits the baseline on the extrinsic returns, and train adds the paths to a
SimpleReplayPool and fits the BNN on n_updates_per_sample random minibatches of it, normalised
by the pool's mean and std, before the policy step of algos/vpg_expl.py, the surrogate
-mean(log pi(a | s) * centred advantages)), whose steps this script follows. Here the
update steps that measure the information gain descend loss_last_sample, as its docstring
describes, with plain SGD on a snapshot of the parameters taken with .detach().clone(); the
baseline is rllab's linear feature baseline, the policy a Gaussian MLP with a learned log-std
taking one Adam step per iteration, and the task a 1-D point mass rewarded only far from its
start.
Bug: the BNN's optimizer.zero_grad() is called once before the loop over the replay minibatches
instead of before each backward, so every Adam step of the dynamics fit uses summed gradients."""

import argparse
from collections import deque

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iterations", type=int, default=10)
parser.add_argument("--paths", type=int, default=4, help="paths per iteration")
parser.add_argument("--path-length", type=int, default=30)
parser.add_argument("--discount", type=float, default=0.99)
parser.add_argument("--eta", type=float, default=0.1, help="weight of the intrinsic reward")
parser.add_argument("--kl-batch-size", type=int, default=15)
parser.add_argument("--n-itr-update", type=int, default=3, help="update steps per KL batch")
parser.add_argument("--kl-lr", type=float, default=0.001)
parser.add_argument("--kl-q-len", type=int, default=10)
parser.add_argument("--n-updates-per-sample", type=int, default=10)
parser.add_argument("--pool-batch-size", type=int, default=16)
parser.add_argument("--min-pool-size", type=int, default=60)
parser.add_argument("--snn-n-samples", type=int, default=2)
parser.add_argument("--prior-sd", type=float, default=0.5)
parser.add_argument("--likelihood-sd", type=float, default=0.5)
parser.add_argument("--out", default=None, help="where to save the policy, the BNN and the baseline")
args = parser.parse_args()
torch.manual_seed(args.seed)
torch.set_num_threads(1)  # tiny networks: intra-op threads only add overhead

obs_dim, act_dim, n_batches = 2, 1, 5
N, T = args.paths, args.path_length


def env_reset(n):
    return torch.stack([-0.5 + 0.05 * torch.randn(n), torch.zeros(n)], 1)


def env_step(obs, action):
    """Point mass on [-1, 1]: the action pushes the velocity; reward only beyond x = 0.6."""
    x, v = obs[:, 0], obs[:, 1]
    v = 0.9 * v + 0.03 * action.clamp(-1, 1)[:, 0]
    x = (x + v).clamp(-1, 1)
    v = torch.where(x.abs() >= 1, torch.zeros_like(v), v)
    reward = (x > 0.6).float() - 0.01 * action[:, 0].pow(2)
    return torch.stack([x, v], 1), reward


class GaussianMLPPolicy(nn.Module):
    def __init__(self):
        super().__init__()
        self.mean = nn.Sequential(nn.Linear(obs_dim, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(),
                                  nn.Linear(32, act_dim))
        self.log_std = nn.Parameter(torch.zeros(act_dim))

    def forward(self, obs):
        return torch.distributions.Normal(self.mean(obs), self.log_std.exp())


def softplus_inverse(sigma):
    return torch.log(torch.expm1(torch.tensor(sigma)))


def kl_div_p_q(p_mean, p_std, q_mean, q_std):
    """KL[p || q] for fully factorised Gaussians, summed."""
    numerator = (p_mean - q_mean).pow(2) + p_std.pow(2) - q_std.pow(2)
    return (numerator / (2 * q_std.pow(2) + 1e-8) + torch.log(q_std) - torch.log(p_std)).sum()


class BNNLayer(nn.Module):
    def __init__(self, n_in, n_out, relu):
        super().__init__()
        self.relu = relu
        self.mu = nn.Parameter(torch.randn(n_in, n_out) / n_in ** 0.5)
        self.rho = nn.Parameter(torch.full((n_in, n_out), softplus_inverse(args.prior_sd).item()))
        self.b_mu = nn.Parameter(torch.zeros(n_out))
        self.b_rho = nn.Parameter(torch.full((n_out,), softplus_inverse(args.prior_sd).item()))

    def forward(self, x):
        """Local reparametrisation: sample the pre-activations, not the weights."""
        gamma = x @ self.mu + self.b_mu
        delta = x.pow(2) @ F.softplus(self.rho).pow(2) + F.softplus(self.b_rho).pow(2)
        activation = gamma + delta.sqrt() * torch.randn_like(gamma)
        return F.relu(activation) if self.relu else activation

    def kl_to(self, mu, rho, b_mu, b_rho):
        """KL[q(this layer) || N(mu, softplus(rho)^2)], the weights' and the biases'."""
        return (kl_div_p_q(self.mu, F.softplus(self.rho), mu, F.softplus(rho))
                + kl_div_p_q(self.b_mu, F.softplus(self.b_rho), b_mu, F.softplus(b_rho)))


class BNN(nn.Module):
    """Dynamics model (s, a) -> s', both normalised, with a Gaussian posterior over its weights."""

    def __init__(self):
        super().__init__()
        self.hidden = BNNLayer(obs_dim + act_dim, 32, relu=True)
        self.output = BNNLayer(32, obs_dim, relu=False)

    def forward(self, x):
        return self.output(self.hidden(x))

    def log_p_d_given_w(self, inputs, targets):
        """Sum over snn_n_samples forward passes of the Gaussian log-likelihood of the targets."""
        total = 0.0
        for _ in range(args.snn_n_samples):
            prediction = self(inputs)
            total = total + (-torch.log(torch.tensor(args.likelihood_sd)) - 0.5 * torch.log(
                torch.tensor(2 * torch.pi)) - (targets - prediction).pow(2) / (
                2 * args.likelihood_sd ** 2)).sum()
        return total

    def kl_to_prior(self):
        prior_rho = softplus_inverse(args.prior_sd)
        return sum(layer.kl_to(torch.zeros(()), prior_rho, torch.zeros(()), prior_rho)
                   for layer in (self.hidden, self.output))

    def kl_new_old(self, old):
        return sum(layer.kl_to(old[f"{name}.mu"], old[f"{name}.rho"], old[f"{name}.b_mu"],
                               old[f"{name}.b_rho"])
                   for name, layer in (("hidden", self.hidden), ("output", self.output)))

    def loss(self, inputs, targets):
        return self.kl_to_prior() / n_batches - self.log_p_d_given_w(inputs, targets) / args.snn_n_samples

    def loss_last_sample(self, inputs, targets, old):
        return self.kl_new_old(old) - self.log_p_d_given_w(inputs, targets) / args.snn_n_samples


def baseline_features(obs):
    al = torch.arange(len(obs), dtype=torch.float32).unsqueeze(1) / 100.0
    return torch.cat([obs, obs.pow(2), al, al.pow(2), al.pow(3), torch.ones_like(al)], 1)


def discount_cumsum(x, discount):
    out = torch.zeros_like(x)
    running = torch.zeros(x.shape[1:])
    for t in reversed(range(x.shape[0])):
        running = x[t] + discount * running
        out[t] = running
    return out


policy = GaussianMLPPolicy()
bnn = BNN()
baseline_coeffs = torch.zeros(2 * obs_dim + 4)
policy_optimizer = torch.optim.Adam(policy.parameters(), lr=0.01)
bnn_optimizer = torch.optim.Adam(bnn.parameters(), lr=0.001)
kl_optimizer = torch.optim.SGD(bnn.parameters(), lr=args.kl_lr)
pool_inputs, pool_next_obs = torch.zeros(0, obs_dim + act_dim), torch.zeros(0, obs_dim)
kl_previous = deque(maxlen=args.kl_q_len)


def information_gain(inputs, targets):
    """KL[q(phi') || q(phi)] after n_itr_update steps on (inputs, targets); phi is restored."""
    old = {name: p.detach().clone() for name, p in bnn.named_parameters()}
    for _ in range(args.n_itr_update):
        update_loss = bnn.loss_last_sample(inputs, targets, old)
        kl_optimizer.zero_grad()
        update_loss.backward()
        kl_optimizer.step()
    with torch.no_grad():
        kl = bnn.kl_new_old(old).clamp(0, 1000)
        for name, p in bnn.named_parameters():
            p.copy_(old[name])
    return kl.item()


for itr in range(args.iterations):
    # rollouts with the current policy
    observations, actions, rewards, next_observations = [], [], [], []
    obs = env_reset(N)
    with torch.no_grad():
        for t in range(T):
            action = policy(obs).sample()
            next_obs, reward = env_step(obs, action)
            observations.append(obs), actions.append(action), rewards.append(reward)
            next_observations.append(next_obs)
            obs = next_obs
    observations, actions = torch.stack(observations), torch.stack(actions)  # T x N x .
    rewards, next_observations = torch.stack(rewards), torch.stack(next_observations)

    # intrinsic rewards: information gain of each KL batch of each path, from the second iteration
    rewards_orig = rewards.clone()
    if itr > 0:
        obs_mean, obs_std = pool_inputs[:, :obs_dim].mean(0), pool_inputs[:, :obs_dim].std(0)
        act_mean, act_std = pool_inputs[:, obs_dim:].mean(0), pool_inputs[:, obs_dim:].std(0)
        kls = torch.zeros(T, N)
        for i in range(N):
            inputs = torch.cat([(observations[:, i] - obs_mean) / (obs_std + 1e-8),
                                (actions[:, i] - act_mean) / (act_std + 1e-8)], 1)
            targets = (next_observations[:, i] - obs_mean) / (obs_std + 1e-8)
            for start in range(0, T, args.kl_batch_size):
                end = start + args.kl_batch_size
                kls[start:end, i] = information_gain(inputs[start:end], targets[start:end])
        kl_previous.append(kls.median().item())
        kls = kls / (sum(kl_previous) / len(kl_previous))
        rewards = rewards + args.eta * kls

    # advantages with the linear feature baseline, which is then fitted on the extrinsic returns
    features = torch.stack([baseline_features(observations[:, i]) for i in range(N)], 1)
    values = torch.cat([features @ baseline_coeffs, torch.zeros(1, N)])
    deltas = rewards + args.discount * values[1:] - values[:-1]
    advantages = discount_cumsum(deltas, args.discount)
    advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    returns = discount_cumsum(rewards_orig, args.discount)
    flat_features = features.transpose(0, 1).reshape(N * T, -1)
    gram = flat_features.T @ flat_features + 1e-5 * torch.eye(flat_features.shape[1])
    baseline_coeffs = torch.linalg.solve(gram, flat_features.T @ returns.T.reshape(-1))

    # replay pool and BNN fit on random minibatches of it, normalised by the pool statistics
    pool_inputs = torch.cat([pool_inputs, torch.cat([observations, actions], 2).reshape(-1, 3)])
    pool_next_obs = torch.cat([pool_next_obs, next_observations.reshape(-1, obs_dim)])
    if len(pool_inputs) >= args.min_pool_size:
        in_mean, in_std = pool_inputs.mean(0), pool_inputs.std(0)
        obs_mean, obs_std = in_mean[:obs_dim], in_std[:obs_dim]
        bnn_optimizer.zero_grad()
        for _ in range(args.n_updates_per_sample):
            idx = torch.randint(0, len(pool_inputs), (args.pool_batch_size,))
            bnn_inputs = (pool_inputs[idx] - in_mean) / (in_std + 1e-8)
            bnn_targets = (pool_next_obs[idx] - obs_mean) / (obs_std + 1e-8)
            bnn_loss = bnn.loss(bnn_inputs, bnn_targets)
            bnn_loss.backward()
            bnn_optimizer.step()

    # policy step on the surrogate -mean(log pi(a | s) * advantage)
    log_prob = policy(observations).log_prob(actions).sum(-1)
    surrogate = -(log_prob * advantages).mean()
    policy_optimizer.zero_grad()
    surrogate.backward()
    policy_optimizer.step()
    if itr % 4 == 0:
        print(f"itr {itr} return {rewards_orig.sum(0).mean().item():.3f} "
              f"bnn loss {bnn_loss.item():.3f} max x {observations[:, :, 0].max().item():.3f}")

if args.out:
    torch.save({"policy": policy.state_dict(), "bnn": bnn.state_dict(),
                "baseline_coeffs": baseline_coeffs}, args.out)
