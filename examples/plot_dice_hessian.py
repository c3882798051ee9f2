"""DiCE: the magic box gives the right Hessian; without its block every derivative vanishes.

The magic box ⊡(τ) = exp(τ − stop_gradient(τ)), the block `"dice.magic_box"`, is 1 going
forward and reproduces the score-function terms of every order going backward (Foerster et
al. 2018). Inside `disable_blocks("dice.*")` the box is exp(τ − τ) = 1, a constant.
"""

import matplotlib.pyplot as plt
import torch

from toolkit import disable_blocks
from toolkit.algorithms import dice

# %% A policy whose expectation can be enumerated
# A two-step categorical policy over 3 actions: its exact gradient and Hessian come from
# enumerating every trajectory. `estimate` samples N trajectories and differentiates an
# objective twice.

problem, theta = dice.two_step_problem(3, generator=torch.Generator().manual_seed(0))
exact_g, exact_h = dice.derivatives(problem.exact_objective, theta)


def estimate(objective, n, seed=0):
    actions = problem.sample(theta, n, generator=torch.Generator().manual_seed(seed))
    return dice.derivatives(lambda t: objective(problem.log_probs(t, actions),
                                           problem.costs(actions)).mean(), theta)


def error(estimated, exact):
    return float((estimated - exact).norm() / exact.norm())


# %% DiCE, the classic surrogate, and DiCE without its block
# DiCE and the surrogate Σ log p · c from 10 to 10000 samples; DiCE inside
# `disable_blocks("dice.*")` from 10000.

sizes = [10, 30, 100, 300, 1000, 3000, 10000]
dice_estimates = [estimate(dice.dice_objective, n) for n in sizes]
surrogate = [estimate(dice.surrogate_objective, n) for n in sizes]
with disable_blocks("dice.*"):
    g_without, h_without = estimate(dice.dice_objective, 10000)
g_with, h_with = dice_estimates[-1]
print(f"N = 10000: DiCE Hessian error {error(h_with, exact_h):.3g}, surrogate "
      f"{error(surrogate[-1][1], exact_h):.3g}; without the block ‖∇‖ = "
      f"{float(g_without.norm()):.3g}, ‖∇²‖ = {float(h_without.norm()):.3g}")

# %% What it shows
# Without the block the gradient and Hessian are exactly zero (left). With it the DiCE
# estimates approach the exact ones like 1/√N, while the surrogate gets the Hessian wrong at
# any N (right).

fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
labels = ["‖∇J‖", "‖∇²J‖"]
left.bar([0, 3], [float(exact_g.norm()), float(exact_h.norm())], color="#404040", label="exact")
left.bar([1, 4], [float(g_with.norm()), float(h_with.norm())], color="#0072B2",
         label="DiCE, with the block")
left.bar([2, 5], [float(g_without.norm()), float(h_without.norm())], color="#D55E00",
         label="DiCE, without it (exactly 0)")
left.set(xticks=[1, 4], xticklabels=labels, title="Derivatives from N = 10000 samples")
left.legend()
right.loglog(sizes, [error(h, exact_h) for _, h in dice_estimates], "o-", color="#0072B2",
             label="DiCE Hessian")
right.loglog(sizes, [error(g, exact_g) for g, _ in dice_estimates], "^-", color="#009E73",
             label="DiCE gradient")
right.loglog(sizes, [error(h, exact_h) for _, h in surrogate], "s--", color="#404040",
             label="surrogate Hessian")
right.set(xlabel="samples N", ylabel="relative error", title="Monte-Carlo error")
right.legend()
fig.tight_layout()
plt.show()
