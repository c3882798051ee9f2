"""Dreamer (v1): a recurrent state-space world model and an actor-critic learned in imagination.

Paper: Danijar Hafner, Timothy Lillicrap, Jimmy Ba and Mohammad Norouzi, "Dream to Control:
Learning Behaviors by Latent Imagination", ICLR 2020, arXiv:1912.01603 (2019/2020).
Reference implementation: danijar/dreamer, dreamer.py (define_config: pretrain, train_steps,
model/value/actor learning rates, free_nats 3, grad_clip 100, discount 0.99, disclam 0.95,
horizon 15, expl_amount 0.3; Dreamer.__call__: the first training call runs `pretrain` steps,
later ones `train_steps` between collections; Dreamer._train: model loss = KL(post || prior)
clipped below at free_nats minus the image and reward log-likelihoods, actor loss = minus the
discounted lambda-returns, value loss = minus the log-likelihood of stop_gradient(returns);
Dreamer._imagine_ahead: the policy sees stop_gradient(feat) and the rollout scans img_step from
every posterior state, so the actor is trained by backpropagating the returns through the
learned dynamics; Dreamer.policy: observe step plus exploration noise), models.py (RSSM.img_step,
obs_step, observe; DenseDecoder; ActionDecoder, tanh-normal with mean_scale 5 and init_std 5),
tools.py (lambda_return; Adam with clip_by_global_norm). The PyTorch port juliusfrost/
dreamer-pytorch (dreamer/algos/dreamer_algo.py, Dreamer.loss and optimize_agent; dreamer/utils/
module.py, FreezeParameters) starts the imagination from the detached posteriors and freezes
the world model and value parameters while the actor loss is built.

The environment is a tiny batched 2-D point mass (position and velocity, actions in [-1, 1]^2,
reward minus the distance to the origin) seen through a fixed random projection plus noise, so
the observation is an 8-d vector; the encoder and decoder are MLPs instead of convolutions.
Phase 1 (prefill and pretrain): a few random-action episodes fill the episode buffer and the
agent runs `pretrain` full training steps in its own loop. Phase 2 (main loop): each iteration
collects one episode with the actor's sampled action plus Gaussian exploration noise (under
torch.no_grad(), carrying the RSSM posterior and the previous action), then runs `train_steps`
training steps. Each training step: the world model (encoder, RSSM, decoder, reward head) is
updated with its own Adam and gradient-norm clipping; imagination starts from the detached
posteriors with the world model frozen; the lambda-returns (bootstrapped by the frozen value
head) train the actor through the reparameterised actions and the differentiable RSSM
transitions; the value head regresses the detached returns on the detached imagined features.
Learning rates are scaled up for the tiny run.
Bug: the reward head is left out of the world-model parameter list, so the model Adam never
updates it and the imagined rewards that drive the actor stay those of a random network.
"""
import argparse
import contextlib

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Independent, Normal, kl_divergence

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--obs_dim", type=int, default=8)
parser.add_argument("--act_dim", type=int, default=2)
parser.add_argument("--ep_len", type=int, default=20)
parser.add_argument("--prefill_episodes", type=int, default=5)
parser.add_argument("--pretrain", type=int, default=15)
parser.add_argument("--iterations", type=int, default=3)
parser.add_argument("--train_steps", type=int, default=7)
parser.add_argument("--batch_size", type=int, default=8)
parser.add_argument("--batch_length", type=int, default=8)
parser.add_argument("--horizon", type=int, default=5)
parser.add_argument("--deter", type=int, default=32)
parser.add_argument("--stoch", type=int, default=8)
parser.add_argument("--units", type=int, default=32)
parser.add_argument("--free_nats", type=float, default=3.0)
parser.add_argument("--kl_scale", type=float, default=1.0)
parser.add_argument("--discount", type=float, default=0.99)
parser.add_argument("--disclam", type=float, default=0.95)
parser.add_argument("--model_lr", type=float, default=3e-3)
parser.add_argument("--value_lr", type=float, default=1e-3)
parser.add_argument("--actor_lr", type=float, default=1e-3)
parser.add_argument("--grad_clip", type=float, default=100.0)
parser.add_argument("--expl_amount", type=float, default=0.3)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)


class PointMass:
    """Batched 2-D point mass; the agent sees a noisy random projection of its state."""

    def __init__(self, obs_dim):
        self.proj = torch.randn(4, obs_dim) / 2.0

    def observe(self):
        state = torch.cat([self.pos, self.vel], -1)
        noise = 0.05 * torch.randn(state.shape[0], self.proj.shape[1])
        return torch.tanh(state @ self.proj) + noise

    def reset(self, n):
        self.pos = (torch.rand(n, 2) * 2 - 1) * 1.5
        self.vel = torch.zeros(n, 2)
        return self.observe()

    def step(self, action):
        self.vel = 0.7 * self.vel + 0.3 * action
        self.pos = (self.pos + 0.5 * self.vel).clamp(-2.0, 2.0)
        reward = -self.pos.norm(dim=-1)
        return self.observe(), reward


