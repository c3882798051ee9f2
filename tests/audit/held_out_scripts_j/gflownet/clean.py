"""A GFlowNet trained by trajectory balance at a tiny size, written after Malkin, Jain, Bengio, Sun
and Bengio, "Trajectory Balance: Improved Credit Assignment in GFlowNets" (NeurIPS 2022,
arXiv:2201.13259), section 3 and the hypergrid experiment of section 5.1, with GFNOrg/torchgfn
(https://github.com/GFNOrg/torchgfn, tutorials/examples/train_hypergrid_simple.py: one MLP trunk
shared by the forward and the backward policy, TBGFlowNet with init_logZ=0.0, an Adam over
gflownet.pf_pb_parameters() at lr and optimizer.add_param_group for gflownet.logz_parameters() at
the larger lr_logz; Sampler.sample_trajectories with save_logprobs=True, whose log-probabilities
keep their graph and are read by gflownet.loss with recalculate_all_logprobs=False;
src/gfn/gflownet/trajectory_balance.py TBGFlowNet.loss: (logZ + sum log P_F - sum log P_B -
log R(x))^2 averaged over the batch) and the original grid code of GFNOrg/gflownet
(https://github.com/GFNOrg/gflownet, grid/toy_grid_dag.py). Each iteration samples a batch of
trajectories on-policy from the origin of a 2-d hypergrid of height 8 (actions: add one to a
coordinate, or stop), summing the forward log-probabilities of the actions taken and the backward
log-probabilities of the parents; the reward is the hypergrid's R0 + R1 * [corners] + R2 * [modes],
made in the script. The learned scalar log Z has its own parameter group with a learning rate a
hundred times larger. As published: clean."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iterations", type=int, default=40)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--height", type=int, default=8)
parser.add_argument("--ndim", type=int, default=2)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--lr-logz", type=float, default=0.3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

H, D, hidden_dim = args.height, args.ndim, 32
R0, R1, R2 = 0.1, 0.5, 2.0


def log_reward(x):
    """The hypergrid reward: a floor R0, R1 in the corners, R2 on a ring inside them."""
    ax = (x.float() / (H - 1) - 0.5).abs()
    corners = (ax > 0.25).all(-1).float()
    modes = ((ax > 0.3) & (ax < 0.4)).all(-1).float()
    return torch.log(R0 + R1 * corners + R2 * modes)


def encode(x):
    """One-hot per coordinate, concatenated (torchgfn's KHotPreprocessor)."""
    return F.one_hot(x, H).float().flatten(1)


class TrunkPolicies(nn.Module):
    """A shared trunk with a forward head (D increments and stop) and a backward head (D
    parents)."""

    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(D * H, hidden_dim), nn.ReLU(),
                                   nn.Linear(hidden_dim, hidden_dim), nn.ReLU())
        self.pf = nn.Linear(hidden_dim, D + 1)
        self.pb = nn.Linear(hidden_dim, D)

    def forward(self, x):
        h = self.trunk(encode(x))
        pf_logits = self.pf(h).masked_fill(torch.cat([x == H - 1, torch.zeros_like(x[:, :1],
                                                      dtype=torch.bool)], 1), -1e9)
        pb_logits = self.pb(h).masked_fill(x == 0, -1e9)
        return F.log_softmax(pf_logits, -1), F.log_softmax(pb_logits, -1)


def sample_trajectories(model, n):
    """On-policy rollouts from the origin; returns the terminal states and, per trajectory, the
    summed log P_F of the actions and log P_B of the parents, with their graph."""
    x = torch.zeros(n, D, dtype=torch.long)
    done = torch.zeros(n, dtype=torch.bool)
    log_pf, log_pb = torch.zeros(n), torch.zeros(n)
    last_action = None
    while not done.all():
        pf, pb = model(x)
        if last_action is not None:  # log P_B(parent | x) of the step that reached x
            step_pb = pb.gather(1, last_action.clamp(max=D - 1).unsqueeze(1)).squeeze(1)
            log_pb = log_pb + torch.where(done, torch.zeros_like(step_pb), step_pb)
        action = torch.distributions.Categorical(logits=pf.detach()).sample()
        step_pf = pf.gather(1, action.unsqueeze(1)).squeeze(1)
        log_pf = log_pf + torch.where(done, torch.zeros_like(step_pf), step_pf)
        move = (~done) & (action < D)
        x = x + F.one_hot(action.clamp(max=D - 1), D) * move.long().unsqueeze(1)
        done = done | (action == D)
        last_action = action
    return x, log_pf, log_pb


model = TrunkPolicies()
logZ = nn.Parameter(torch.zeros(1))
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
optimizer.add_param_group({"params": [logZ], "lr": args.lr_logz})
for it in range(args.iterations):
    x, log_pf, log_pb = sample_trajectories(model, args.batch_size)
    loss = (logZ + log_pf - log_pb - log_reward(x)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"iteration {it} loss {loss.item():.4f} logZ {logZ.item():.4f} "
          f"mean log R {log_reward(x).mean().item():.4f}")

true_log_z = torch.logsumexp(log_reward(torch.cartesian_prod(*[torch.arange(H)] * D)), 0)
print(f"log Z learned {logZ.item():.4f}, true {true_log_z.item():.4f}")

if args.out:
    torch.save({"model": model.state_dict(), "logZ": logZ.detach().clone()}, args.out)
