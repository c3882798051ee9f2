"""Proto-RL, task-agnostic pre-training with prototypical representations and then downstream
RL, on a tiny 2-D point-mass task, written after Yarats, Fergus, Lazaric and Pinto,
"Reinforcement Learning with Prototypical Representations" (ICML 2021, arXiv:2102.11271): in
the reward-free phase an encoder, a predictor and a projector are trained with a set of unit-norm
prototypes by a self-supervised loss, the cross-entropy between the online network's softmax
over prototype scores of x_t and Sinkhorn-Knopp (equipartitioned) assignments of the next
observation x_{t+1} computed by slowly moving EMA target copies of the encoder and predictor,
the assignments being fixed targets; the exploration policy is trained by DDPG on an intrinsic
reward, the distance from the embedded next observation to its k-th nearest neighbour in a
queue of prototype-sampled candidates; then, in the downstream phase, the pre-trained actor is
fine-tuned with a fresh critic on the task reward over the frozen pre-trained encoder. With the
re-implementation in the Unsupervised RL Benchmark, rll-research/url_benchmark
(https://github.com/rll-research/url_benchmark, agent/proto.py: sinkhorn_knopp runs three
row/column normalisations of exp(scores); ProtoAgent.normalize_protos renormalises the
prototype weights in place; update_proto takes log_softmax(protos(normalize(projector(
predictor(encoder(obs))))) / tau) and, under torch.no_grad(), the encoder_target/predictor_target
scores of next_obs and their Sinkhorn codes q_t, loss -(q_t * log_p_s).sum(1).mean() on one
Adam over the encoder, predictor, projector and protos; compute_intr_reward samples one
candidate per prototype into the queue and returns the top-k distance under no_grad; update
passes the encoded obs to update_critic and update_actor detached and soft-updates the encoder,
predictor and critic targets; init_from copies the encoder, actor and prototype heads; and
agent/ddpg.py DDPGAgent.update_critic / update_actor, the target Q from critic_target under
torch.no_grad(), the critic target a separate copy moved by utils.soft_update_params), whose
steps this script follows. Observations are the position and its sines, actions move the mass
by 0.1 * a, eight environments run in parallel, and the task reward is minus the distance to a
goal; the networks are small MLPs.
Bug: the target scores and Sinkhorn codes q_t are computed outside torch.no_grad()."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--pretrain-steps", type=int, default=100)
parser.add_argument("--finetune-steps", type=int, default=80)
parser.add_argument("--seed-steps", type=int, default=10, help="uniform random actions first")
parser.add_argument("--n-envs", type=int, default=8)
parser.add_argument("--episode-len", type=int, default=25)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--tau", type=float, default=0.1, help="softmax temperature of the scores")
parser.add_argument("--encoder-target-tau", type=float, default=0.05)
parser.add_argument("--critic-target-tau", type=float, default=0.01)
parser.add_argument("--num-protos", type=int, default=8)
parser.add_argument("--queue-size", type=int, default=32)
parser.add_argument("--topk", type=int, default=3)
parser.add_argument("--stddev", type=float, default=0.2)
parser.add_argument("--stddev-clip", type=float, default=0.3)
parser.add_argument("--discount", type=float, default=0.9)
parser.add_argument("--out", default=None, help="where to save the pre-trained and fine-tuned nets")
args = parser.parse_args()
torch.manual_seed(args.seed)
torch.set_num_threads(1)  # tiny networks: one thread is fastest and reproducible

obs_dim, action_dim, repr_dim, pred_dim, hidden = 4, 2, 16, 16, 64
goal = torch.tensor([0.7, -0.5])


def env_reset(n):
    return torch.rand(n, 2) * 0.6 - 0.3


def observe(state):
    return torch.cat([state, torch.sin(3 * state)], 1)


def env_step(state, action):
    next_state = (state + 0.1 * action).clamp(-1, 1)
    return next_state, -(next_state - goal).norm(dim=1, keepdim=True)


class Actor(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(repr_dim, hidden), nn.LayerNorm(hidden), nn.Tanh())
        self.policy = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(),
                                    nn.Linear(hidden, action_dim))

    def forward(self, h):
        return torch.tanh(self.policy(self.trunk(h)))


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(repr_dim + action_dim, hidden), nn.LayerNorm(hidden),
                                   nn.Tanh())
        self.Q1 = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))
        self.Q2 = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, h, action):
        x = self.trunk(torch.cat([h, action], -1))
        return self.Q1(x), self.Q2(x)


def sample_action(mu, clip=None):
    """Clipped Gaussian exploration around mu, clamped to [-1, 1] with a straight-through grad."""
    eps = args.stddev * torch.randn_like(mu)
    if clip is not None:
        eps = eps.clamp(-clip, clip)
    x = mu + eps
    return x - x.detach() + x.clamp(-1 + 1e-6, 1 - 1e-6).detach()


def sinkhorn_knopp(scores):
    """Equipartitioned soft assignments of the batch to the prototypes (B x K)."""
    Q = torch.exp(scores - scores.max()).T
    Q = Q / Q.sum()
    r = torch.ones(Q.shape[0]) / Q.shape[0]
    c = torch.ones(Q.shape[1]) / Q.shape[1]
    for _ in range(3):
        Q = Q * (r / Q.sum(1)).unsqueeze(1)
        Q = Q * (c / Q.sum(0)).unsqueeze(0)
    return (Q / Q.sum(0, keepdim=True)).T


def update_critic(critic, critic_target, critic_opt, actor, h, action, reward, next_h):
    with torch.no_grad():
        next_action = sample_action(actor(next_h), args.stddev_clip)
        target_q1, target_q2 = critic_target(next_h, next_action)
        target_q = reward + args.discount * torch.min(target_q1, target_q2)
    q1, q2 = critic(h, action)
    critic_loss = F.mse_loss(q1, target_q) + F.mse_loss(q2, target_q)
    critic_opt.zero_grad()
    critic_loss.backward()
    critic_opt.step()
    return critic_loss


def update_actor(actor, actor_opt, critic, h):
    q1, q2 = critic(h, sample_action(actor(h), args.stddev_clip))
    actor_loss = -torch.min(q1, q2).mean()
    actor_opt.zero_grad()
    actor_loss.backward()
    actor_opt.step()
    return actor_loss


def soft_update(net, target_net, tau):
    with torch.no_grad():
        for p, tp in zip(net.parameters(), target_net.parameters()):
            tp.copy_(tau * p + (1 - tau) * tp)


def collect(actor, state, step, replay, random_actions):
    """One step of all environments into the replay (obs, action, reward, next obs)."""
    obs = observe(state)
    with torch.no_grad():
        action = sample_action(actor(encoder(obs)))
    if random_actions:
        action = torch.rand(args.n_envs, action_dim) * 2 - 1
    next_state, reward = env_step(state, action)
    rows = slice(step * args.n_envs, (step + 1) * args.n_envs)
    for buf, x in zip(replay, (obs, action, reward, observe(next_state))):
        buf[rows] = x
    if (step + 1) % args.episode_len == 0:
        next_state = env_reset(args.n_envs)
    return next_state


def sample_batch(replay, step):
    idx = torch.randint(0, (step + 1) * args.n_envs, (args.batch_size,))
    return (buf[idx] for buf in replay)


# ---- phase 1: task-agnostic pre-training with prototypes and the intrinsic reward ----
encoder = nn.Sequential(nn.Linear(obs_dim, hidden), nn.ReLU(), nn.Linear(hidden, repr_dim))
predictor = nn.Linear(repr_dim, pred_dim)
projector = nn.Sequential(nn.Linear(pred_dim, 32), nn.ReLU(), nn.Linear(32, pred_dim))
protos = nn.Linear(pred_dim, args.num_protos, bias=False)
encoder_target = copy.deepcopy(encoder)
predictor_target = copy.deepcopy(predictor)
actor, critic = Actor(), Critic()
critic_target = copy.deepcopy(critic)
proto_opt = torch.optim.Adam([*encoder.parameters(), *predictor.parameters(),
                              *projector.parameters(), *protos.parameters()], lr=args.lr)
actor_opt = torch.optim.Adam(actor.parameters(), lr=args.lr)
critic_opt = torch.optim.Adam(critic.parameters(), lr=args.lr)
queue = torch.zeros(args.queue_size, pred_dim)
queue_ptr = 0


def normalize_protos():
    with torch.no_grad():
        protos.weight.copy_(F.normalize(protos.weight, dim=1))


def compute_intr_reward(next_obs):
    """Distance to the k-th nearest prototype-sampled candidate in the queue (no gradient)."""
    global queue_ptr
    normalize_protos()
    z = F.normalize(predictor(encoder(next_obs)), dim=1)
    prob = F.softmax(protos(z).T, dim=1)
    candidates = torch.distributions.Categorical(prob).sample()
    queue[queue_ptr:queue_ptr + args.num_protos] = z[candidates]
    queue_ptr = (queue_ptr + args.num_protos) % args.queue_size
    z_to_q = torch.norm(z[:, None, :] - queue[None, :, :], dim=2)
    return torch.topk(z_to_q, args.topk, dim=1, largest=False).values[:, -1:]


replay = [torch.zeros(args.pretrain_steps * args.n_envs, d)
          for d in (obs_dim, action_dim, 1, obs_dim)]
state = env_reset(args.n_envs)
for step in range(args.pretrain_steps):
    state = collect(actor, state, step, replay, step < args.seed_steps)
    if step < args.seed_steps:
        continue
    obs, action, _, next_obs = sample_batch(replay, step)

    # prototype loss: online scores of x_t against Sinkhorn codes of the EMA target's x_{t+1}
    normalize_protos()
    s = F.normalize(projector(predictor(encoder(obs))), dim=1)
    log_p_s = F.log_softmax(protos(s) / args.tau, dim=1)
    with torch.no_grad():
        t = F.normalize(predictor_target(encoder_target(next_obs)), dim=1)
    scores_t = protos(t)
    q_t = sinkhorn_knopp(scores_t / args.tau)
    proto_loss = -(q_t * log_p_s).sum(dim=1).mean()
    proto_opt.zero_grad()
    proto_loss.backward()
    proto_opt.step()

    with torch.no_grad():
        intr_reward = compute_intr_reward(next_obs)
    h, next_h = encoder(obs).detach(), encoder(next_obs).detach()
    critic_loss = update_critic(critic, critic_target, critic_opt, actor, h, action, intr_reward,
                                next_h)
    actor_loss = update_actor(actor, actor_opt, critic, h)
    soft_update(encoder, encoder_target, args.encoder_target_tau)
    soft_update(predictor, predictor_target, args.encoder_target_tau)
    soft_update(critic, critic_target, args.critic_target_tau)
    if step % 40 == 0:
        print(f"pretrain {step} proto {proto_loss.item():.4f} critic {critic_loss.item():.4f} "
              f"actor {actor_loss.item():.4f} intr {intr_reward.mean().item():.4f}")

# ---- phase 2: downstream RL on the task reward, pre-trained actor, frozen encoder ----
ft_actor = copy.deepcopy(actor)
ft_critic = Critic()
ft_critic_target = copy.deepcopy(ft_critic)
ft_actor_opt = torch.optim.Adam(ft_actor.parameters(), lr=args.lr)
ft_critic_opt = torch.optim.Adam(ft_critic.parameters(), lr=args.lr)

replay = [torch.zeros(args.finetune_steps * args.n_envs, d)
          for d in (obs_dim, action_dim, 1, obs_dim)]
state = env_reset(args.n_envs)
for step in range(args.finetune_steps):
    state = collect(ft_actor, state, step, replay, False)
    obs, action, extr_reward, next_obs = sample_batch(replay, step)
    h, next_h = encoder(obs).detach(), encoder(next_obs).detach()
    critic_loss = update_critic(ft_critic, ft_critic_target, ft_critic_opt, ft_actor, h, action,
                                extr_reward, next_h)
    actor_loss = update_actor(ft_actor, ft_actor_opt, ft_critic, h)
    soft_update(ft_critic, ft_critic_target, args.critic_target_tau)
    if step % 40 == 0:
        print(f"finetune {step} critic {critic_loss.item():.4f} actor {actor_loss.item():.4f} "
              f"reward {extr_reward.mean().item():.4f}")

if args.out:
    torch.save({"encoder": encoder.state_dict(), "predictor": predictor.state_dict(),
                "projector": projector.state_dict(), "protos": protos.state_dict(),
                "encoder_target": encoder_target.state_dict(),
                "predictor_target": predictor_target.state_dict(), "actor": actor.state_dict(),
                "critic": critic.state_dict(), "critic_target": critic_target.state_dict(),
                "ft_actor": ft_actor.state_dict(), "ft_critic": ft_critic.state_dict(),
                "ft_critic_target": ft_critic_target.state_dict()}, args.out)
