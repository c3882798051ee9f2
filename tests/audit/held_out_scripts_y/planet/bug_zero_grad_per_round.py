"""PlaNet: a tiny recurrent state-space model trained from rendered observations, data from CEM.

Paper: D. Hafner, T. Lillicrap, I. Fischer, R. Villegas, D. Ha, H. Lee, J. Davidson,
"Learning Latent Dynamics for Planning from Pixels", ICML 2019, arXiv:1811.04551.
Reference implementation: Kaixhin/PlaNet, models.py (TransitionModel, ObservationModel,
RewardModel, Encoder), planner.py (MPCPlanner) and main.py (model fitting loop,
update_belief_and_act); original code google-research/planet.

The environment is a 2-D point mass pushed by a bounded force; the observation is a 6x6
rendering of a Gaussian blob at its position (flattened) and the reward is high near a goal.
The RSSM has a deterministic GRU belief h_t and a stochastic state s_t: the prior p(s_t | h_t)
comes from the belief alone, the posterior q(s_t | h_t, o_t) also sees the encoded observation.
Training chunks are unrolled from zero belief/state with posterior samples (reparameterised),
and one Adam over transition model, observation decoder, reward head and encoder minimises
observation MSE + reward MSE + max(KL(q || p), free nats), with the gradient flowing through
the whole unroll (beliefs and sampled states across time); clip_grad_norm_ after backward.
Data: a few random seed episodes, then rounds of model fitting followed by one episode collected
by a cross-entropy-method planner that filters the belief with the posterior and rolls candidate
action sequences through the prior and the reward head; all of data collection runs under
torch.no_grad(), so acting never touches the model's gradients.
Bug: optimiser.zero_grad() is called once per collect round, before the model-fitting loop,
instead of before every backward, so gradients of all earlier updates of the round pile up
in .grad and every Adam step uses their running sum.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Normal, kl_divergence

OBS, ACT, EP_LEN = 36, 2, 20
GOAL = torch.tensor([0.5, 0.5])


class PointMass:
    def __init__(self):
        g = torch.linspace(-1.0, 1.0, 6)
        self.grid = torch.stack(torch.meshgrid(g, g, indexing="ij"), -1).reshape(-1, 2)

    def render(self):
        return torch.exp(-((self.grid - self.pos) ** 2).sum(-1) / 0.1)

    def reset(self):
        self.pos = 2 * torch.rand(2) - 1
        self.vel = torch.zeros(2)
        return self.render()

    def step(self, action):
        self.vel = 0.7 * self.vel + 0.3 * action.clamp(-1, 1)
        self.pos = (self.pos + 0.3 * self.vel).clamp(-1, 1)
        reward = torch.exp(-((self.pos - GOAL) ** 2).sum() / 0.2)
        return self.render(), reward


class TransitionModel(nn.Module):
    def __init__(self, belief, state, hidden, embed, min_std=0.1):
        super().__init__()
        self.min_std = min_std
        self.fc_state_action = nn.Linear(state + ACT, hidden)
        self.rnn = nn.GRUCell(hidden, belief)
        self.fc_prior = nn.Sequential(nn.Linear(belief, hidden), nn.ELU(),
                                      nn.Linear(hidden, 2 * state))
        self.fc_post = nn.Sequential(nn.Linear(belief + embed, hidden), nn.ELU(),
                                     nn.Linear(hidden, 2 * state))

    def _dist(self, out):
        mean, std = out.chunk(2, dim=-1)
        return mean, F.softplus(std) + self.min_std

    def forward(self, state, actions, belief, embeds=None):
        beliefs, prior_m, prior_s, post_m, post_s, states = [], [], [], [], [], []
        for t in range(actions.shape[0]):
            hidden = F.elu(self.fc_state_action(torch.cat([state, actions[t]], -1)))
            belief = self.rnn(hidden, belief)
            pm, ps = self._dist(self.fc_prior(belief))
            if embeds is None:
                state = pm + ps * torch.randn_like(pm)
            else:
                qm, qs = self._dist(self.fc_post(torch.cat([belief, embeds[t]], -1)))
                state = qm + qs * torch.randn_like(qm)
                post_m.append(qm)
                post_s.append(qs)
            beliefs.append(belief)
            prior_m.append(pm)
            prior_s.append(ps)
            states.append(state)
        out = [torch.stack(beliefs), torch.stack(states), torch.stack(prior_m),
               torch.stack(prior_s)]
        if embeds is not None:
            out += [torch.stack(post_m), torch.stack(post_s)]
        return out


class Head(nn.Module):
    def __init__(self, inp, hidden, out):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(inp, hidden), nn.ELU(), nn.Linear(hidden, out))

    def forward(self, *xs):
        return self.net(torch.cat(xs, -1))


def cem_plan(transition, reward_model, belief, state, horizon, iters, cands, top):
    belief = belief.expand(cands, -1)
    state = state.expand(cands, -1)
    mean, std = torch.zeros(horizon, 1, ACT), torch.ones(horizon, 1, ACT)
    for _ in range(iters):
        actions = (mean + std * torch.randn(horizon, cands, ACT)).clamp(-1, 1)
        beliefs, states = transition(state, actions, belief)[:2]
        returns = reward_model(beliefs, states).squeeze(-1).sum(0)
        best = actions[:, returns.topk(top).indices]
        mean, std = best.mean(1, keepdim=True), best.std(1, unbiased=False, keepdim=True)
    return mean[0, 0]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=str, default=None)
    p.add_argument("--seed_episodes", type=int, default=3)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--collect_interval", type=int, default=25)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--chunk", type=int, default=8)
    p.add_argument("--free_nats", type=float, default=0.3)
    p.add_argument("--action_noise", type=float, default=0.3)
    args = p.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    belief_size, state_size, hidden, embed = 16, 4, 32, 16
    env = PointMass()
    episodes = []

    def run_episode(policy):
        obs, acts, rews = [env.reset()], [], []
        for _ in range(EP_LEN):
            a = policy(obs[-1])
            o, r = env.step(a)
            obs.append(o)
            acts.append(a.clamp(-1, 1))
            rews.append(r)
        episodes.append((torch.stack(obs[:-1]), torch.stack(acts), torch.stack(rews)))
        return torch.stack(rews).sum().item()

    for _ in range(args.seed_episodes):
        run_episode(lambda o: 2 * torch.rand(ACT) - 1)

    transition = TransitionModel(belief_size, state_size, hidden, embed)
    observation_model = Head(belief_size + state_size, hidden, OBS)
    reward_model = Head(belief_size + state_size, hidden, 1)
    encoder = nn.Sequential(nn.Linear(OBS, hidden), nn.ELU(), nn.Linear(hidden, embed))
    param_list = (list(transition.parameters()) + list(observation_model.parameters())
                  + list(reward_model.parameters()) + list(encoder.parameters()))
    optimiser = torch.optim.Adam(param_list, lr=3e-3, eps=1e-4)

    def sample_chunks():
        obs, act, rew = [], [], []
        for _ in range(args.batch):
            o, a, r = episodes[torch.randint(len(episodes), ()).item()]
            s = torch.randint(EP_LEN - args.chunk + 1, ()).item()
            obs.append(o[s:s + args.chunk])
            act.append(a[s:s + args.chunk])
            rew.append(r[s:s + args.chunk])
        return torch.stack(obs, 1), torch.stack(act, 1), torch.stack(rew, 1)

    for rnd in range(args.rounds):
        optimiser.zero_grad()
        for it in range(args.collect_interval):
            observations, actions, rewards = sample_chunks()
            init_belief = torch.zeros(args.batch, belief_size)
            init_state = torch.zeros(args.batch, state_size)
            beliefs, states, prior_m, prior_s, post_m, post_s = transition(
                init_state, actions[:-1], init_belief, encoder(observations[1:]))
            obs_loss = F.mse_loss(observation_model(beliefs, states), observations[1:],
                                  reduction="none").sum(-1).mean()
            reward_loss = F.mse_loss(reward_model(beliefs, states).squeeze(-1), rewards[:-1])
            kl = kl_divergence(Normal(post_m, post_s), Normal(prior_m, prior_s)).sum(-1)
            kl_loss = torch.clamp(kl, min=args.free_nats).mean()
            (obs_loss + reward_loss + kl_loss).backward()
            nn.utils.clip_grad_norm_(param_list, 100.0)
            optimiser.step()
            if it % 15 == 0:
                print(f"round {rnd} it {it:3d} obs {obs_loss.item():.4f} "
                      f"reward {reward_loss.item():.4f} kl {kl_loss.item():.4f}")

        with torch.no_grad():
            filt = {"belief": torch.zeros(1, belief_size),
                    "state": torch.zeros(1, state_size), "action": torch.zeros(1, ACT)}

            def policy(obs):
                b, s = transition(filt["state"], filt["action"].unsqueeze(0), filt["belief"],
                                  encoder(obs).view(1, 1, -1))[:2]
                filt["belief"], filt["state"] = b[0], s[0]
                a = cem_plan(transition, reward_model, b[0], s[0],
                             horizon=5, iters=3, cands=64, top=8)
                a = (a + args.action_noise * torch.randn(ACT)).clamp(-1, 1)
                filt["action"] = a.view(1, ACT)
                return a

            ret = run_episode(policy)
        print(f"round {rnd} collected return {ret:.3f}")

    if args.out is not None:
        torch.save({"transition": transition.state_dict(),
                    "observation_model": observation_model.state_dict(),
                    "reward_model": reward_model.state_dict(),
                    "encoder": encoder.state_dict()}, args.out)


if __name__ == "__main__":
    main()
