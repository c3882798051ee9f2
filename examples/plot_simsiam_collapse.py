"""SimSiam: the stop-gradient on the target branch keeps the representation from collapsing.

SimSiam minimises ½ D(p₁, stop_gradient(z₂)) + ½ D(p₂, stop_gradient(z₁)), the block
`"simsiam.target"`: each view's projection is a fixed target for the other's prediction.
Inside `disable_blocks("simsiam.*")` both branches move toward each other, and the loss can
reach its minimum −1 by making every output the same vector (Chen & He 2021, Figure 2).
"""

import matplotlib.pyplot as plt
import torch

from toolkit import disable_blocks
from toolkit.algorithms.simsiam import SimSiam, output_std, train_simsiam
from toolkit.lab.data import digits

# %% Training, and the spread of the output
# Small MLPs on scikit-learn's 8×8 digits, 25 epochs of 14 updates at lr 0.4 (the collapse
# proceeds with lr × steps). After every epoch: the loss, and the spread of the
# l2-normalised output, std(z/‖z‖) · √d: near 1 for outputs spread over the sphere, 0 when
# every output is the same vector.

X, _ = digits()


def train(epochs=25):
    """Loss and output spread (std of z/‖z‖ times √d) after every epoch."""
    torch.manual_seed(0)
    model = SimSiam(64, hidden=128, dim=64)
    spread = []

    def callback(epoch, row):
        spread.append(output_std(model.embed(X)[1]) * 64**0.5)

    history = train_simsiam(model, X, epochs=epochs, lr=0.4,
                            generator=torch.Generator().manual_seed(0), callback=callback)
    return [row["loss"] for row in history], spread


# %% With and without the block

with_block = train()
with disable_blocks("simsiam.*"):
    without_block = train()
print(f"after 25 epochs: spread {with_block[1][-1]:.3g} with the block, "
      f"{without_block[1][-1]:.3g} without; loss {with_block[0][-1]:.3g} and "
      f"{without_block[0][-1]:.3g}")

# %% What it shows
# Without the block the loss falls toward −1 (left) and the spread toward 0 (right): the
# representation collapses. With the block the spread stays near 1.

fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
for (loss, spread), style, color, label in [(with_block, "-", "#0072B2", "with the block"),
                                             (without_block, "--", "#D55E00", "without it")]:
    left.plot(range(1, len(loss) + 1), loss, style, color=color, label=label)
    right.plot(range(1, len(spread) + 1), spread, style, color=color, label=label)
left.axhline(-1, color="#404040", ls=":", label="minimum, −1 (a constant output)")
left.set(xlabel="epoch", ylabel="SimSiam loss", title="Training loss")
right.set(xlabel="epoch", ylabel="std(z/‖z‖) · √d", ylim=(0, 1.1),
          title="Spread of the output (0: collapsed)")
left.legend()
right.legend()
fig.tight_layout()
plt.show()
