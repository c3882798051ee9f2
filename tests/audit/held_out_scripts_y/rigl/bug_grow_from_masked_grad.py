"""RigL: dynamic sparse training of a tiny MLP on a synthetic classification task.

Paper: Utku Evci, Trevor Gale, Jacob Menick, Pablo Samuel Castro, Erich Elsen, "Rigging the
Lottery: Making All Tickets Winners", ICML 2020, arXiv:1911.11134.
Reference implementation: google-research/rigl, rigl/sparse_optimizers.py (SparseRigLOptimizer:
compute_gradients, generic_mask_update, reset_momentum; SparseSETOptimizer._get_update_op and
cond_mask_update_op); PyTorch port in the rigl-torch package (RigLScheduler).

Two hidden layers are sparse: each holds a dense weight and a binary mask kept as a buffer (never
trained). The forward pass multiplies weight by mask, so the gradient reaching the weight is the
masked one, and inactive weights stay at zero (they are re-masked after every optimizer step, as
momentum could otherwise move them). A tensor hook on the masked weight keeps the dense gradient
of the loss with respect to it, the gradient RigL reads for growth. Every DELTA_T steps (until
T_END) the optimizer step is replaced by a mask update, done without autograd: in each sparse
layer the active connections of smallest magnitude are dropped (fraction following a cosine
decay) and as many inactive ones with the largest dense gradient magnitude are grown; grown
weights start at zero and their momentum is reset to zero. The last layer stays dense.
Bug: the growth score reads layer.weight.grad, the gradient after it has passed through the mask,
instead of the dense gradient of the masked weight; it is zero on every inactive connection, so
growth mostly re-grows the connections just dropped (their gradient is non-zero) and the
topology barely changes.
"""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

IN_DIM, HIDDEN, N_CLASSES = 20, 64, 4
DENSITY = 0.25
STEPS, BATCH, LR = 200, 64, 0.1
DELTA_T, T_END, DROP_FRACTION = 25, 150, 0.3


class SparseLinear(nn.Module):
    def __init__(self, n_in, n_out, density):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_out, n_in))
        self.bias = nn.Parameter(torch.zeros(n_out))
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        n_active = int(density * n_in * n_out)
        mask = torch.zeros(n_in * n_out)
        mask[torch.randperm(n_in * n_out)[:n_active]] = 1.0
        self.register_buffer("mask", mask.view(n_out, n_in))
        with torch.no_grad():
            self.weight.mul_(self.mask)
        self.dense_grad = None

    def _keep_dense_grad(self, grad):
        self.dense_grad = grad.detach().clone()

    def forward(self, x):
        w = self.weight * self.mask
        if w.requires_grad:
            w.register_hook(self._keep_dense_grad)
        return F.linear(x, w, self.bias)


class SparseMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = SparseLinear(IN_DIM, HIDDEN, DENSITY)
        self.fc2 = SparseLinear(HIDDEN, HIDDEN, DENSITY)
        self.out = nn.Linear(HIDDEN, N_CLASSES)

    def sparse_layers(self):
        return [self.fc1, self.fc2]

    def forward(self, x):
        h = F.relu(self.fc1(x))
        h = F.relu(self.fc2(h))
        return self.out(h)


def drop_fraction(step):
    return DROP_FRACTION / 2 * (1 + math.cos(math.pi * step / T_END))


@torch.no_grad()
def rigl_update(layer, fraction, optimizer):
    mask = layer.mask
    n_active = int(mask.sum().item())
    n_swap = int(fraction * n_active)
    if n_swap == 0:
        return 0
    flat_mask = mask.flatten()
    score_drop = torch.where(flat_mask > 0, layer.weight.abs().flatten(), -1.0)
    kept = torch.zeros_like(flat_mask)
    kept[torch.topk(score_drop, n_active - n_swap).indices] = 1.0
    score_grow = torch.where(kept > 0, -1.0, layer.weight.grad.abs().flatten())
    new_mask = kept.clone()
    new_mask[torch.topk(score_grow, n_swap).indices] = 1.0
    born = ((new_mask > 0) & (flat_mask == 0)).view_as(mask)
    new_mask = new_mask.view_as(mask)
    layer.weight.mul_(new_mask)
    layer.weight[born] = 0.0
    buf = optimizer.state[layer.weight].get("momentum_buffer")
    if buf is not None:
        buf[born] = 0.0
    mask.copy_(new_mask)
    return int(born.sum().item())


def make_data(teacher, n):
    x = torch.randn(n, IN_DIM)
    with torch.no_grad():
        y = teacher(x).argmax(1)
    return x, y


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=str, default=None)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    teacher = nn.Sequential(nn.Linear(IN_DIM, 32), nn.Tanh(), nn.Linear(32, N_CLASSES))
    x_train, y_train = make_data(teacher, 1024)
    x_test, y_test = make_data(teacher, 512)
    model = SparseMLP()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)

    for step in range(1, STEPS + 1):
        idx = torch.randint(0, x_train.shape[0], (BATCH,))
        loss = F.cross_entropy(model(x_train[idx]), y_train[idx])
        optimizer.zero_grad()
        loss.backward()
        if step % DELTA_T == 0 and step <= T_END:
            fraction = drop_fraction(step)
            grown = [rigl_update(layer, fraction, optimizer) for layer in model.sparse_layers()]
            print(f"step {step} mask update frac {fraction:.3f} newly grown {grown}")
        else:
            optimizer.step()
            with torch.no_grad():
                for layer in model.sparse_layers():
                    layer.weight.mul_(layer.mask)
        if step % 40 == 0:
            print(f"step {step} loss {loss.item():.4f}")

    with torch.no_grad():
        acc = (model(x_test).argmax(1) == y_test).float().mean().item()
    density = [layer.mask.mean().item() for layer in model.sparse_layers()]
    print(f"test acc {acc:.3f} density {[round(d, 3) for d in density]}")
    if args.out:
        torch.save({"model": model.state_dict()}, args.out)


if __name__ == "__main__":
    main()