def mlp(n_in, n_out, units, layers):
    mods, width = [], n_in
    for _ in range(layers):
        mods += [nn.Linear(width, units), nn.ELU()]
        width = units
    mods.append(nn.Linear(width, n_out))
    return nn.Sequential(*mods)


class RSSM(nn.Module):
    def __init__(self, stoch, deter, hidden, act_dim, embed_dim):
        super().__init__()
        self.stoch, self.deter = stoch, deter
        self.img1 = nn.Linear(stoch + act_dim, hidden)
        self.cell = nn.GRUCell(hidden, deter)
        self.img2 = nn.Linear(deter, hidden)
        self.img3 = nn.Linear(hidden, 2 * stoch)
        self.obs1 = nn.Linear(deter + embed_dim, hidden)
        self.obs2 = nn.Linear(hidden, 2 * stoch)

    def initial(self, batch):
        z = torch.zeros(batch, self.stoch)
        return {"mean": z, "std": z, "stoch": z, "deter": torch.zeros(batch, self.deter)}

    @staticmethod
    def _stats(x):
        mean, std = x.chunk(2, -1)
        std = F.softplus(std) + 0.1
        return mean, std, mean + std * torch.randn_like(std)

    def img_step(self, prev, action):
        x = F.elu(self.img1(torch.cat([prev["stoch"], action], -1)))
        deter = self.cell(x, prev["deter"])
        mean, std, stoch = self._stats(self.img3(F.elu(self.img2(deter))))
        return {"mean": mean, "std": std, "stoch": stoch, "deter": deter}

    def obs_step(self, prev, action, embed):
        prior = self.img_step(prev, action)
        x = F.elu(self.obs1(torch.cat([prior["deter"], embed], -1)))
        mean, std, stoch = self._stats(self.obs2(x))
        post = {"mean": mean, "std": std, "stoch": stoch, "deter": prior["deter"]}
        return post, prior

    def observe(self, embed, action):
        state = self.initial(embed.shape[0])
        posts, priors = [], []
        for t in range(embed.shape[1]):
            state, prior = self.obs_step(state, action[:, t], embed[:, t])
            posts.append(state)
            priors.append(prior)
        stack = lambda seq: {k: torch.stack([s[k] for s in seq], 1) for k in seq[0]}
        return stack(posts), stack(priors)


def get_feat(state):
    return torch.cat([state["stoch"], state["deter"]], -1)


def get_dist(state):
    return Independent(Normal(state["mean"], state["std"]), 1)


class ActionDecoder(nn.Module):
    def __init__(self, feat_dim, act_dim, units, init_std=5.0, min_std=1e-4, mean_scale=5.0):
        super().__init__()
        self.net = mlp(feat_dim, 2 * act_dim, units, 2)
        self.raw_init_std = torch.log(torch.expm1(torch.tensor(init_std))).item()
        self.min_std, self.mean_scale = min_std, mean_scale

    def forward(self, feat):
        mean, std = self.net(feat).chunk(2, -1)
        mean = self.mean_scale * torch.tanh(mean / self.mean_scale)
        std = F.softplus(std + self.raw_init_std) + self.min_std
        return torch.tanh(Normal(mean, std).rsample())


@contextlib.contextmanager
def freeze(modules):
    params = [p for m in modules for p in m.parameters()]
    flags = [p.requires_grad for p in params]
    for p in params:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p, flag in zip(params, flags):
            p.requires_grad_(flag)


def lambda_return(reward, value, pcont, bootstrap, lambda_):
    next_values = torch.cat([value[1:], bootstrap[None]], 0)
    inputs = reward + pcont * next_values * (1 - lambda_)
    last, outputs = bootstrap, []
    for t in reversed(range(reward.shape[0])):
        last = inputs[t] + pcont[t] * lambda_ * last
        outputs.append(last)
    return torch.stack(outputs[::-1], 0)


env = PointMass(args.obs_dim)
feat_dim = args.stoch + args.deter
encoder = mlp(args.obs_dim, args.units, args.units, 1)
rssm = RSSM(args.stoch, args.deter, args.units, args.act_dim, args.units)
decoder = mlp(feat_dim, args.obs_dim, args.units, 2)
reward_model = mlp(feat_dim, 1, args.units, 2)
value_model = mlp(feat_dim, 1, args.units, 3)
actor = ActionDecoder(feat_dim, args.act_dim, args.units)

model_modules = [encoder, rssm, decoder, reward_model]
model_params = [p for m in (encoder, rssm, decoder) for p in m.parameters()]
model_opt = torch.optim.Adam(model_params, lr=args.model_lr)
actor_opt = torch.optim.Adam(actor.parameters(), lr=args.actor_lr)
value_opt = torch.optim.Adam(value_model.parameters(), lr=args.value_lr)

episodes = []


