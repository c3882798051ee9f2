"""Plan2Explore, self-supervised exploration by planning to reduce a world model's epistemic
uncertainty, written after Sekar, Rybkin, Daniilidis, Abbeel, Hafner and Pathak, "Planning to
Explore via Self-Supervised World Models" (ICML 2020, arXiv:2005.05960): a world model (encoder,
decoder, latent dynamics) is learned from the agent's own experience; an ensemble of one-step
predictors maps the latent state and action to the next observation's encoding, trained on
replayed transitions with its inputs and targets cut from the world model's graph; the
ensemble's disagreement, the variance of its predictions averaged over dimensions, is the
intrinsic reward of an exploration policy trained purely in imagination, rolling the learned
dynamics forward from replayed latents, with a value baseline and fixed rewards. With the
authors' ramanans1/plan2explore (plan2explore/networks/one_step_model.py one_step_model: the
state and action inputs under tf.stop_gradient) and the PyTorch port in NM512/dreamerv3-torch
(exploration.py Plan2Explore: _train_ensemble detaches targets and inputs before the
ensemble's likelihood loss; _intrinsic_reward takes the spread of the heads' predictions,
averaged over the embedding; Plan2Explore.train trains the ensemble, then the imagined
behaviour of models.ImagBehavior with the intrinsic reward); the script follows these steps.
Here the behaviour is trained by REINFORCE with a value baseline, as ImagBehavior does with
actor_grad 'reinforce', over a short imagined rollout taken under torch.no_grad() with the
rewards computed there, so the rewards and returns are fixed numbers; the ensemble heads are
deterministic MLPs fitted by squared error (a unit-variance Gaussian likelihood); all losses
are summed into one backward over a single Adam with one parameter group per network, so that
only the detaches keep each loss on its own network; the environment is a 2-d point mass whose
observation is a fixed nonlinear 6-d feature of the position, explored from the origin.
Bug: the intrinsic reward is computed after the torch.no_grad() block of the imagined rollout
instead of inside it, so the rewards, and the returns built from them, keep the graph of the
ensemble heads' predictions, where NM512/dreamerv3-torch's ImagBehavior (actor_grad
'reinforce') weights the log-probabilities by a detached advantage and fits the value to a
detached target, and the ensemble is trained only by its own one-step loss in
Plan2Explore._train_ensemble: the value loss and the REINFORCE loss now also differentiate
through the disagreement, so the shared backward trains the ensemble heads to move their spread
towards the value baseline and to raise or lower it where the policy's actions are likely,
which corrupts the uncertainty estimate that the exploration reward is meant to be, from the
first update on."""

import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iterations", type=int, default=40)
parser.add_argument("--n-envs", type=int, default=16)
parser.add_argument("--episode-len", type=int, default=8)
parser.add_argument("--horizon", type=int, default=5)
parser.add_argument("--n-heads", type=int, default=5)
parser.add_argument("--discount", type=float, default=0.95)
parser.add_argument("--intr-scale", type=float, default=10.0)
parser.add_argument("--out", default=None, help="where to save the networks")
args = parser.parse_args()
torch.manual_seed(args.seed)

obs_dim, act_dim, latent_dim, hidden = 6, 2, 4, 32
freqs = torch.randn(2, 3)


def observe(pos):
    return torch.cat([torch.sin(pos @ freqs), torch.cos(pos @ freqs)], 1)


def env_step(pos, action):
    return (pos + 0.3 * action.clamp(-1, 1)).clamp(-3, 3)


def mlp(inp, out):
    return nn.Sequential(nn.Linear(inp, hidden), nn.ELU(), nn.Linear(hidden, hidden), nn.ELU(),
                         nn.Linear(hidden, out))


class WorldModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = mlp(obs_dim, latent_dim)
        self.decoder = mlp(latent_dim, obs_dim)
        self.dynamics = mlp(latent_dim + act_dim, latent_dim)

    def img_step(self, z, a):
        return z + self.dynamics(torch.cat([z, a], 1))


