"""Deep Q-learning from demonstrations (DQfD) at a tiny size, written after Hester, Vecerik,
Pietquin, Lanctot, Schaul, Piot, Horgan, Quan, Sendonaris, Osband, Dulac-Arnold, Agapiou, Leibo
and Gruslys, "Deep Q-learning from Demonstrations" (AAAI 2018, arXiv:1704.03732), algorithm 1,
with opendilab/DI-engine (https://github.com/opendilab/DI-engine, ding/rl_utils/td.py
dqfd_nstep_td_error: the 1-step and n-step double-Q TD losses and the large-margin loss
max_a [Q(s, a) + l(a_E, a)] - Q(s, a_E) on expert transitions only, with no cut on either of its
terms; ding/policy/dqfd.py DQFDPolicy._forward_learn: the target network's values and the online
network's argmax actions under torch.no_grad(), the L2 term as the Adam's weight_decay, and the
target network assigned from the online one every few updates; ding/entry/serial_entry_dqfd.py:
per_train_iter_k pre-training iterations on the expert buffer, then batches drawn from the
agent's buffer and the expert buffer in a fixed ratio). Two phases: pre-training on the
demonstrations alone, then epsilon-greedy episodes whose transitions join the agent's buffer,
each followed by updates on a batch of agent and expert transitions, one backward per buffer
before the step. A grid walk to a corner made in the script; a scripted expert. As published:
clean."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--demo-episodes", type=int, default=6)
parser.add_argument("--pretrain-steps", type=int, default=24)
parser.add_argument("--episodes", type=int, default=4)
parser.add_argument("--updates-per-episode", type=int, default=5)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--target-period", type=int, default=8)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

size, n_actions, n_step, max_len, hidden_dim = 5, 4, 3, 10, 32
gamma, lambda1, lambda2, lambda3, margin, epsilon = 0.9, 1.0, 1.0, 1e-5, 0.8, 0.3
moves = torch.tensor([[1, 0], [-1, 0], [0, 1], [0, -1]])


def features(pos):
    return torch.cat([pos.float() / (size - 1), F.one_hot(pos, size).flatten().float()])


def expert_action(pos):
    dx, dy = size - 1 - pos[0].item(), size - 1 - pos[1].item()
    return 0 if dx >= dy else 2


def run_episode(choose):
    """One episode from a random start; its n-step transitions as rows of tensors."""
    pos, steps = torch.randint(0, size - 1, (2,)), []
    for _ in range(max_len):
        action = choose(pos)
        next_pos = (pos + moves[action]).clamp(0, size - 1)
        done = bool((next_pos == size - 1).all())
        steps.append((features(pos), action, 1.0 if done else -0.1, features(next_pos), done))
        pos = next_pos
        if done:
            break
    rows = []
    for t, (obs, action, reward, next_obs, done) in enumerate(steps):
        window = steps[t:t + n_step]
        ret_n = sum(gamma ** k * s[2] for k, s in enumerate(window))
        rows.append((obs, torch.tensor(action), torch.tensor(reward), next_obs,
                     torch.tensor(float(done)), torch.tensor(ret_n), window[-1][3],
                     torch.tensor(float(window[-1][4])), torch.tensor(gamma ** len(window))))
    return rows


def sample(rows, n):
    idx = torch.randint(0, len(rows), (n,)).tolist()
    return [torch.stack(column) for column in zip(*(rows[i] for i in idx))]


obs_dim = 2 + 2 * size
q_net = nn.Sequential(nn.Linear(obs_dim, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, n_actions))
target_net = copy.deepcopy(q_net)
optimizer = torch.optim.Adam(q_net.parameters(), lr=args.lr, weight_decay=lambda3)


def dqfd_loss(batch, expert, batch_size):
    obs, act, rew, next_obs, done, ret_n, next_n, done_n, discount_n = batch
    q = q_net(obs)
    q_sa = q.gather(1, act[:, None]).squeeze(1)
    with torch.no_grad():
        a_1 = q_net(next_obs).argmax(1, keepdim=True)
        y_1 = rew + gamma * (1 - done) * target_net(next_obs).gather(1, a_1).squeeze(1)
        a_n = q_net(next_n).argmax(1, keepdim=True)
        y_n = ret_n + discount_n * (1 - done_n) * target_net(next_n).gather(1, a_n).squeeze(1)
    loss = (q_sa - y_1).pow(2).sum() + lambda1 * (q_sa - y_n).pow(2).sum()
    if expert:
        margins = margin * (1 - F.one_hot(act, n_actions).float())
        loss = loss + lambda2 * ((q + margins).max(1)[0] - q_sa).sum()
    return loss / batch_size


demo_rows = [row for _ in range(args.demo_episodes) for row in run_episode(expert_action)]
n_updates = 0

# phase 1: pre-training on the demonstrations alone
for step in range(args.pretrain_steps):
    loss = dqfd_loss(sample(demo_rows, args.batch_size), True, args.batch_size)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    n_updates += 1
    if n_updates % args.target_period == 0:
        target_net.load_state_dict(q_net.state_dict())
    print(f"pretrain {step} loss {loss.item():.4f}")


def epsilon_greedy(pos):
    if torch.rand(()) < epsilon:
        return int(torch.randint(0, n_actions, ()))
    with torch.no_grad():
        return int(q_net(features(pos)).argmax())


# phase 2: the agent's episodes, then updates on agent and expert transitions
agent_rows, n_agent = [], args.batch_size // 2
for episode in range(args.episodes):
    agent_rows += run_episode(epsilon_greedy)
    for _ in range(args.updates_per_episode):
        agent_batch = sample(agent_rows, n_agent)
        demo_batch = sample(demo_rows, args.batch_size - n_agent)
        optimizer.zero_grad()
        agent_loss = dqfd_loss(agent_batch, False, args.batch_size)
        agent_loss.backward()
        demo_loss = dqfd_loss(demo_batch, True, args.batch_size)
        demo_loss.backward()
        optimizer.step()
        n_updates += 1
        if n_updates % args.target_period == 0:
            target_net.load_state_dict(q_net.state_dict())
    print(f"episode {episode} agent {agent_loss.item():.4f} demo {demo_loss.item():.4f} "
          f"buffer {len(agent_rows)}")

if args.out:
    torch.save({**{f"q_net.{k}": v for k, v in q_net.state_dict().items()},
                **{f"target_net.{k}": v for k, v in target_net.state_dict().items()}}, args.out)
