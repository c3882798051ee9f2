"""Never Give Up (NGU) exploration on a tiny grid world with a noisy-TV distraction, written
after Badia, Sprechmann, Vitvitskyi, Guo, Piot, Kapturowski, Tieleman, Arjovsky, Pritzel, Bolt
and Blundell, "Never Give Up: Learning Directed Exploration Strategies" (ICLR 2020,
arXiv:2002.06038): the intrinsic reward r_int = r_episodic * min(max(alpha, 1), L) multiplies
an episodic novelty, r_episodic = 1 / (sqrt(sum of a kernel over the k nearest neighbours of the
current embedding in the episode's memory) + c), computed on controllable-state embeddings
f(x) trained by inverse dynamics (predict a_t from f(x_t), f(x_{t+1})), by a life-long
modulator alpha = 1 + (err - mean err) / std err from the error of a random network
distillation predictor, and the agent is trained by Q-learning on r = r_ext + beta * r_int, the
intrinsic reward being a fixed number for the RL loss. The paper's agent code is not public;
this script follows the open re-implementations opendilab/DI-engine
(https://github.com/opendilab/DI-engine, ding/reward_model/ngu_reward_model.py:
InverseNetwork embeds obs and next_obs and classifies the action from the concatenation,
EpisodicRewardModel._compute_intrinsic_reward takes the k smallest distances to the episode's
earlier embeddings, divides them by their running mean, subtracts the cluster distance, sums
the kernel eps / (d + eps) and returns 1 / (sqrt(sum) + c), or 0 past the maximum similarity,
and gives 0 to the first steps of an episode; estimate computes it all under torch.no_grad();
RndNetwork freezes the target's parameters (requires_grad = False) and RndRewardModel.estimate
turns the predictor's error into 1 + (err - mean) / std under torch.no_grad(); fusion_reward
takes episodic * clamp(rnd, 1, 5) and adds it, times beta, to the reward) and
RLE-Foundation/rllte (rllte/xplore/reward/ngu.py NGU.compute, the same product with the
modulator clipped to [1, mrs]). Here the distances are squared, as in the paper, the running
means are this batch's means, and the episodic reward is divided by its batch mean as estimate
does; the embeddings and RND errors of one forward pass serve both their own losses and the
intrinsic reward, which is taken from detached copies; the three losses are summed under one
Adam. The grid is 5 x 5, the observation a one-hot position plus four Gaussian noise features,
the extrinsic reward 1 at the far corner; 12 episodes of 16 steps are played per iteration with
an epsilon-greedy Q-network and learned from at once (1-step targets from a target network).
Bug: the RND target is put in .eval() instead of frozen, so the RND loss also trains it."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iterations", type=int, default=50)
parser.add_argument("--n-envs", type=int, default=12)
parser.add_argument("--horizon", type=int, default=16)
parser.add_argument("--beta", type=float, default=0.3, help="weight of the intrinsic reward")
parser.add_argument("--gamma", type=float, default=0.97)
parser.add_argument("--epsilon", type=float, default=0.2)
parser.add_argument("--k", type=int, default=5, help="neighbours in the episodic memory")
parser.add_argument("--max-modulator", type=float, default=5.0, help="L, the clip of alpha")
parser.add_argument("--target-every", type=int, default=5)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--out", default=None, help="where to save the trained networks")
args = parser.parse_args()
torch.manual_seed(args.seed)
torch.set_num_threads(1)  # tiny networks: one thread is fastest and reproducible

grid, n_noise, n_actions, emb_dim, hidden = 5, 4, 4, 16, 64
obs_dim = 2 * grid + n_noise
moves = torch.tensor([[-1, 0], [1, 0], [0, -1], [0, 1]])
kernel_eps, cluster_distance, c_const, max_similarity = 1e-4, 0.008, 1e-3, 8.0


def observe(pos):
    """One-hot row and column plus fresh noise features (a noisy TV nothing controls)."""
    onehot = torch.cat([F.one_hot(pos[:, 0], grid), F.one_hot(pos[:, 1], grid)], 1).float()
    return torch.cat([onehot, torch.randn(len(pos), n_noise)], 1)


def mlp(n_in, n_out):
    return nn.Sequential(nn.Linear(n_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, n_out))


class RND(nn.Module):
    def __init__(self):
        super().__init__()
        self.predictor = mlp(obs_dim, emb_dim)
        self.target = mlp(obs_dim, emb_dim)
        self.target.eval()  # a fixed random network

    def forward(self, x):
        """Squared prediction error per observation, the life-long novelty signal."""
        return (self.predictor(x) - self.target(x)).pow(2).mean(-1)


q_net = mlp(obs_dim, n_actions)
q_target = copy.deepcopy(q_net)
embed = mlp(obs_dim, emb_dim)
inverse_head = nn.Sequential(nn.Linear(2 * emb_dim, hidden), nn.ReLU(),
                             nn.Linear(hidden, n_actions))
rnd = RND()
optimizer = torch.optim.Adam([*q_net.parameters(), *embed.parameters(),
                              *inverse_head.parameters(), *rnd.parameters()], lr=args.lr)


def episodic_reward(emb):
    """r_episodic of reaching obs t+1 (T x N), from its k nearest neighbours among obs 0..t."""
    e = emb.transpose(0, 1)  # N x (T+1) x E
    sq, dot = e.pow(2).sum(-1), e[:, 1:] @ e[:, :-1].transpose(1, 2)
    d2 = (sq[:, 1:, None] + sq[:, None, :-1] - 2 * dot).clamp(min=0)  # squared distances
    steps = torch.arange(args.horizon)
    in_memory = steps[None, :] <= steps[:, None]
    knn = d2.masked_fill(~in_memory, 1e6).topk(args.k, dim=-1, largest=False).values
    has_k = steps >= args.k - 1
    mean_knn = knn[:, has_k].mean()
    d = (knn / (mean_knn + 1e-8) - cluster_distance).clamp(min=0)
    s = (kernel_eps / (d + kernel_eps)).sum(-1).sqrt() + c_const
    r = torch.where((s > max_similarity) | ~has_k, torch.zeros_like(s), 1 / s)
    return (r / (r.mean() + 1e-8)).transpose(0, 1)


def intrinsic_reward(emb, rnd_error):
    alpha = 1 + (rnd_error - rnd_error.mean()) / (rnd_error.std() + 1e-8)
    return episodic_reward(emb) * alpha.clamp(1.0, args.max_modulator)


for it in range(args.iterations):
    # play one episode in every environment with the epsilon-greedy Q-network
    pos = torch.zeros(args.n_envs, 2, dtype=torch.long)
    obs = [observe(pos)]
    actions, r_ext = [], []
    with torch.no_grad():
        for t in range(args.horizon):
            greedy = q_net(obs[-1]).argmax(-1)
            explore = torch.rand(args.n_envs) < args.epsilon
            a = torch.where(explore, torch.randint(0, n_actions, (args.n_envs,)), greedy)
            pos = (pos + moves[a]).clamp(0, grid - 1)
            obs.append(observe(pos))
            actions.append(a)
            r_ext.append(((pos[:, 0] == grid - 1) & (pos[:, 1] == grid - 1)).float())
    obs, actions, r_ext = torch.stack(obs), torch.stack(actions), torch.stack(r_ext)

    # embedding network by inverse dynamics, RND predictor by regression on the fixed target
    emb = embed(obs)
    logits = inverse_head(torch.cat([emb[:-1], emb[1:]], -1))
    inverse_loss = F.cross_entropy(logits.reshape(-1, n_actions), actions.reshape(-1))
    rnd_error = rnd(obs[1:])
    rnd_loss = rnd_error.mean()

    # NGU intrinsic reward of every transition, a constant for the Q-learning loss
    r_int = intrinsic_reward(emb.detach(), rnd_error.detach())

    q_taken = q_net(obs[:-1]).gather(-1, actions.unsqueeze(-1)).squeeze(-1)
    with torch.no_grad():
        next_q = q_target(obs[1:]).max(-1).values
    td_target = r_ext + args.beta * r_int + args.gamma * next_q
    q_loss = F.mse_loss(q_taken, td_target)

    loss = q_loss + inverse_loss + rnd_loss
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if (it + 1) % args.target_every == 0:
        q_target.load_state_dict(q_net.state_dict())
    if it % 20 == 0:
        print(f"it {it} q {q_loss.item():.4f} inv {inverse_loss.item():.4f} "
              f"rnd {rnd_loss.item():.4f} r_int {r_int.mean().item():.4f} "
              f"r_ext {r_ext.mean().item():.3f}")

if args.out:
    torch.save({"q_net": q_net.state_dict(), "q_target": q_target.state_dict(),
                "embed": embed.state_dict(), "inverse_head": inverse_head.state_dict(),
                "rnd_predictor": rnd.predictor.state_dict()}, args.out)
