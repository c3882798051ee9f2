"""TD learning: Baird's counterexample and the A-split, with and without the block.

The bootstrapped target `r + γ V(s')` sits behind the block `"td.target"`. With it, gradient
descent on the TD loss is semi-gradient TD; inside `disable_blocks("td.*")` it is the residual
gradient. Two textbook problems (Sutton & Barto, Examples 11.1 and 11.2) show that neither
side wins both.
"""

import matplotlib.pyplot as plt
import torch

from toolkit import disable_blocks
from toolkit.algorithms.td import a_split, baird_counterexample, gradient_descent

# %% The two problems
# Baird's counterexample: 7 states, 8 weights, γ = 0.99, step size α = 0.01, expected
# updates from w₀ = (1, 1, 1, 1, 1, 1, 10, 1). The A-split: a tabular chain where A goes to B
# or C, then B pays 1 and C pays 0, so the true values are A = ½, B = 1, C = 0.

mrp, w0 = baird_counterexample(0.99)
table = a_split()
zeros = torch.zeros(3, dtype=torch.float64)


def fit():
    """Baird's weights over 1000 sweeps, and the A-split values after 200 steps."""
    baird = gradient_descent(mrp.loss, w0, lr=0.01, n_steps=1000)
    values = gradient_descent(lambda v: table.loss(v, 1.0), zeros, lr=1.0, n_steps=200)[-1]
    return baird.norm(dim=1), values


# %% With and without the block
# The same `fit`, once as written and once inside `disable_blocks("td.*")`, where the gradient
# also flows through the target `γ V(s')`.

norm_with, values_with = fit()
with disable_blocks("td.*"):
    norm_without, values_without = fit()
print(f"Baird, ‖w‖ after 1000 sweeps: {norm_with[-1]:.4g} with the block, "
      f"{norm_without[-1]:.4g} without")
print("A-split with the block:", [round(v, 3) for v in values_with.tolist()])
print("A-split without it:    ", [round(v, 3) for v in values_without.tolist()])

# %% What it shows
# Left: semi-gradient TD diverges on Baird's counterexample, the residual gradient converges.
# Right: on the A-split the block finds the true values ½, 1, 0 and the residual gradient the
# wrong ones, ½, ¾, ¼. The block is not free: it buys the right fixed point at the price of
# stability off policy.

fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
left.semilogy(norm_with, label="with the block (semi-gradient TD)", color="#0072B2")
left.semilogy(norm_without, "--", label="without it (residual gradient)", color="#D55E00")
left.set(xlabel="sweep", ylabel="‖w‖", title="Baird's counterexample")
left.legend()
x = torch.arange(3)
right.bar(x - 0.2, values_with, 0.4, label="with the block", color="#0072B2")
right.bar(x + 0.2, values_without, 0.4, label="without it", color="#D55E00")
right.set(xticks=x, xticklabels=table.names, ylabel="V", title="A-split (true: ½, 1, 0)")
right.legend()
fig.tight_layout()
plt.show()
