"""Efficient neural architecture search (ENAS) at a tiny size, written after Pham, Guan, Zoph, Le
and Dean, "Efficient Neural Architecture Search via Parameter Sharing" (ICML 2018,
arXiv:1802.03268), sections 2.1-2.2: a controller LSTM samples, decision by decision, which
earlier node feeds each node of a cell and which activation it applies; all architectures share
the weights omega of one large graph; training alternates between omega, trained by SGD on the
cross-entropy of architectures sampled from the fixed policy, and the controller's parameters
theta, trained by REINFORCE with the reward R = c / valid_ppl of a sampled child on a validation
batch, a number, and an exponential moving average of the rewards as baseline. With
carpedm20/ENAS-pytorch (https://github.com/carpedm20/ENAS-pytorch, trainer.py Trainer.train:
train_shared for shared_initial_step steps and train_controller, then both in turn each epoch;
train_shared with controller.sample() and clip_grad_norm on the shared model; train_controller
with get_reward called under the no_grad context manager ("No gradients should be
backpropagated to the shared model during controller training"), valid_loss taken by
utils.to_item, R = reward_c / valid_ppl plus entropy_coeff times the entropies as numbers, the
baseline decay * baseline + (1 - decay) * rewards, and loss = -log_probs * adv;
models/controller.py Controller, its encoder, LSTMCell and one linear decoder per decision, kept
in a list and registered by nn.ModuleList, with the exploration logits tanh_c * tanh(logits),
here with the softmax temperature inside the tanh as in the line left commented out there). A
feed-forward cell of four nodes over inputs made in the script, three classes; each optimizer's
gradients are cleared after its step. As published: clean."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--shared-initial-steps", type=int, default=10)
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--shared-steps", type=int, default=6)
parser.add_argument("--controller-steps", type=int, default=6)
parser.add_argument("--shared-lr", type=float, default=0.1)
parser.add_argument("--controller-lr", type=float, default=0.02)
parser.add_argument("--reward-c", type=float, default=2.0)
parser.add_argument("--entropy-coeff", type=float, default=1e-2)
parser.add_argument("--baseline-decay", type=float, default=0.9)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

in_dim, hidden_dim, n_nodes, n_classes, ctrl_dim = 8, 16, 4, 3, 16
activations = [torch.tanh, F.relu, torch.sigmoid, lambda h: h]
rule = torch.randn(in_dim, n_classes)


def batch(n):
    x = torch.randn(n, in_dim)
    return x, (torch.tanh(x) @ rule + 0.3 * x[:, :n_classes] ** 2).argmax(dim=1)


class SharedCell(nn.Module):
    """omega: one weight from every node j to every later node i, shared by all children."""

    def __init__(self):
        super().__init__()
        self.w_in = nn.Linear(in_dim, hidden_dim)
        self.w = nn.ModuleList(nn.ModuleList(nn.Linear(hidden_dim, hidden_dim) for _ in range(i))
                               for i in range(n_nodes))
        self.classifier = nn.Linear(hidden_dim, n_classes)

    def forward(self, x, arch):
        act0, links = arch
        nodes = [activations[act0](self.w_in(x))]
        for i, (prev, act) in enumerate(links, start=1):
            nodes.append(activations[act](self.w[i][prev](nodes[prev])))
        used = {prev for prev, _ in links}
        loose_ends = [h for j, h in enumerate(nodes) if j not in used]
        return self.classifier(torch.stack(loose_ends).mean(dim=0))


class Controller(nn.Module):
    def __init__(self, temperature=5.0, tanh_c=2.5):
        super().__init__()
        self.temperature, self.tanh_c = temperature, tanh_c
        self.num_tokens = [len(activations)]
        for i in range(1, n_nodes):
            self.num_tokens += [i, len(activations)]
        self.encoder = nn.Embedding(len(activations) + n_nodes, ctrl_dim)
        self.lstm = nn.LSTMCell(ctrl_dim, ctrl_dim)
        self.decoders = nn.ModuleList(nn.Linear(ctrl_dim, n) for n in self.num_tokens)

    def sample(self):
        inputs = torch.zeros(1, ctrl_dim)
        hx = cx = torch.zeros(1, ctrl_dim)
        actions, log_prob, entropy = [], 0.0, 0.0
        for k, decoder in enumerate(self.decoders):
            hx, cx = self.lstm(inputs, (hx, cx))
            logits = self.tanh_c * torch.tanh(decoder(hx) / self.temperature)
            log_probs = F.log_softmax(logits, dim=-1)
            action = torch.multinomial(log_probs.exp(), 1)[0, 0]
            log_prob = log_prob + log_probs[0, action]
            entropy = entropy - (log_probs * log_probs.exp()).sum()
            actions.append(int(action))
            offset = len(activations) if k % 2 == 1 else 0  # previous-node tokens after acts
            inputs = self.encoder(action.view(1) + offset)
        arch = (actions[0], list(zip(actions[1::2], actions[2::2])))
        return arch, log_prob, entropy


shared, controller = SharedCell(), Controller()
shared_optim = torch.optim.SGD(shared.parameters(), lr=args.shared_lr, momentum=0.9)
controller_optim = torch.optim.Adam(controller.parameters(), lr=args.controller_lr)
x_valid, y_valid = batch(128)
baseline = None


def train_shared(n_steps):
    for step in range(n_steps):
        with torch.no_grad():
            arch, _, _ = controller.sample()
        x, y = batch(32)
        loss = F.cross_entropy(shared(x, arch), y)
        loss.backward()
        nn.utils.clip_grad_norm_(shared.parameters(), 5.0)
        shared_optim.step()
        shared_optim.zero_grad()
    return loss.item()


def train_controller(n_steps):
    global baseline
    for step in range(n_steps):
        arch, log_prob, entropy = controller.sample()
        with torch.no_grad():
            valid_loss = F.cross_entropy(shared(x_valid, arch), y_valid)
        reward = args.reward_c / torch.exp(valid_loss) + args.entropy_coeff * entropy.detach()
        r = reward.item()
        baseline = r if baseline is None else args.baseline_decay * baseline + (
            1 - args.baseline_decay) * r
        loss = -log_prob * (reward - baseline)
        loss.backward()
        nn.utils.clip_grad_norm_(controller.parameters(), 1.0)
        controller_optim.step()
        controller_optim.zero_grad()
    return r, arch


train_shared(args.shared_initial_steps)
train_controller(args.controller_steps)
for epoch in range(args.epochs):
    shared_loss = train_shared(args.shared_steps)
    reward, arch = train_controller(args.controller_steps)
    print(f"epoch {epoch} shared loss {shared_loss:.4f} reward {reward:.4f} arch {arch}")

if args.out:
    parts = {"encoder": controller.encoder, "lstm": controller.lstm,
             **{f"decoders.{i}": d for i, d in enumerate(controller.decoders)}}
    torch.save({**{f"shared.{k}": v for k, v in shared.state_dict().items()},
                **{f"controller.{name}.{k}": v for name, part in parts.items()
                   for k, v in part.state_dict().items()}}, args.out)