def collect_episode(policy):
    obs = env.reset(1)
    ep_obs, ep_act, ep_rew = [obs], [torch.zeros(1, args.act_dim)], [torch.zeros(1)]
    state = None
    for _ in range(args.ep_len):
        action, state = policy(obs, state)
        obs, reward = env.step(action)
        ep_obs.append(obs)
        ep_act.append(action)
        ep_rew.append(reward)
    episodes.append({"obs": torch.cat(ep_obs), "action": torch.cat(ep_act),
                     "reward": torch.cat(ep_rew)})
    return torch.cat(ep_rew).sum().item()


def random_policy(obs, state):
    return torch.rand(1, args.act_dim) * 2 - 1, None


@torch.no_grad()
def agent_policy(obs, state):
    if state is None:
        latent, action = rssm.initial(1), torch.zeros(1, args.act_dim)
    else:
        latent, action = state
    latent, _ = rssm.obs_step(latent, action, encoder(obs))
    action = actor(get_feat(latent))
    action = (action + args.expl_amount * torch.randn_like(action)).clamp(-1.0, 1.0)
    return action, (latent, action)


def sample_batch():
    obs, act, rew = [], [], []
    for _ in range(args.batch_size):
        ep = episodes[torch.randint(len(episodes), ()).item()]
        start = torch.randint(ep["obs"].shape[0] - args.batch_length + 1, ()).item()
        sl = slice(start, start + args.batch_length)
        obs.append(ep["obs"][sl])
        act.append(ep["action"][sl])
        rew.append(ep["reward"][sl])
    return torch.stack(obs), torch.stack(act), torch.stack(rew)


def imagine_ahead(post):
    start = {k: v.detach().reshape(-1, v.shape[-1]) for k, v in post.items()}
    state, feats = start, []
    for _ in range(args.horizon):
        action = actor(get_feat(state).detach())
        state = rssm.img_step(state, action)
        feats.append(get_feat(state))
    return torch.stack(feats, 0)


def train_step():
    obs, action, reward = sample_batch()
    embed = encoder(obs)
    post, prior = rssm.observe(embed, action)
    feat = get_feat(post)
    image_like = Independent(Normal(decoder(feat), 1.0), 1).log_prob(obs).mean()
    reward_like = Normal(reward_model(feat).squeeze(-1), 1.0).log_prob(reward).mean()
    div = kl_divergence(get_dist(post), get_dist(prior)).mean()
    div = torch.clamp(div, min=args.free_nats)
    model_loss = args.kl_scale * div - image_like - reward_like
    model_opt.zero_grad()
    model_loss.backward()
    nn.utils.clip_grad_norm_(model_params, args.grad_clip)
    model_opt.step()

    with freeze(model_modules):
        imag_feat = imagine_ahead(post)
    with freeze(model_modules + [value_model]):
        imag_reward = reward_model(imag_feat).squeeze(-1)
        value = value_model(imag_feat).squeeze(-1)
    pcont = args.discount * torch.ones_like(imag_reward)
    returns = lambda_return(imag_reward[:-1], value[:-1], pcont[:-1], value[-1], args.disclam)
    discount = torch.cumprod(torch.cat([torch.ones_like(pcont[:1]), pcont[:-2]], 0), 0).detach()
    actor_loss = -(discount * returns).mean()
    actor_opt.zero_grad()
    actor_loss.backward()
    nn.utils.clip_grad_norm_(actor.parameters(), args.grad_clip)
    actor_opt.step()

    value_pred = value_model(imag_feat.detach())[:-1].squeeze(-1)
    target = returns.detach()
    value_loss = -(discount * Normal(value_pred, 1.0).log_prob(target)).mean()
    value_opt.zero_grad()
    value_loss.backward()
    nn.utils.clip_grad_norm_(value_model.parameters(), args.grad_clip)
    value_opt.step()
    return model_loss.item(), actor_loss.item(), value_loss.item()


# Phase 1: prefill the buffer with random episodes, then pretrain.
for _ in range(args.prefill_episodes):
    collect_episode(random_policy)
for step in range(args.pretrain):
    losses = train_step()
    if step % 10 == 0 or step == args.pretrain - 1:
        print(f"pretrain {step:3d} model {losses[0]:.3f} actor {losses[1]:.3f} "
              f"value {losses[2]:.3f}")

# Phase 2: alternate collecting an episode with the agent and training.
for it in range(args.iterations):
    ep_return = collect_episode(agent_policy)
    for step in range(args.train_steps):
        losses = train_step()
    print(f"iter {it} return {ep_return:.2f} model {losses[0]:.3f} actor {losses[1]:.3f} "
          f"value {losses[2]:.3f}")

if args.out:
    torch.save({"encoder": encoder.state_dict(), "rssm": rssm.state_dict(),
                "decoder": decoder.state_dict(), "reward_model": reward_model.state_dict(),
                "value_model": value_model.state_dict(), "actor": actor.state_dict()}, args.out)
