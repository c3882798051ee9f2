"""Fast context adaptation via meta-learning (CAVIA) at a tiny size, written after Zintgraf,
Shiarlis, Kurin, Hofmann and Whiteson, "Fast Context Adaptation via Meta-Learning" (ICML 2019,
arXiv:1810.03642), algorithm 1 on the sine-regression benchmark, with lmzintgraf/cavia
(https://github.com/lmzintgraf/cavia, regression/cavia_model.py CaviaModel: context parameters
concatenated to the input, kept as a plain tensor with requires_grad = True that is *not* a
registered parameter of the model and is set back to zeros by reset_context_params;
regression/cavia.py run: for each task of a meta-batch the context is reset, adapted in the
inner loop by torch.autograd.grad(task_loss, model.context_params, create_graph=not
args.first_order) and model.context_params = model.context_params - lr_inner * task_gradients,
the test loss after adaptation is differentiated with torch.autograd.grad(loss_meta,
model.parameters()), each task's gradient clamped to [-10, 10] and summed into meta_gradient,
initialised to zeros at every iteration; then param.grad = meta_gradient[i] / tasks_per_metaupdate
and meta_optimiser.step(), the Adam over model.parameters() alone). Sine tasks with random
amplitude and phase, made in the script; second-order CAVIA. Injected bug: the inner loop's
gradient with respect to the context is taken without create_graph=True, so the adapted context
is a constant of the weights and the meta-gradient loses its term through the inner update."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--n-iter", type=int, default=25)
parser.add_argument("--tasks-per-metaupdate", type=int, default=4)
parser.add_argument("--k-shot", type=int, default=10)
parser.add_argument("--num-inner-updates", type=int, default=2)
parser.add_argument("--num-context-params", type=int, default=3)
parser.add_argument("--lr-inner", type=float, default=1.0)
parser.add_argument("--lr-meta", type=float, default=3e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

hidden_dim = 32


def sample_task():
    amplitude, phase = 0.1 + 4.9 * torch.rand(()), math.pi * torch.rand(())
    return lambda x: amplitude * torch.sin(x - phase)


def sample_inputs(k):
    return 10 * torch.rand(k, 1) - 5


class CaviaModel(nn.Module):
    def __init__(self, n_in, n_out, num_context_params):
        super().__init__()
        self.fc_layers = nn.ModuleList([nn.Linear(n_in + num_context_params, hidden_dim),
                                        nn.Linear(hidden_dim, hidden_dim),
                                        nn.Linear(hidden_dim, n_out)])
        # the context is not a registered parameter: the meta-optimiser never sees it
        self.num_context_params = num_context_params
        self.reset_context_params()

    def reset_context_params(self):
        self.context_params = torch.zeros(self.num_context_params)
        self.context_params.requires_grad = True

    def forward(self, x):
        x = torch.cat((x, self.context_params.expand(x.shape[0], -1)), dim=1)
        for layer in self.fc_layers[:-1]:
            x = F.relu(layer(x))
        return self.fc_layers[-1](x)


model = CaviaModel(1, 1, args.num_context_params)
meta_optimiser = torch.optim.Adam(model.parameters(), args.lr_meta)

for i_iter in range(args.n_iter):
    meta_gradient = [0 for _ in range(len(list(model.parameters())))]
    target_functions = [sample_task() for _ in range(args.tasks_per_metaupdate)]
    meta_loss = 0.0
    for t in range(args.tasks_per_metaupdate):
        model.reset_context_params()
        train_inputs = sample_inputs(args.k_shot)
        for _ in range(args.num_inner_updates):
            task_loss = F.mse_loss(model(train_inputs), target_functions[t](train_inputs))
            task_gradients = torch.autograd.grad(task_loss, model.context_params)[0]
            model.context_params = model.context_params - args.lr_inner * task_gradients
        test_inputs = sample_inputs(args.k_shot)
        loss_meta = F.mse_loss(model(test_inputs), target_functions[t](test_inputs))
        task_grad = torch.autograd.grad(loss_meta, model.parameters())
        for i in range(len(task_grad)):
            meta_gradient[i] += task_grad[i].detach().clamp_(-10, 10)
        meta_loss += loss_meta.item() / args.tasks_per_metaupdate

    for i, param in enumerate(model.parameters()):
        param.grad = meta_gradient[i] / args.tasks_per_metaupdate
    meta_optimiser.step()
    model.reset_context_params()
    print(f"iter {i_iter} meta loss {meta_loss:.4f}")

# evaluation: adapt the context alone on new tasks, the weights fixed
losses = []
for _ in range(20):
    target_function = sample_task()
    model.reset_context_params()
    inputs = sample_inputs(args.k_shot)
    for _ in range(args.num_inner_updates):
        task_loss = F.mse_loss(model(inputs), target_function(inputs))
        task_gradients = torch.autograd.grad(task_loss, model.context_params)[0]
        model.context_params = model.context_params - args.lr_inner * task_gradients.detach()
    grid = torch.linspace(-5, 5, 100).unsqueeze(1)
    losses.append(F.mse_loss(model(grid), target_function(grid)).item())
print(f"test mse after adaptation {sum(losses) / len(losses):.4f}")

if args.out:
    torch.save({f"model.{k}": v for k, v in model.state_dict().items()}, args.out)
