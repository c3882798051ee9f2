"""Self-predictive representations (SPR) at a tiny size, written after Schwarzer, Anand, Goel,
Hjelm, Courville and Bachman, "Data-Efficient Reinforcement Learning with Self-Predictive
Representations" (ICLR 2021, arXiv:2007.05929), section 2 and algorithm 1, with mila-iqia/spr
(https://github.com/mila-iqia/spr, src/models.py SPRCatDqnModel: an online encoder conv and a Q head
whose first linear layer is also the online projection (QL1Head, the default q_l1 classifier), a
linear prediction head global_final_classifier, a TransitionModel on the latent stacked with one-hot
action planes, and, with momentum_encoder, a target encoder and a target projection made by
copy.deepcopy with requires_grad = False; do_spr_loss: the latents rolled out over the jumps, the
targets under torch.no_grad(), spr_loss's normalised L2, and update_state_dict(target,
online.state_dict(), momentum_tau) for both target parts, here after each step; src/algos.py
SPRCategoricalDQN: no update before min_steps_learn, the Q-learning loss plus model_spr_weight times
the SPR loss of the rolled-out steps, one Adam over the model's parameters, gradient norms clipped,
agent.update_target every target_update_interval updates; dqn_rl_loss: an n-step double-DQN target
from the target network under torch.no_grad(), the Huber loss). Two phases as in min_steps_learn:
random actions that only fill the replay buffer, then one update per environment step. No
distributional head, noisy nets, augmentation or prioritised replay. A gridworld of 2x5x5 images.
Injected bug: the target projection is left aliased to the online one (self.global_target_classifier
= self.global_classifier without SPRCatDqnModel's copy.deepcopy), so it is the online Q head, and
the loop that sets requires_grad = False on the target parts freezes that head: neither loss trains
it, and its momentum update writes it onto itself; second phase of a two-phase script."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--min-steps-learn", type=int, default=40)
parser.add_argument("--steps", type=int, default=24)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--jumps", type=int, default=3)
parser.add_argument("--n-step", type=int, default=3)
parser.add_argument("--gamma", type=float, default=0.95)
parser.add_argument("--momentum-tau", type=float, default=0.01)
parser.add_argument("--model-spr-weight", type=float, default=5.0)
parser.add_argument("--target-update-interval", type=int, default=2)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

size, n_actions, channels, hidden, max_len = 5, 4, 8, 32, 12
moves = torch.tensor([[0, 1], [0, -1], [1, 0], [-1, 0]])


def renormalize(x):
    flat = x.flatten(1)
    low, high = flat.min(1, keepdim=True)[0], flat.max(1, keepdim=True)[0]
    return ((flat - low) / (high - low + 1e-5)).view_as(x)


class QL1Projection(nn.Module):
    def __init__(self, head):
        super().__init__()
        self.head = head

    def forward(self, latent):
        return self.head[1](latent.flatten(1))


class TransitionModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Conv2d(channels + n_actions, hidden, 3, padding=1),
                                     nn.ReLU(), nn.Conv2d(hidden, channels, 3, padding=1)])

    def forward(self, latent, action):
        planes = F.one_hot(action, n_actions).float()[:, :, None, None].expand(-1, -1, 3, 3)
        x = torch.cat([latent, planes], 1)
        for layer in self.layers:
            x = layer(x)
        return renormalize(F.relu(x))


class SPRModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(2, 16, 3, padding=1), nn.ReLU(),
                                  nn.Conv2d(16, channels, 3, stride=2, padding=1), nn.ReLU())
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(channels * 9, hidden), nn.ReLU(),
                                  nn.Linear(hidden, n_actions))
        self.dynamics_model = TransitionModel()
        self.global_classifier = QL1Projection(self.head)
        self.global_target_classifier = self.global_classifier
        self.global_final_classifier = nn.Linear(hidden, hidden)
        self.target_encoder = copy.deepcopy(self.conv)
        for param in (list(self.target_encoder.parameters())
                      + list(self.global_target_classifier.parameters())):
            param.requires_grad = False

    def forward(self, obs):
        return self.head(renormalize(self.conv(obs)))


model = SPRModel()
target_model = copy.deepcopy(model)
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, eps=1.5e-4)
buffer = {k: [] for k in ("obs", "action", "reward", "done")}


def sample_batch():
    span = max(args.jumps, args.n_step) + 1
    rows = torch.randint(len(buffer["obs"]) - span + 1, (args.batch_size, 1)) + torch.arange(span)
    return (torch.stack(buffer["obs"])[rows],
            *[torch.tensor(buffer[k])[rows] for k in ("action", "reward", "done")])


def loss_fn(obs, action, reward, done):
    # Q-learning: n-step double DQN against the target network
    latent = renormalize(model.conv(obs[:, 0]))
    qs = model.head(latent).gather(1, action[:, :1]).squeeze(1)
    alive = torch.cumprod(torch.cat([torch.ones(len(done), 1), 1 - done[:, :-1]], 1), 1)
    discounts = args.gamma ** torch.arange(args.n_step).float()
    return_ = (reward * alive)[:, :args.n_step] @ discounts
    with torch.no_grad():
        next_obs = obs[:, args.n_step]
        next_a = model(next_obs).argmax(1, keepdim=True)
        target_q = target_model(next_obs).gather(1, next_a).squeeze(1)
        y = return_ + alive[:, args.n_step] * args.gamma ** args.n_step * target_q
    rl_loss = F.smooth_l1_loss(qs, y)
    # SPR: roll the transition model out in latent space, predict the target projections
    pred_latents = []
    for j in range(1, args.jumps + 1):
        latent = model.dynamics_model(latent, action[:, j - 1])
        pred_latents.append(latent)
    pred_latents = torch.stack(pred_latents, 1).flatten(0, 1)
    preds = model.global_final_classifier(model.global_classifier(pred_latents))
    with torch.no_grad():
        target_obs = obs[:, 1:args.jumps + 1].flatten(0, 1)
        targets = model.global_target_classifier(renormalize(model.target_encoder(target_obs)))
    preds, targets = F.normalize(preds, dim=-1, eps=1e-3), F.normalize(targets, dim=-1, eps=1e-3)
    model_spr = (preds - targets).pow(2).sum(-1).view(-1, args.jumps) * alive[:, 1:args.jumps + 1]
    return rl_loss, model_spr.mean()


agent, goal, t, updates = torch.randint(0, size, (2,)), torch.randint(0, size, (2,)), 0, 0
for step in range(args.min_steps_learn + args.steps):
    obs = torch.zeros(2, size, size)  # the agent's and the goal's cells
    obs[0, agent[0], agent[1]] = obs[1, goal[0], goal[1]] = 1.0
    with torch.no_grad():
        greedy = model(obs.unsqueeze(0)).argmax().item()
    explore = step < args.min_steps_learn or torch.rand(()).item() < 0.2  # epsilon-greedy
    action = torch.randint(0, n_actions, ()).item() if explore else greedy
    agent, t = (agent + moves[action]).clamp(0, size - 1), t + 1
    reached = bool((agent == goal).all())
    done = reached or t == max_len
    for k, v in zip(buffer, (obs, action, float(reached), float(done))):
        buffer[k].append(v)
    if done:
        agent, goal, t = torch.randint(0, size, (2,)), torch.randint(0, size, (2,)), 0
    if step >= args.min_steps_learn:  # phase 2: one update per environment step
        rl_loss, model_spr_loss = loss_fn(*sample_batch())
        total_loss = rl_loss + args.model_spr_weight * model_spr_loss
        optimizer.zero_grad()
        total_loss.backward()
        stem = list(model.conv.parameters()) + list(model.head.parameters())
        torch.nn.utils.clip_grad_norm_(stem, 10.0)
        torch.nn.utils.clip_grad_norm_(model.dynamics_model.parameters(), 10.0)
        optimizer.step()
        with torch.no_grad():  # update_state_dict(target, online.state_dict(), momentum_tau)
            for online, target in ((model.conv, model.target_encoder),
                                   (model.global_classifier, model.global_target_classifier)):
                for p, p_target in zip(online.parameters(), target.parameters()):
                    p_target.copy_(args.momentum_tau * p + (1 - args.momentum_tau) * p_target)
        updates += 1
        if updates % args.target_update_interval == 0:
            target_model.load_state_dict(model.state_dict())
        print(f"step {step} rl {rl_loss.item():.4f} spr {model_spr_loss.item():.4f}")

if args.out:
    torch.save({"model": model.state_dict()}, args.out)
