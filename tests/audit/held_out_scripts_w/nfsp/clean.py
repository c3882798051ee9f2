"""Neural Fictitious Self-Play in Kuhn poker, written after Heinrich and Silver, "Deep
Reinforcement Learning from Self-Play in Imperfect-Information Games" (arXiv:1603.01121,
2016): each player has a best-response network Q(s, a), trained by DQN
(fitted Q-learning with a periodically refreshed target network) on the transitions of its
own play, stored in a circular replay memory, and an average-policy network Pi(s, a), trained
by supervised classification on the player's own best-response actions, stored in a reservoir
memory; each episode a player acts with its epsilon-greedy best response with probability
eta (the anticipatory parameter) and with its average policy otherwise. With DeepMind's
OpenSpiel PyTorch code, google-deepmind/open_spiel (https://github.com/google-deepmind/
open_spiel, open_spiel/python/pytorch/nfsp.py NFSP: _sample_episode_policy picks the
best_response mode with probability anticipatory_param, step adds the best-response
behaviour to the ReservoirBuffer through _add_transition and the RL transitions of both modes
to the inner DQN, and _learn takes the cross-entropy of the average network's logits against
the stored best-response actions, then zero_grad, backward and step of an optimizer over the
average network's parameters only; open_spiel/python/pytorch/dqn.py DQN.learn computes the
Q-values of the taken actions, the bootstrap max over the target network's next-state values,
cut from the graph (.detach()), the squared error, and zero_grad, backward, step over the
Q-network's parameters, the target network being refreshed from the Q-network every
update_target_network_every steps), whose steps this script follows, for two players.
Here the target networks are frozen with requires_grad_(False) and refreshed by an in-place
copy under torch.no_grad(); Kuhn poker (three cards, one bet) is written out in the script.
As published: clean."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--episodes", type=int, default=900)
parser.add_argument("--learn-every", type=int, default=4, help="episodes between updates")
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--min-buffer", type=int, default=32)
parser.add_argument("--replay-capacity", type=int, default=2000)
parser.add_argument("--reservoir-capacity", type=int, default=2000)
parser.add_argument("--target-every", type=int, default=20, help="RL updates between refreshes")
parser.add_argument("--anticipatory", type=float, default=0.1, help="eta")
parser.add_argument("--epsilon", type=float, default=0.06)
parser.add_argument("--rl-lr", type=float, default=0.05)
parser.add_argument("--sl-lr", type=float, default=0.05)
parser.add_argument("--out", default=None, help="where to save the Q, target and average networks")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_actions, state_dim, hidden = 2, 9, 64  # actions: 0 = pass/fold, 1 = bet/call


def info_state(player, card, history):
    """Player one-hot, private card one-hot, and the first two public actions one-hot."""
    s = torch.zeros(state_dim)
    s[player] = 1.0
    s[2 + card] = 1.0
    for i, a in enumerate(history[:2]):
        s[5 + 2 * i + a] = 1.0
    return s


def payoff(history, cards):
    """None while the hand goes on, else player 0's winnings."""
    showdown = 1.0 if cards[0] > cards[1] else -1.0
    if history == [0, 0]:
        return showdown
    if history in ([0, 1, 1], [1, 1]):
        return 2.0 * showdown
    if history == [0, 1, 0]:
        return -1.0
    if history == [1, 0]:
        return 1.0
    return None


def mlp():
    return nn.Sequential(nn.Linear(state_dim, hidden), nn.ReLU(), nn.Linear(hidden, n_actions))


q_networks = [mlp() for _ in range(2)]
target_networks = [copy.deepcopy(q).requires_grad_(False) for q in q_networks]
avg_networks = [mlp() for _ in range(2)]
rl_optimizers = [torch.optim.SGD(q.parameters(), lr=args.rl_lr) for q in q_networks]
sl_optimizers = [torch.optim.SGD(pi.parameters(), lr=args.sl_lr) for pi in avg_networks]
replay = [[] for _ in range(2)]  # (s, a, r, s', done), circular
reservoir = [[] for _ in range(2)]  # (s, a) of best-response play
reservoir_seen, replay_seen = [0, 0], [0, 0]
rl_updates = [0, 0]


