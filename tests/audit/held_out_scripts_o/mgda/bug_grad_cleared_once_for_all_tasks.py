"""Multiple-gradient descent for multi-task learning at a tiny size, written after Sener and
Koltun, "Multi-Task Learning as Multi-Objective Optimization" (NeurIPS 2018, arXiv:1810.04650),
sections 3.1-3.2 and algorithm 2: at every step the gradients of the task losses with respect to
the shared parameters are taken one task at a time, the min-norm point of their convex hull is
found by Frank-Wolfe, and the network is updated with one backward of the task losses weighted
by its coefficients. With isl-org/MultiObjectiveOptimization
(https://github.com/isl-org/MultiObjectiveOptimization, multi_task/train_multi_task.py
train_multi_task: model a dict of the shared 'rep' module and one module per task, one Adam over
the parameters of every module of the dict; in the MGDA branch, for each task
optimizer.zero_grad(), the representation and the task's loss, loss.backward(), and the .grad of
every parameter of model['rep'] cloned as a constant; gradient_normalizers with 'loss+' as in
sample.json; scale[t] = float(sol[i]) from MinNormSolver; then optimizer.zero_grad(), the
representation again, one backward of the scaled sum of the losses and optimizer.step();
multi_task/min_norm_solvers.py: _min_norm_element_from2, _min_norm_2d, and the Frank-Wolfe
steps of find_min_norm_element_FW). Three tasks on one input made in the script: two four-way
classifications of different projections and a regression; MLPs for the encoder and the heads.
Bug: optimizer.zero_grad() is called once before the loop over the tasks instead of at the top of
every task's pass (train_multi_task calls it for each t before that task's loss.backward()), so
the .grad of the encoder's parameters is not cleared between the tasks: the cloned "gradient" of
the second task is the sum of the first two tasks' gradients and that of the third the sum of all
three, and the min-norm coefficients the scaled backward uses are those of these running sums."""

import argparse

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=30)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--lr", type=float, default=5e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

in_dim, rep_dim = 12, 16
tasks = ["L", "R", "S"]
proj = {t: torch.randn(in_dim, 4) for t in tasks}
train_x = torch.randn(1024, in_dim)
train_labels = {"L": (train_x @ proj["L"]).argmax(1), "R": (train_x.abs() @ proj["R"]).argmax(1),
                "S": torch.tanh(train_x @ proj["S"]).sum(1, keepdim=True)}
loss_fn = {"L": F.cross_entropy, "R": F.cross_entropy, "S": F.mse_loss}

model = {"rep": nn.Sequential(nn.Linear(in_dim, 32), nn.ReLU(), nn.Linear(32, rep_dim), nn.ReLU()),
         "L": nn.Sequential(nn.Linear(rep_dim, 16), nn.ReLU(), nn.Linear(16, 4)),
         "R": nn.Sequential(nn.Linear(rep_dim, 16), nn.ReLU(), nn.Linear(16, 4)),
         "S": nn.Linear(rep_dim, 1)}
model_params = []
for m in model:
    model_params += model[m].parameters()
optimizer = torch.optim.Adam(model_params, lr=args.lr)


def min_norm_element_from2(v1v1, v1v2, v2v2):
    """The c in [0, 1] minimising |c x1 + (1 - c) x2|^2 from the inner products, and its cost."""
    if v1v2 >= v1v1:
        return 0.999, v1v1
    if v1v2 >= v2v2:
        return 0.001, v2v2
    gamma = (v2v2 - v1v2) / (v1v1 + v2v2 - 2 * v1v2)
    return gamma, v2v2 + gamma * (v1v2 - v2v2)


def find_min_norm_element(vecs, max_iter=250, stop_crit=1e-5):
    """Frank-Wolfe on the simplex, started from the best combination of two of the vectors."""
    n = len(vecs)
    flat = torch.stack([torch.cat([g.reshape(-1) for g in v]) for v in vecs])
    dps = (flat @ flat.t()).double().numpy()
    best = None
    for i in range(n):
        for j in range(i + 1, n):
            c, d = min_norm_element_from2(dps[i, i], dps[i, j], dps[j, j])
            if best is None or d < best[3]:
                best = (i, j, c, d)
    sol = np.zeros(n)
    sol[best[0]], sol[best[1]] = best[2], 1 - best[2]
    for _ in range(max_iter):
        t_iter = np.argmin(dps @ sol)
        nc, _ = min_norm_element_from2(sol @ dps @ sol, sol @ dps[:, t_iter], dps[t_iter, t_iter])
        new_sol = nc * sol
        new_sol[t_iter] += 1 - nc
        if np.abs(new_sol - sol).sum() < stop_crit:
            break
        sol = new_sol
    return sol


for step in range(args.steps):
    idx = torch.randint(0, len(train_x), (args.batch_size,))
    images, labels = train_x[idx], {t: train_labels[t][idx] for t in tasks}
    loss_data, grads, scale = {}, {}, {}
    optimizer.zero_grad()
    for t in tasks:
        # the gradient of each task's loss with respect to the shared parameters
        rep = model["rep"](images)
        out_t = model[t](rep)
        loss = loss_fn[t](out_t, labels[t])
        loss_data[t] = loss.item()
        loss.backward()
        grads[t] = []
        for param in model["rep"].parameters():
            if param.grad is not None:
                grads[t].append(param.grad.detach().clone())

    # 'loss+' normalisation, then the min-norm coefficients as plain numbers
    for t in tasks:
        gn = loss_data[t] * np.sqrt(sum(g.pow(2).sum().item() for g in grads[t]))
        grads[t] = [g / gn for g in grads[t]]
    sol = find_min_norm_element([grads[t] for t in tasks])
    for i, t in enumerate(tasks):
        scale[t] = float(sol[i])

    # one scaled backward through the shared representation
    optimizer.zero_grad()
    rep = model["rep"](images)
    for i, t in enumerate(tasks):
        loss_t = loss_fn[t](model[t](rep), labels[t])
        loss_data[t] = loss_t.item()
        loss = scale[t] * loss_t if i == 0 else loss + scale[t] * loss_t
    loss.backward()
    optimizer.step()
    if step % 10 == 0:
        print(f"step {step} " + " ".join(f"{t} {loss_data[t]:.3f} ({scale[t]:.2f})" for t in tasks))

if args.out:
    torch.save({**{f"{m}.{k}": v for m in model for k, v in model[m].state_dict().items()},
                "scales": torch.tensor([scale[t] for t in tasks])},
               args.out)
