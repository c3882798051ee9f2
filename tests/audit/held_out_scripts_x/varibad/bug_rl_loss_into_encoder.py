"""VariBAD, a variational belief over the task learned by a recurrent encoder and a reward
decoder, with a policy that acts on that belief, on a tiny synthetic family of 1-D goal-reaching
tasks (the goal is unknown and only revealed through the rewards), written after Zintgraf,
Shiarlis, Igl, Schulze, Gal, Hofmann and Whiteson, "VariBAD: A Very Good Method for
Bayes-Adaptive Deep RL via Meta-Learning" (ICLR 2020, arXiv:1910.08348): a GRU encoder reads the
trajectory so far, (a_t, s_t+1, r_t+1) at a time, and outputs the posterior q(m | tau:t) =
N(mean_t, exp(logvar_t)) over a latent task m, the prior (t = 0) coming from a zero hidden state;
a reward decoder p(r | s', m) is trained with the encoder by the ELBO, in which the sample of
every posterior (t = 0..H) reconstructs the rewards of the whole trajectory, and the KL of each
posterior to the one before it (to N(0, I) for t = 0) is added with a weight; the policy and
value network see the state and the belief (mean, logvar) and are trained by A2C, and by default
the RL loss is not backpropagated into the encoder. With the authors' code, lmzintgraf/varibad
(https://github.com/lmzintgraf/varibad), whose steps this script follows: vae.py VaribadVAE
(optimiser_vae = Adam over the encoder's and the decoders' parameters; compute_loss: one
_sample_gaussian per ELBO term, the latent expanded over the horizon, the reward errors summed
over the decoded steps and the ELBO terms, averaged over tasks; compute_kl_loss with
kl_to_gauss_prior False; compute_vae_loss: rew_loss_coeff * reward + kl_weight * kl);
models/encoder.py RNNEncoder (state, action and reward embeddings, GRU, fc_mu / fc_logvar, the
prior from a zero hidden state); metalearner.py MetaLearner.train (rollouts with the belief
updated step by step and stored detached, the trajectories added to the VAE buffer) and
algorithms/a2c.py A2C.update (with rlloss_through_encoder False the latent mean and logvar given
to the policy are detached; the value loss, -adv.detach() * log_prob and the entropy bonus; when
the VAE loss joins the RL loss, one backward and a step of both optimisers). Here the belief the
policy is trained on comes from re-encoding the rollouts, the ELBO is taken over them and a batch
of older buffered trajectories, and the two losses share one backward: the detach keeps the
encoder trained by the ELBO alone, as in the default.
Bug: the policy's belief is not detached, so the A2C loss also trains the encoder."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iterations", type=int, default=80)
parser.add_argument("--num-tasks", type=int, default=16, help="parallel rollouts, one task each")
parser.add_argument("--horizon", type=int, default=10)
parser.add_argument("--latent-dim", type=int, default=4)
parser.add_argument("--vae-buffer", type=int, default=128, help="trajectories kept for the ELBO")
parser.add_argument("--vae-batch", type=int, default=16, help="older trajectories per ELBO batch")
parser.add_argument("--kl-weight", type=float, default=0.1)
parser.add_argument("--gamma", type=float, default=0.95)
parser.add_argument("--entropy-coef", type=float, default=0.01)
parser.add_argument("--value-loss-coef", type=float, default=0.5)
parser.add_argument("--out", default=None, help="where to save the encoder, decoder and policy")
args = parser.parse_args()
torch.manual_seed(args.seed)

hidden, embed, H, N, L = 32, 8, args.horizon, args.num_tasks, args.latent_dim


def env_step(state, action, goal):
    next_state = (state + 0.25 * action.clamp(-1.0, 1.0)).clamp(-1.5, 1.5)
    return next_state, -(next_state - goal).abs()


class RNNEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.action_encoder = nn.Linear(1, embed)
        self.state_encoder = nn.Linear(1, embed)
        self.reward_encoder = nn.Linear(1, embed)
        self.gru = nn.GRU(3 * embed, hidden)
        self.fc_mu = nn.Linear(hidden, L)
        self.fc_logvar = nn.Linear(hidden, L)

    def forward(self, actions, states, rewards, hidden_state):
        """Inputs: T x B x 1; returns mean, logvar (T x B x L) and the last hidden state."""
        h = torch.cat([F.relu(self.action_encoder(actions)), F.relu(self.state_encoder(states)),
                       F.relu(self.reward_encoder(rewards))], -1)
        output, hidden_state = self.gru(h, hidden_state)
        return self.fc_mu(output), self.fc_logvar(output), hidden_state

    def prior(self, batch_size):
        h0 = torch.zeros(1, batch_size, hidden)
        return self.fc_mu(h0), self.fc_logvar(h0), h0

    def encode_trajectories(self, actions, states, rewards):
        """Posteriors after 0..T steps (the prior first): (T + 1) x B x L each."""
        prior_mean, prior_logvar, h0 = self.prior(actions.shape[1])
        mean, logvar, _ = self(actions, states, rewards, h0)
        return torch.cat([prior_mean, mean]), torch.cat([prior_logvar, logvar])


class RewardDecoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.state_encoder = nn.Linear(1, embed)
        self.net = nn.Sequential(nn.Linear(L + embed, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                                 nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, latent, next_state):
        return self.net(torch.cat([latent, F.relu(self.state_encoder(next_state))], -1))


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.actor = nn.Sequential(nn.Linear(1 + 2 * L, hidden), nn.Tanh(), nn.Linear(hidden, 1))
        self.critic = nn.Sequential(nn.Linear(1 + 2 * L, hidden), nn.Tanh(), nn.Linear(hidden, 1))
        self.logstd = nn.Parameter(torch.zeros(1))

    def forward(self, state, belief):
        x = torch.cat([state, belief], -1)
        return torch.distributions.Normal(self.actor(x), self.logstd.exp()), self.critic(x)


def elbo_loss(actions, next_states, rewards):
    latent_mean, latent_logvar = encoder.encode_trajectories(actions, next_states, rewards)
    latent_sample = latent_mean + torch.exp(0.5 * latent_logvar) * torch.randn_like(latent_mean)
    dec_latent = latent_sample.unsqueeze(1).expand(H + 1, H, *latent_sample.shape[1:])
    dec_state = next_states.unsqueeze(0).expand(H + 1, *next_states.shape)
    dec_reward = rewards.unsqueeze(0).expand(H + 1, *rewards.shape)
    rew_loss = (reward_decoder(dec_latent, dec_state) - dec_reward).pow(2).mean(-1)
    rew_loss = rew_loss.sum(0).sum(0).mean()
    all_means = torch.cat([torch.zeros_like(latent_mean[:1]), latent_mean])
    all_logvars = torch.cat([torch.zeros_like(latent_logvar[:1]), latent_logvar])
    mu, m, log_e, log_s = all_means[1:], all_means[:-1], all_logvars[1:], all_logvars[:-1]
    kl = 0.5 * (log_s.sum(-1) - log_e.sum(-1) - L + (log_e.exp() / log_s.exp()).sum(-1)
                + ((m - mu) ** 2 / log_s.exp()).sum(-1))
    return rew_loss + args.kl_weight * kl.sum(0).mean(), latent_mean, latent_logvar


encoder, reward_decoder, policy = RNNEncoder(), RewardDecoder(), Policy()
for name, param in encoder.gru.named_parameters():
    if "weight" in name:
        nn.init.orthogonal_(param)
    else:
        nn.init.zeros_(param)
optimizer_vae = torch.optim.Adam([*encoder.parameters(), *reward_decoder.parameters()], lr=1e-3)
optimizer_policy = torch.optim.Adam(policy.parameters(), lr=1e-3)
vae_buffer = []

for iteration in range(args.iterations):
    # rollouts: one new task per process, the belief updated online under no_grad
    goals = torch.rand(N, 1) * 2 - 1
    state = torch.zeros(N, 1)
    states, actions, rewards, next_states, values = [], [], [], [], []
    with torch.no_grad():
        mean, logvar, hidden_state = encoder.prior(N)
        for t in range(H):
            dist, value = policy(state, torch.cat([mean[0], logvar[0]], -1))
            action = dist.sample()
            next_state, reward = env_step(state, action, goals)
            mean, logvar, hidden_state = encoder(action[None], next_state[None], reward[None], hidden_state)
            for buf, x in zip((states, actions, rewards, next_states, values),
                              (state, action, reward, next_state, value)):
                buf.append(x)
            state = next_state
    states, actions, rewards, next_states, values = (torch.stack(b) for b in
                                                     (states, actions, rewards, next_states, values))
    old = [vae_buffer[i] for i in torch.randint(0, len(vae_buffer), (args.vae_batch,))] if vae_buffer else []
    vae_buffer = (vae_buffer + [(actions[:, i], next_states[:, i], rewards[:, i]) for i in range(N)])[-args.vae_buffer:]

    returns, running = torch.zeros_like(rewards), torch.zeros(N, 1)
    for t in reversed(range(H)):
        running = rewards[t] + args.gamma * running
        returns[t] = running
    advantages = returns - values

    # the ELBO over the new rollouts and older buffered ones, one encoder pass for both
    batch = [torch.cat([x] + [o[k].unsqueeze(1) for o in old], 1)
             for k, x in enumerate((actions, next_states, rewards))]
    vae_loss, latent_mean, latent_logvar = elbo_loss(*batch)

    # A2C on the re-encoded beliefs of the new rollouts (before each action), detached
    belief = torch.cat([latent_mean[:H, :N], latent_logvar[:H, :N]], -1)
    dist, new_values = policy(states, belief)
    value_loss = (returns - new_values).pow(2).mean()
    action_loss = -(advantages.detach() * dist.log_prob(actions)).mean()
    rl_loss = args.value_loss_coef * value_loss + action_loss - args.entropy_coef * dist.entropy().mean()

    optimizer_policy.zero_grad()
    optimizer_vae.zero_grad()
    (rl_loss + vae_loss).backward()
    optimizer_policy.step()
    optimizer_vae.step()
    if iteration % 20 == 0:
        print(f"iter {iteration} return {rewards.sum(0).mean().item():.3f} elbo {vae_loss.item():.3f}")

if args.out:
    torch.save({"encoder": encoder.state_dict(), "reward_decoder": reward_decoder.state_dict(),
                "policy": policy.state_dict()}, args.out)
