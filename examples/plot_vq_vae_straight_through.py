"""VQ-VAE: the straight-through estimator, with and without its block.

The encoder's output z_e is replaced by its nearest code e; the argmin has no gradient, so
z_q = z_e + stop_gradient(e − z_e), the block `"vq_vae.straight_through"`, copies the
decoder's gradient to the encoder (van den Oord et al. 2017). Inside
`disable_blocks("vq_vae.straight_through")`, z_q = e exactly and ∂z_q/∂z_e = I − I = 0.
"""

import matplotlib.pyplot as plt
import torch

from toolkit import disable_blocks
from toolkit.algorithms.vq_vae import VQVAE, encoder_recon_grad_norm, train_vq_vae
from toolkit.lab.data import digits

# %% Training on digits
# scikit-learn's 8×8 digits, 1400 to train and the rest to test. After every epoch: the test
# reconstruction error, and the norm of the reconstruction loss's gradient with respect to
# the encoder's parameters.

X, _ = digits()
train_X, test_X = X[:1400], X[1400:]


def train(epochs=12):
    """Test reconstruction error and the encoder's reconstruction gradient after each epoch."""
    torch.manual_seed(0)
    model = VQVAE(64)
    model.init_codebook(train_X[:256], generator=torch.Generator().manual_seed(0))
    test_mse, encoder_grad = [], []

    def callback(epoch, row):
        with torch.no_grad():
            test_mse.append(float(model(test_X).recon))
        encoder_grad.append(encoder_recon_grad_norm(model, test_X))

    train_vq_vae(model, train_X, epochs=epochs, generator=torch.Generator().manual_seed(0),
                 callback=callback)
    return test_mse, encoder_grad


# %% With and without the block

with_block = train()
with disable_blocks("vq_vae.straight_through"):
    without_block = train()
mean_digit = float(((test_X - train_X.mean(0)) ** 2).mean())
print(f"test MSE after 12 epochs: {with_block[0][-1]:.3g} with the block, "
      f"{without_block[0][-1]:.3g} without (mean digit: {mean_digit:.3g}); encoder gradient "
      f"{with_block[1][-1]:.3g} and {without_block[1][-1]:.3g}")

# %% What it shows
# Without the block the encoder receives exactly zero reconstruction gradient (right): its
# codes stop tracking the digits and the reconstructions stay near the average digit (left).

fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
epochs = range(1, 13)
for (mse, grad), style, color, label in [(with_block, "o-", "#0072B2", "with the block"),
                                          (without_block, "s--", "#D55E00", "without it")]:
    left.plot(epochs, mse, style, color=color, label=label)
    right.plot(epochs, grad, style, color=color, label=label)
left.axhline(mean_digit, color="#404040", ls=":", label="predicting the mean digit")
left.set(xlabel="epoch", ylabel="MSE", title="Test reconstruction error")
right.set(xlabel="epoch", ylabel="‖∂ recon / ∂ encoder‖", title="Reconstruction gradient "
          "reaching the encoder")
left.legend(), right.legend(), fig.tight_layout()
plt.show()
