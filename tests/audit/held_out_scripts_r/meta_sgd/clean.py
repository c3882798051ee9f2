"""Meta-SGD on few-shot sine regression at a tiny size, written after Li, Zhou, Chen and Li,
"Meta-SGD: Learning to Learn Quickly for Few-Shot Learning" (arXiv:1707.09835, 2017): like MAML,
a network initialisation theta is meta-learnt so that one gradient step on a task's support set
fits the task's query set, but the inner step is theta' = theta - alpha o grad L_support(theta)
with alpha a learnt vector of the same shape as theta (a learning rate and direction for every
parameter), and the meta-optimizer updates theta and alpha together on the query loss of the
adapted parameters, differentiating through the inner gradient (second order). Tasks are sine
waves with amplitude in [0.1, 5] and phase in [0, pi], inputs in [-5, 5], as in the paper's
regression experiment, alpha initialised uniformly in [0.005, 0.1]. With learnables/learn2learn
(https://github.com/learnables/learn2learn, learn2learn/algorithms/meta_sgd.py: MetaSGD.__init__
holds lrs, an nn.ParameterList with one tensor per parameter of the model, so that
MetaSGD.parameters() yields both; MetaSGDLearner.adapt takes torch.autograd.grad(loss,
module.parameters(), retain_graph=second_order, create_graph=second_order) and meta_sgd_update
replaces each parameter p by p - lr * grad; examples/rl/metasgd_a2c.py main builds
optim.Adam(meta_learner.parameters()) and, per iteration, clones the learner per task, adapts,
sums the tasks' evaluation losses, then zero_grad, backward and step). Here the network is
applied functionally to a list of adapted tensors instead of a cloned module, with one inner
step per task and a meta-batch of tasks per update.
As published: clean."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=60, help="meta-updates")
parser.add_argument("--tasks", type=int, default=8, help="tasks per meta-batch")
parser.add_argument("--shots", type=int, default=5, help="support points per task")
parser.add_argument("--queries", type=int, default=10, help="query points per task")
parser.add_argument("--out", default=None, help="where to save the initialisation and alpha")
args = parser.parse_args()
torch.manual_seed(args.seed)


class SineNet(nn.Module):
    def __init__(self, hidden=32):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(1, hidden), nn.Linear(hidden, hidden),
                                     nn.Linear(hidden, 1)])

    def forward(self, x, params=None):
        """Applies the network with `params` (weights and biases in order) in place of its own."""
        if params is None:
            params = list(self.parameters())
        for i in range(len(self.layers)):
            x = F.linear(x, params[2 * i], params[2 * i + 1])
            if i < len(self.layers) - 1:
                x = torch.relu(x)
        return x


def sample_tasks(n):
    amplitude = 0.1 + 4.9 * torch.rand(n, 1, 1)
    phase = math.pi * torch.rand(n, 1, 1)
    x = 10 * torch.rand(n, args.shots + args.queries, 1) - 5
    y = amplitude * torch.sin(x + phase)
    return x[:, :args.shots], y[:, :args.shots], x[:, args.shots:], y[:, args.shots:]


net = SineNet()
alpha = nn.ParameterList([nn.Parameter(torch.empty_like(p).uniform_(0.005, 0.1))
                          for p in net.parameters()])
meta_optimizer = torch.optim.Adam(list(net.parameters()) + list(alpha.parameters()), lr=1e-3)

for step in range(args.steps):
    x_s, y_s, x_q, y_q = sample_tasks(args.tasks)
    meta_loss = 0.0
    for t in range(args.tasks):
        params = list(net.parameters())
        support_loss = F.mse_loss(net(x_s[t], params), y_s[t])
        grads = torch.autograd.grad(support_loss, params, create_graph=True)
        adapted = [p - a * g for p, a, g in zip(params, alpha, grads)]
        meta_loss = meta_loss + F.mse_loss(net(x_q[t], adapted), y_q[t])
    meta_loss = meta_loss / args.tasks
    meta_optimizer.zero_grad()
    meta_loss.backward()
    meta_optimizer.step()
    if step % 10 == 0:
        print(f"step {step} query loss after one step {meta_loss.item():.3f}")

if args.out:
    torch.save({"net": net.state_dict(), "alpha": alpha.state_dict()}, args.out)
