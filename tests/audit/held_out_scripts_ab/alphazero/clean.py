"""AlphaZero self-play training of a policy-value network on tic-tac-toe.

Paper: David Silver, Thomas Hubert, Julian Schrittwieser, Ioannis Antonoglou, Matthew Lai,
Arthur Guez, Marc Lanctot, Laurent Sifre, Dharshan Kumaran, Thore Graepel, Timothy Lillicrap,
Karen Simonyan and Demis Hassabis, "Mastering Chess and Shogi by Self-Play with a General
Reinforcement Learning Algorithm", arXiv:1712.01815 (2017); Science 362 (2018). The loss is the
paper's l = (z - v)^2 - pi^T log p + c ||theta||^2.
Reference implementation: suragnair/alpha-zero-general, Coach.py (Coach.executeEpisode: self-play
with temperature 1 for the first tempThreshold moves, every position stored with its 8 board
symmetries and the final outcome from the mover's view; Coach.learn: a history of the latest
iterations' examples, a competitor pnet holding the weights from before training, the Arena
pitting new against previous with temperature-0 MCTS, and the new weights rejected (the pre-
training checkpoint reloaded) unless the new network wins >= updateThreshold of the decided
games), MCTS.py (MCTS.getActionProb, MCTS.search: PUCT selection, the network evaluated once at
each new leaf, the value negated on the way up), Arena.py (Arena.playGames: half the games with
each side starting), tictactoe/TicTacToeGame.py, tictactoe/pytorch/TicTacToeNNet.py
(TicTacToeNNet: two 3x3 convolutions with batch norm, two batch-normed fully connected layers with
dropout, a log-softmax policy head and a tanh value head) and tictactoe/pytorch/NNet.py
(NNetWrapper.train: a fresh Adam per iteration, random mini-batches, loss_pi = -sum(pi * log p)/B,
loss_v = sum((z - v)^2)/B; NNetWrapper.predict: eval mode under torch.no_grad()).

The game is 3x3 tic-tac-toe with nine actions (the reference's pass action is never legal there
and is left out). The search runs without gradient: every leaf evaluation goes through predict(),
which puts the network in eval mode under torch.no_grad() and returns numpy arrays, so the
policy targets (normalised visit counts) and the value targets (game outcomes) are plain data.
Each iteration plays a few self-play games, copies the network into the competitor pnet
(copy.deepcopy), trains the network on the shuffled history with a fresh Adam optimizer and the
paper's loss (the L2 term c ||theta||^2 written out over every parameter), then pits the new
network against pnet; when the new network does not win enough, its weights are restored from
pnet. Numpy randomness (move sampling, tie-breaking, mini-batch ids) comes from one seeded
generator.
As published: clean.
"""
import argparse
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--num_iters", type=int, default=4)
parser.add_argument("--num_eps", type=int, default=3)
parser.add_argument("--num_sims", type=int, default=12)
parser.add_argument("--temp_threshold", type=int, default=3)
parser.add_argument("--cpuct", type=float, default=1.0)
parser.add_argument("--arena_compare", type=int, default=4)
parser.add_argument("--update_threshold", type=float, default=0.6)
parser.add_argument("--history", type=int, default=2)
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--batch_size", type=int, default=32)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--l2", type=float, default=1e-4)
parser.add_argument("--channels", type=int, default=16)
parser.add_argument("--dropout", type=float, default=0.3)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)
rng = np.random.default_rng(args.seed)

N = 3
ACTIONS = N * N
EPS = 1e-8


# ---------------------------------------------------------------- tic-tac-toe rules
def init_board():
    return np.zeros((N, N), dtype=np.int64)


