"""Bootstrapped DQN at a tiny size, written after Osband, Blundell, Pritzel and Van Roy, "Deep
Exploration via Bootstrapped DQN" (NeurIPS 2016, arXiv:1602.04621), section 3 and appendix B, with
johannah/bootstrap_dqn (https://github.com/johannah/bootstrap_dqn, dqn_model.py EnsembleNet,
CoreNet and HeadNet, run_bootstrap.py ptlearn): K heads on a shared torso, the heads held in an
nn.ModuleList; each transition carries a bootstrap mask drawn once per head when it is stored; each
head is trained by the Huber loss on the transitions its mask keeps, against targets from the
target network's same head at the action the online head picks (double DQN), all under
torch.no_grad(); the torso's gradient is scaled by 1/K after the backward, as in the reference, and
the whole gradient clipped; the target network (a deep copy) is loaded from the online one every
few steps. Two phases: the torso is first warmed up with a small auxiliary head that predicts the
reward of each action, then the bootstrapped Q-learning loop trains the torso and all K heads with
one Adam over the network's parameters. Transitions of a small chain with random actions, collected
in the script into a replay buffer with their masks. Injected bug: the heads are kept in a plain
Python list (for an nn.ModuleList), so the network does not register them: the Adam built from its
parameters in the second phase never steps them, the clipping leaves them out, and the K heads keep
their initial weights while the torso trains under them."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--warmup-steps", type=int, default=10)
parser.add_argument("--steps", type=int, default=16)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--n-ensemble", type=int, default=4)
parser.add_argument("--bernoulli-p", type=float, default=0.5)
parser.add_argument("--gamma", type=float, default=0.9)
parser.add_argument("--target-update", type=int, default=4)
parser.add_argument("--clip-grad", type=float, default=5.0)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_states, n_actions, hidden, n_transitions = 8, 2, 32, 512


def collect(n):
    """Random-action transitions of a chain: the left end pays 0.1, the right end 1; both end it."""
    states = torch.randint(1, n_states - 1, (n,))
    actions = torch.randint(0, n_actions, (n,))
    next_states = states + torch.where(actions == 1, 1, -1)
    rewards = torch.where(next_states == n_states - 1, 1.0,
                          torch.where(next_states == 0, 0.1, 0.0))
    terminal_flags = ((next_states == 0) | (next_states == n_states - 1)).float()
    masks = torch.bernoulli(torch.full((n, args.n_ensemble), args.bernoulli_p))
    return (F.one_hot(states, n_states).float(), actions, rewards,
            F.one_hot(next_states, n_states).float(), terminal_flags, masks)


class CoreNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_states, hidden), nn.ReLU(),
                                 nn.Linear(hidden, hidden), nn.ReLU())

    def forward(self, x):
        return self.net(x)


class HeadNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(hidden, hidden)
        self.fc2 = nn.Linear(hidden, n_actions)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class EnsembleNet(nn.Module):
    def __init__(self, n_ensemble):
        super().__init__()
        self.core_net = CoreNet()
        self.net_list = [HeadNet() for _ in range(n_ensemble)]

    def _core(self, x):
        return self.core_net(x)

    def _heads(self, x):
        return [net(x) for net in self.net_list]

    def forward(self, x, k=None):
        if k is not None:
            return self.net_list[k](self.core_net(x))
        return self._heads(self._core(x))


buffer = collect(n_transitions)
policy_net = EnsembleNet(args.n_ensemble)
aux_head = nn.Linear(hidden, n_actions)

# phase 1: warm up the torso by predicting the reward of each action
warmup_opt = torch.optim.Adam([*policy_net.core_net.parameters(), *aux_head.parameters()], lr=3e-3)
for step in range(args.warmup_steps):
    idx = torch.randint(0, n_transitions, (args.batch_size,))
    states, actions, rewards = buffer[0][idx], buffer[1][idx], buffer[2][idx]
    predicted = aux_head(policy_net.core_net(states)).gather(1, actions[:, None]).squeeze(1)
    aux_loss = F.mse_loss(predicted, rewards)
    warmup_opt.zero_grad()
    aux_loss.backward()
    warmup_opt.step()
    print(f"warmup {step} reward loss {aux_loss.item():.4f}")

# phase 2: bootstrapped double DQN
target_net = copy.deepcopy(policy_net)
opt = torch.optim.Adam(policy_net.parameters(), lr=1e-3)
for step in range(args.steps):
    idx = torch.randint(0, n_transitions, (args.batch_size,))
    states, actions, rewards, next_states, terminal_flags, masks = (t[idx] for t in buffer)
    opt.zero_grad()
    q_policy_vals = policy_net(states)
    with torch.no_grad():
        next_q_target_vals = target_net(next_states)
        next_q_policy_vals = policy_net(next_states)
    cnt_losses = []
    for k in range(args.n_ensemble):
        total_used = torch.sum(masks[:, k])
        if total_used > 0.0:
            next_actions = next_q_policy_vals[k].max(1, True)[1]
            next_qs = next_q_target_vals[k].gather(1, next_actions).squeeze(1)
            preds = q_policy_vals[k].gather(1, actions[:, None]).squeeze(1)
            targets = rewards + args.gamma * next_qs * (1 - terminal_flags)
            l1loss = F.smooth_l1_loss(preds, targets, reduction="none")
            cnt_losses.append(torch.sum(masks[:, k] * l1loss / total_used))
    loss = sum(cnt_losses) / args.n_ensemble
    loss.backward()
    for param in policy_net.core_net.parameters():
        if param.grad is not None:
            param.grad.data *= 1.0 / float(args.n_ensemble)
    nn.utils.clip_grad_norm_(policy_net.parameters(), args.clip_grad)
    opt.step()
    if (step + 1) % args.target_update == 0:
        target_net.load_state_dict(policy_net.state_dict())
    print(f"step {step} bootstrapped loss {loss.item():.4f}")

if args.out:
    torch.save({"core_net": policy_net.core_net.state_dict(),
                "net_list": {str(k): head.state_dict()
                             for k, head in enumerate(policy_net.net_list)},
                "aux_head": aux_head.state_dict(),
                "target_core_net": target_net.core_net.state_dict(),
                "target_net_list": {str(k): head.state_dict()
                                    for k, head in enumerate(target_net.net_list)}}, args.out)