def sync_target(q_network, target_network):
    with torch.no_grad():
        for target_param, param in zip(target_network.parameters(), q_network.parameters()):
            target_param.copy_(param)


def add_reservoir(player, item):
    if len(reservoir[player]) < args.reservoir_capacity:
        reservoir[player].append(item)
    else:
        idx = torch.randint(0, reservoir_seen[player] + 1, ()).item()
        if idx < args.reservoir_capacity:
            reservoir[player][idx] = item
    reservoir_seen[player] += 1


def sample(buffer):
    batch = [buffer[i] for i in torch.randperm(len(buffer))[:args.batch_size].tolist()]
    columns = zip(*batch)
    return [torch.stack(c) if torch.is_tensor(c[0]) else torch.tensor(c) for c in columns]


def learn_best_response(player):
    states, actions, rewards, next_states, dones = sample(replay[player])
    q_values = q_networks[player](states).gather(1, actions.unsqueeze(1)).squeeze(1)
    next_q = target_networks[player](next_states).max(1).values  # frozen target network
    target = rewards + (1.0 - dones) * next_q
    rl_loss = F.mse_loss(q_values, target)
    rl_optimizers[player].zero_grad()
    rl_loss.backward()
    rl_optimizers[player].step()
    rl_updates[player] += 1
    if rl_updates[player] % args.target_every == 0:
        sync_target(q_networks[player], target_networks[player])
    return rl_loss.item()


def learn_average_policy(player):
    states, actions = sample(reservoir[player])
    sl_loss = F.cross_entropy(avg_networks[player](states), actions)
    sl_optimizers[player].zero_grad()
    sl_loss.backward()
    sl_optimizers[player].step()
    return sl_loss.item()


for episode in range(args.episodes):
    cards = torch.randperm(3)[:2].tolist()
    best_response = (torch.rand(2) < args.anticipatory).tolist()
    epsilon = args.epsilon * (1.0 - episode / args.episodes)
    history, decisions = [], [[], []]
    while payoff(history, cards) is None:
        player = len(history) % 2
        s = info_state(player, cards[player], history)
        with torch.no_grad():
            if best_response[player]:
                if torch.rand(()) < epsilon:
                    a = torch.randint(0, n_actions, ()).item()
                else:
                    a = q_networks[player](s).argmax().item()
                add_reservoir(player, (s, a))
            else:
                a = torch.multinomial(F.softmax(avg_networks[player](s), -1), 1).item()
        decisions[player].append((s, a))
        history.append(a)
    returns = [payoff(history, cards), -payoff(history, cards)]
    for player in range(2):
        steps = decisions[player]
        for i, (s, a) in enumerate(steps):
            last = i == len(steps) - 1
            item = (s, a, returns[player] if last else 0.0,
                    torch.zeros(state_dim) if last else steps[i + 1][0], 1.0 if last else 0.0)
            if len(replay[player]) < args.replay_capacity:
                replay[player].append(item)
            else:
                replay[player][replay_seen[player] % args.replay_capacity] = item
            replay_seen[player] += 1
    if episode % args.learn_every == 0:
        for player in range(2):
            if len(replay[player]) >= args.min_buffer:
                rl_loss = learn_best_response(player)
            if len(reservoir[player]) >= args.min_buffer:
                sl_loss = learn_average_policy(player)
    if episode % 300 == 0 and len(reservoir[0]) >= args.min_buffer:
        print(f"episode {episode} rl loss {rl_loss:.4f} sl loss {sl_loss:.4f}")

if args.out:
    saved = {}
    for player in range(2):
        saved[f"q_network_{player}"] = q_networks[player].state_dict()
        saved[f"target_network_{player}"] = target_networks[player].state_dict()
        saved[f"avg_network_{player}"] = avg_networks[player].state_dict()
    torch.save(saved, args.out)