def next_state(board, player, action):
    b = board.copy()
    b[action // N, action % N] = player
    return b, -player


def valid_moves(board):
    return (board.reshape(-1) == 0).astype(np.float64)


def is_win(board, player):
    lines = list(board) + list(board.T) + [board.diagonal(), np.fliplr(board).diagonal()]
    return any((line == player).all() for line in lines)


def game_ended(board, player):
    """0 while playing, 1 if `player` won, -1 if they lost, 1e-4 for a draw."""
    if is_win(board, player):
        return 1
    if is_win(board, -player):
        return -1
    if (board == 0).any():
        return 0
    return 1e-4


def canonical(board, player):
    return player * board


def symmetries(board, pi):
    pi_board = np.reshape(pi, (N, N))
    out = []
    for i in range(1, 5):
        for flip in (True, False):
            new_b, new_pi = np.rot90(board, i), np.rot90(pi_board, i)
            if flip:
                new_b, new_pi = np.fliplr(new_b), np.fliplr(new_pi)
            out.append((new_b.copy(), new_pi.ravel().copy()))
    return out


# ---------------------------------------------------------------- policy-value network
class TicTacToeNNet(nn.Module):
    def __init__(self, channels, dropout):
        super().__init__()
        self.channels = channels
        self.dropout = dropout
        self.conv1 = nn.Conv2d(1, channels, 3, stride=1, padding=1, bias=False)
        self.conv2 = nn.Conv2d(channels, channels, 3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.bn2 = nn.BatchNorm2d(channels)
        self.fc1 = nn.Linear(N * N * channels, 64, bias=False)
        self.fc_bn1 = nn.BatchNorm1d(64)
        self.fc2 = nn.Linear(64, 32, bias=False)
        self.fc_bn2 = nn.BatchNorm1d(32)
        self.fc3 = nn.Linear(32, ACTIONS)
        self.fc4 = nn.Linear(32, 1)

    def forward(self, s):
        s = s.view(-1, 1, N, N)
        s = F.relu(self.bn1(self.conv1(s)))
        s = F.relu(self.bn2(self.conv2(s)))
        s = s.view(-1, N * N * self.channels)
        s = F.dropout(F.relu(self.fc_bn1(self.fc1(s))), p=self.dropout, training=self.training)
        s = F.dropout(F.relu(self.fc_bn2(self.fc2(s))), p=self.dropout, training=self.training)
        pi = self.fc3(s)
        v = self.fc4(s)
        return F.log_softmax(pi, dim=1), torch.tanh(v)


def predict(net, board):
    """Leaf evaluation for the search: no gradient, eval mode, numpy out."""
    x = torch.tensor(board, dtype=torch.float32).view(1, N, N)
    net.eval()
    with torch.no_grad():
        log_pi, v = net(x)
    return torch.exp(log_pi).numpy()[0], float(v.item())


# ---------------------------------------------------------------- Monte Carlo tree search
class MCTS:
    def __init__(self, net):
        self.net = net
        self.Qsa, self.Nsa, self.Ns, self.Ps, self.Es, self.Vs = {}, {}, {}, {}, {}, {}

    def get_action_prob(self, board, temp=1):
        for _ in range(args.num_sims):
            self.search(board)
        s = board.tobytes()
        counts = np.array([self.Nsa.get((s, a), 0) for a in range(ACTIONS)], dtype=np.float64)
        if temp == 0:
            best = rng.choice(np.flatnonzero(counts == counts.max()))
            probs = np.zeros(ACTIONS)
            probs[best] = 1.0
            return probs
        counts = counts ** (1.0 / temp)
        return counts / (counts.sum() + EPS)

    def search(self, board):
        s = board.tobytes()
        if s not in self.Es:
            self.Es[s] = game_ended(board, 1)
        if self.Es[s] != 0:
            return -self.Es[s]
        if s not in self.Ps:
            p, v = predict(self.net, board)
            valids = valid_moves(board)
            p = p * valids
            self.Ps[s] = p / p.sum() if p.sum() > 0 else valids / valids.sum()
            self.Vs[s] = valids
            self.Ns[s] = 0
            return -v
        valids = self.Vs[s]
        sqrt_ns = np.sqrt(self.Ns[s] + EPS)
        ucb = [self.Qsa.get((s, a), 0.0)
               + args.cpuct * self.Ps[s][a] * sqrt_ns / (1 + self.Nsa.get((s, a), 0))
               if valids[a] else -float("inf") for a in range(ACTIONS)]
        a = int(np.argmax(ucb))
        nb, np_ = next_state(board, 1, a)
        v = self.search(canonical(nb, np_))
        if (s, a) in self.Qsa:
            n = self.Nsa[(s, a)]
            self.Qsa[(s, a)] = (n * self.Qsa[(s, a)] + v) / (n + 1)
            self.Nsa[(s, a)] = n + 1
        else:
            self.Qsa[(s, a)] = v
            self.Nsa[(s, a)] = 1
        self.Ns[s] += 1
        return -v


# ---------------------------------------------------------------- self-play and arena
def execute_episode(net):
    mcts = MCTS(net)
    examples = []
    board, cur_player, step = init_board(), 1, 0
    while True:
        step += 1
        cb = canonical(board, cur_player)
        temp = int(step < args.temp_threshold)
        pi = mcts.get_action_prob(cb, temp=temp)
        for b, p in symmetries(cb, pi):
            examples.append([b, cur_player, p])
        action = rng.choice(ACTIONS, p=pi)
        board, cur_player = next_state(board, cur_player, action)
        r = game_ended(board, cur_player)
        if r != 0:
            return [(b, p, r * ((-1) ** (pl != cur_player))) for b, pl, p in examples]


def play_game(player1, player2):
    players = {1: player1, -1: player2}
    board, cur_player = init_board(), 1
    while game_ended(board, cur_player) == 0:
        action = players[cur_player](canonical(board, cur_player))
        board, cur_player = next_state(board, cur_player, action)
    return game_ended(board, 1)


def play_games(player1, player2, num):
    one_won = two_won = draws = 0
    for _ in range(num // 2):
        r = play_game(player1, player2)
        one_won, two_won, draws = one_won + (r == 1), two_won + (r == -1), draws + (abs(r) != 1)
    for _ in range(num // 2):
        r = play_game(player2, player1)
        one_won, two_won, draws = one_won + (r == -1), two_won + (r == 1), draws + (abs(r) != 1)
    return one_won, two_won, draws


# ---------------------------------------------------------------- training
def train(net, examples):
    optimizer = torch.optim.Adam(net.parameters(), lr=args.lr)
    net.train()
    for epoch in range(args.epochs):
        for _ in range(len(examples) // args.batch_size):
            ids = rng.integers(len(examples), size=args.batch_size)
            boards, pis, vs = zip(*[examples[i] for i in ids])
            boards = torch.tensor(np.array(boards), dtype=torch.float32)
            target_pis = torch.tensor(np.array(pis), dtype=torch.float32)
            target_vs = torch.tensor(np.array(vs), dtype=torch.float32)

            out_pi, out_v = net(boards)
            l_pi = -torch.sum(target_pis * out_pi) / target_pis.size(0)
            l_v = torch.sum((target_vs - out_v.view(-1)) ** 2) / target_vs.size(0)
            l2 = sum(p.pow(2).sum() for p in net.parameters())
            total_loss = l_pi + l_v + args.l2 * l2

            optimizer.zero_grad()
            total_loss.backward()
            optimizer.step()
        print(f"  epoch {epoch} loss_pi {l_pi.item():.4f} loss_v {l_v.item():.4f} "
              f"l2 {l2.item():.2f}")


nnet = TicTacToeNNet(args.channels, args.dropout)
pnet = copy.deepcopy(nnet)  # the competitor: the previous generation of the network
history = []

for it in range(1, args.num_iters + 1):
    iteration_examples = []
    for _ in range(args.num_eps):
        iteration_examples += execute_episode(nnet)
    history.append(iteration_examples)
    if len(history) > args.history:
        history.pop(0)
    train_examples = [e for h in history for e in h]
    train_examples = [train_examples[i] for i in rng.permutation(len(train_examples))]
    print(f"iter {it}: {len(train_examples)} examples")

    pnet.load_state_dict(nnet.state_dict())
    pmcts = MCTS(pnet)
    train(nnet, train_examples)
    nmcts = MCTS(nnet)

    pwins, nwins, draws = play_games(
        lambda b: int(np.argmax(pmcts.get_action_prob(b, temp=0))),
        lambda b: int(np.argmax(nmcts.get_action_prob(b, temp=0))),
        args.arena_compare)
    print(f"  new/prev wins {nwins}/{pwins}, draws {draws}")
    if pwins + nwins == 0 or nwins / (pwins + nwins) < args.update_threshold:
        print("  rejecting new model")
        nnet.load_state_dict(pnet.state_dict())
    else:
        print("  accepting new model")

if args.out:
    torch.save({"nnet": nnet.state_dict(), "pnet": pnet.state_dict()}, args.out)
