"""Implicit MAML on few-shot sine-wave regression, written after Rajeswaran, Finn, Kakade and
Levine, "Meta-Learning with Implicit Gradients" (NeurIPS 2019, arXiv:1909.04630): for each
task the inner problem adapts a copy phi of the meta-parameters theta on the task's training
set by gradient descent on L_train(phi) + (lam / 2) ||phi - theta||^2, the proximal term
anchored at theta held fixed; the meta-gradient of the task is not back-propagated through the
inner steps but obtained implicitly, as g = (I + H / lam)^{-1} grad L_val(phi) with H the
Hessian of L_train at phi, solved approximately by a few conjugate-gradient iterations that
only need Hessian-vector products; the meta-update applies the average of g over a batch of
tasks to theta with an outer optimiser. With the authors' code, aravindr93/imaml_dev
(https://github.com/aravindr93/imaml_dev, implicit_maml/learner_model.py, class Learner:
get_params returns a detached clone of the flat parameters, the anchor w_0; regularization_loss
adds 0.5 * lam * ||param - w_0||^2; learn_on_data runs inner_opt, an SGD optimizer over the
fast learner's own model, with zero_grad, backward and step; hessian_vector_product takes the
training-loss gradient with create_graph=True and differentiates its dot product with v;
matrix_evaluator builds v -> (1 + regu_coef) v + Hv / (lam + lam_damping); outer_step_with_grad
sets the meta model's gradients to the meta-gradient and steps outer_opt, Adam with eps=1e-3;
implicit_maml/utils.py cg_solve; examples/omniglot_implicit_maml.py: per meta step, the fast
learner is synced to w_k = meta_learner.get_params(), adapted, its validation gradient taken
with torch.autograd.grad and handed to cg_solve, and the results averaged over the task batch),
whose steps this script follows with the paper's plain operator v + Hv / lam (no extra
damping), the proximal term in every inner step (learn_on_data with add_regularization=True)
and the meta-gradient handed to the optimiser by back-propagating the linear surrogate
sum <theta, g>, whose gradient with respect to theta is g. The tasks are sine waves
a sin(x - b), a in [0.1, 5], b in [0, pi], with ten training and ten validation points.
As published: clean."""

import argparse
import copy
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--meta-steps", type=int, default=30)
parser.add_argument("--tasks-per-step", type=int, default=3)
parser.add_argument("--inner-steps", type=int, default=8)
parser.add_argument("--inner-lr", type=float, default=0.02)
parser.add_argument("--outer-lr", type=float, default=1e-3)
parser.add_argument("--lam", type=float, default=2.0, help="proximal regularisation strength")
parser.add_argument("--cg-steps", type=int, default=5)
parser.add_argument("--k-shot", type=int, default=10)
parser.add_argument("--out", default=None, help="where to save the meta and fast models")
args = parser.parse_args()
torch.manual_seed(args.seed)


def sample_task():
    amplitude = 0.1 + 4.9 * torch.rand(())
    phase = math.pi * torch.rand(())
    x = 10 * torch.rand(2 * args.k_shot, 1) - 5
    y = amplitude * torch.sin(x - phase)
    return x[:args.k_shot], y[:args.k_shot], x[args.k_shot:], y[args.k_shot:]


meta_model = nn.Sequential(nn.Linear(1, 40), nn.ReLU(), nn.Linear(40, 40), nn.ReLU(),
                           nn.Linear(40, 1))
fast_model = copy.deepcopy(meta_model)
meta_optimizer = torch.optim.Adam(meta_model.parameters(), lr=args.outer_lr, eps=1e-3)
inner_optimizer = torch.optim.SGD(fast_model.parameters(), lr=args.inner_lr)


def proximal(model, anchor):
    return 0.5 * args.lam * sum(((p - a) ** 2).sum() for p, a in zip(model.parameters(), anchor))


def flat(tensors):
    return torch.cat([t.reshape(-1) for t in tensors])


def hessian_vector_product(x, y, v):
    """H v for the training loss of the fast model at its current (adapted) parameters."""
    train_loss = F.mse_loss(fast_model(x), y)
    grads = torch.autograd.grad(train_loss, fast_model.parameters(), create_graph=True)
    return flat(torch.autograd.grad(torch.dot(flat(grads), v), fast_model.parameters()))


def cg_solve(matvec, b, iters, residual_tol=1e-10):
    x = torch.zeros_like(b)
    r = b.clone()
    p = r.clone()
    rdotr = r.dot(r)
    for _ in range(iters):
        Ap = matvec(p)
        alpha = rdotr / p.dot(Ap)
        x = x + alpha * p
        r = r - alpha * Ap
        new_rdotr = r.dot(r)
        if new_rdotr < residual_tol:
            break
        p = r + (new_rdotr / rdotr) * p
        rdotr = new_rdotr
    return x


for meta_step in range(args.meta_steps):
    meta_optimizer.zero_grad()
    anchor = [p.detach().clone() for p in meta_model.parameters()]
    meta_grad = torch.zeros(sum(p.numel() for p in meta_model.parameters()))
    pre_loss, post_loss = 0.0, 0.0
    for _ in range(args.tasks_per_step):
        x_train, y_train, x_val, y_val = sample_task()
        fast_model.load_state_dict(meta_model.state_dict())  # sync phi to theta
        with torch.no_grad():
            pre_loss += F.mse_loss(fast_model(x_val), y_val).item() / args.tasks_per_step
        for _ in range(args.inner_steps):
            inner_loss = F.mse_loss(fast_model(x_train), y_train) + proximal(fast_model, anchor)
            inner_optimizer.zero_grad()
            inner_loss.backward()
            inner_optimizer.step()
        val_loss = F.mse_loss(fast_model(x_val), y_val)
        post_loss += val_loss.item() / args.tasks_per_step
        val_grad = flat(torch.autograd.grad(val_loss, fast_model.parameters()))
        task_meta_grad = cg_solve(
            lambda v: v + hessian_vector_product(x_train, y_train, v) / args.lam,
            val_grad, args.cg_steps)
        meta_grad += task_meta_grad / args.tasks_per_step
    # hand the implicit meta-gradient to the optimiser: d/dtheta sum <theta, g> = g
    offsets = torch.tensor([0] + [p.numel() for p in meta_model.parameters()]).cumsum(0)
    surrogate = sum((p.reshape(-1) * meta_grad[a:b]).sum()
                    for p, a, b in zip(meta_model.parameters(), offsets[:-1], offsets[1:]))
    surrogate.backward()
    meta_optimizer.step()
    if meta_step % 10 == 0:
        print(f"meta step {meta_step} val loss before {pre_loss:.3f} after {post_loss:.3f}")

if args.out:
    torch.save({"meta_model": meta_model.state_dict(), "fast_model": fast_model.state_dict()},
               args.out)
