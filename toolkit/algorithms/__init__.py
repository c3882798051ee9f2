"""Reference implementations of the places where a gradient must be cut.

Each algorithm exports ``BLOCK``, the name of its one cut, made through :mod:`toolkit.core`:

- ``softmax``: ``"softmax.max"`` (stable softmax, log-softmax, logsumexp)
- ``em``: ``"em.responsibilities"`` (EM for Gaussian mixtures)
- ``rbm``: ``"rbm.negative_samples"`` (contrastive divergence for RBMs)
- ``adversarial``: ``"adversarial.examples"`` (adversarial training)
- ``td``: ``"td.target"`` (TD learning)
- ``simsiam``: ``"simsiam.target"`` (SimSiam)
- ``vq_vae``: ``"vq_vae.straight_through"`` (VQ-VAE's straight-through estimator)
- ``dice``: ``"dice.magic_box"`` (DiCE)

:mod:`toolkit.algorithms.divergence` is no algorithm: it is the training loops' shared record
of where a value became non-finite.
"""