class Actor(nn.Module):
    def __init__(self):
        super().__init__()
        self.mean = mlp(latent_dim, act_dim)
        self.log_std = nn.Parameter(torch.zeros(act_dim))

    def dist(self, z):
        return torch.distributions.Normal(torch.tanh(self.mean(z)), self.log_std.exp())


world_model = WorldModel()
ensemble = nn.ModuleList([mlp(latent_dim + act_dim, latent_dim) for _ in range(args.n_heads)])
actor = Actor()
value = mlp(latent_dim, 1)
optimizer = torch.optim.Adam([
    {"params": world_model.parameters(), "lr": 3e-3},
    {"params": ensemble.parameters(), "lr": 3e-3},
    {"params": actor.parameters(), "lr": 1e-3},
    {"params": value.parameters(), "lr": 3e-3}])


def intrinsic_reward(z, a):
    inputs = torch.cat([z, a], 1)
    preds = torch.stack([head(inputs) for head in ensemble])
    return args.intr_scale * preds.var(0).mean(1)


buffer_obs, buffer_act, buffer_next = [], [], []
for it in range(args.iterations):
    # collect an episode per environment with the exploration policy
    with torch.no_grad():
        pos = torch.zeros(args.n_envs, 2)
        for t in range(args.episode_len):
            obs = observe(pos)
            act = actor.dist(world_model.encoder(obs)).sample()
            pos = env_step(pos, act)
            buffer_obs.append(obs)
            buffer_act.append(act)
            buffer_next.append(observe(pos))
    data_obs, data_act = torch.cat(buffer_obs), torch.cat(buffer_act)
    data_next = torch.cat(buffer_next)
    idx = torch.randint(0, len(data_obs), (128,))
    obs, act, next_obs = data_obs[idx], data_act[idx], data_next[idx]

    # world model: reconstruction and latent dynamics
    z = world_model.encoder(obs)
    next_z = world_model.encoder(next_obs)
    recon_loss = (world_model.decoder(z) - obs).pow(2).sum(1).mean()
    dyn_loss = (world_model.img_step(z, act) - next_z.detach()).pow(2).sum(1).mean()
    model_loss = recon_loss + dyn_loss

    # ensemble of one-step predictors: inputs and targets cut from the world model
    inputs = torch.cat([z.detach(), act], 1)
    target = next_z.detach()
    ensemble_loss = sum((head(inputs) - target).pow(2).sum(1).mean() for head in ensemble)

    # exploration behaviour in imagination, rewarded by the ensemble's disagreement
    with torch.no_grad():
        imag_z = [z.detach()]
        imag_a = []
        for t in range(args.horizon):
            imag_a.append(actor.dist(imag_z[-1]).sample())
            imag_z.append(world_model.img_step(imag_z[-1], imag_a[-1]))
        imag_z, imag_a = torch.stack(imag_z), torch.stack(imag_a)
        returns = [value(imag_z[-1]).squeeze(1)]
    rewards = intrinsic_reward(imag_z[:-1].flatten(0, 1), imag_a.flatten(0, 1))
    rewards = rewards.view(args.horizon, -1)
    for t in reversed(range(args.horizon)):
        returns.insert(0, rewards[t] + args.discount * returns[0])
    returns = torch.stack(returns[:-1])
    values = value(imag_z[:-1]).squeeze(2)
    log_probs = actor.dist(imag_z[:-1]).log_prob(imag_a).sum(2)
    actor_loss = -(log_probs * (returns - values.detach())).mean()
    actor_loss = actor_loss - 1e-3 * actor.dist(imag_z[:-1]).entropy().sum(2).mean()
    value_loss = 0.5 * (values - returns).pow(2).mean()

    optimizer.zero_grad()
    (model_loss + ensemble_loss + actor_loss + value_loss).backward()
    optimizer.step()
    if it % 20 == 0:
        print(f"iteration {it} model {model_loss.item():.4f} ensemble {ensemble_loss.item():.4f}"
              f" reward {rewards.mean().item():.4f} value {value_loss.item():.4f}")

if args.out:
    torch.save({"world_model": world_model.state_dict(), "ensemble": ensemble.state_dict(),
                "actor": actor.state_dict(), "value": value.state_dict()}, args.out)
