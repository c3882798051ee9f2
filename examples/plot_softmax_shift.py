"""Stable softmax: the max shift, with and without its block.

`stable_softmax` computes on `z = x − stop_gradient(max x)`, the block `"softmax.max"`.
Softmax is shift-invariant, so the gradient through the max is zero in exact arithmetic. This
script scales random logits up and checks both claims: what the shift buys in the forward
pass, and what the block changes in the backward pass.
"""

import matplotlib.pyplot as plt
import torch

from toolkit import disable_blocks
from toolkit.algorithms.softmax import naive_softmax, stable_softmax

# %% Logits at 25 scales
# 256 rows of 64 float32 logits, multiplied by a scale `c` from 1 to 1000, and a fixed upstream
# gradient `weights`, so that the backward pass has something to carry.

generator = torch.Generator().manual_seed(0)
x0 = torch.randn(256, 64, generator=generator)
weights = torch.randn(256, 64, generator=generator)   # a fixed upstream gradient
scales = torch.logspace(0, 3, 25)


def gradient(x):
    x = x.clone().requires_grad_(True)
    return torch.autograd.grad((stable_softmax(x) * weights).sum(), x)[0]


# %% Forward and backward, with and without the block
# Forward: the fraction of rows with a NaN or an infinity, for the naive formula
# `exp(x) / Σ exp(x)` and for the shifted one. Backward: the gradient of the shifted softmax
# as written and inside `disable_blocks("softmax.max")`, where it also flows through the max.

naive_nan, stable_nan, difference = [], [], []
for c in scales:
    x = c * x0
    naive_nan.append(float((~naive_softmax(x).isfinite().all(1)).float().mean()))
    stable_nan.append(float((~stable_softmax(x).isfinite().all(1)).float().mean()))
    with_block = gradient(x)
    with disable_blocks("softmax.max"):
        without_block = gradient(x)
    difference.append(float((with_block - without_block).abs().max() / with_block.abs().max()))
print(f"largest relative gradient difference: {max(difference):.3g} "
      f"(float32 eps {torch.finfo(torch.float32).eps:.3g})")

# %% What it shows
# Left: the naive formula overflows once a logit passes log(finfo.max) ≈ 88.72 in float32, and
# its rows turn to NaN; the shifted one never does. Right: with and without the block the
# gradients agree to rounding, as shift invariance says: the block costs nothing and saves the
# graph through the max.

fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
left.semilogx(scales, naive_nan, "--", color="#404040", label="naive exp(x) / Σ exp(x)")
left.semilogx(scales, stable_nan, color="#0072B2", label="shifted by the max (the block)")
left.set(xlabel="scale c of the logits", ylabel="rows with NaN or inf", title="Forward, float32")
left.legend()
right.loglog(scales, [max(d, 1e-10) for d in difference], "o-", color="#D55E00",
             label="|∇ with − ∇ without| / max|∇|")
right.axhline(torch.finfo(torch.float32).eps, color="#404040", ls=":", label="float32 eps")
right.set(xlabel="scale c of the logits", title="Gradient: with vs without the block")
right.legend()
fig.tight_layout()
plt.show()
