"""Adversarial training: the attack as a constant, or unrolled into the graph.

PGD adversarial training minimises the loss at x_adv = stop_gradient(attack(model, x)), the
block `"adversarial.examples"`: by Danskin's theorem the inner maximiser is a constant of the
parameter gradient. Inside `disable_blocks("adversarial.*")` every attack step stays in the
graph. This script measures what that costs and what it changes, step count by step count.
"""

import matplotlib.pyplot as plt
import torch
from torch import nn

from toolkit import compare_gradients, count_graph_nodes, disable_blocks
from toolkit.algorithms.adversarial import pgd
from toolkit.lab.data import digits

# %% A small classifier and its training loss at the attack
# 128 of scikit-learn's 8×8 digits and a two-layer MLP. `training_loss` attacks with PGD
# (L∞: ε = 0.1, step 0.025; L2: ε = 1, step 0.25) and returns the loss at the attack.

torch.manual_seed(0)
X, y = digits()
x, y = X[:128], y[:128]
model = nn.Sequential(nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 10))


def training_loss(steps, norm):
    eps, alpha = (0.1, 0.025) if norm == "linf" else (1.0, 0.25)
    x_adv = pgd(model, x, y, eps=eps, alpha=alpha, steps=steps, norm=norm,
                generator=torch.Generator().manual_seed(0))
    return nn.functional.cross_entropy(model(x_adv), y)


# %% With and without the block, 1 to 10 attack steps
# The size of the loss's backward graph (`count_graph_nodes`), and the relative difference of
# the parameter gradient with and without the block (`compare_gradients`, which runs the loss
# both ways from the same random state).

steps = list(range(1, 11))
nodes_with = [count_graph_nodes(training_loss(s, "linf")) for s in steps]
with disable_blocks("adversarial.*"):
    nodes_without = [count_graph_nodes(training_loss(s, "linf")) for s in steps]
params = dict(model.named_parameters())
difference = {norm: [compare_gradients(lambda s=s, n=norm: training_loss(s, n), params,
                                       disable=("adversarial.*",)).overall.rel_diff
                       for s in steps]
              for norm in ("linf", "l2")}
print(f"10 PGD steps: {nodes_with[-1]} autograd nodes with the block, {nodes_without[-1]} "
      f"without; relative gradient difference L∞ {difference['linf'][-1]:.3g}, "
      f"L2 {difference['l2'][-1]:.3g}")

# %% What it shows
# With L∞ sign steps the block changes nothing in the gradient (sign has zero derivative), but
# without it the graph grows with every step (left); with L2 steps the gradient changes too
# (right).

fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
left.plot(steps, nodes_with, "o-", color="#0072B2", label="with the block")
left.plot(steps, nodes_without, "s--", color="#D55E00", label="without it")
left.set(xlabel="PGD steps", ylabel="autograd nodes", title="Graph of the training loss")
left.legend()
right.plot(steps, difference["linf"], "o-", color="#404040", label="L∞ steps (sign)")
right.plot(steps, difference["l2"], "s--", color="#D55E00", label="L2 steps")
right.set(xlabel="PGD steps", ylabel="‖g_with − g_without‖ / ‖g_with‖",
          title="Parameter gradient, with vs without")
right.legend()
fig.tight_layout()
plt.show()
