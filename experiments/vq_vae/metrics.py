"""What each metric the vq_vae experiment logs means (its ``METRICS``).

Logged once per training epoch (``step``). Besides the two variants, three ablations each
disable one block: ``without_straight_through`` (``vq_vae.straight_through``),
``without_codebook`` (``vq_vae.codebook``) and ``without_commitment``
(``vq_vae.commitment``).
"""

from toolkit.lab.results.schema import MetricDoc

_FIT = "{fit:blocked|unblocked|without_straight_through|without_codebook|without_commitment}"

METRICS = (
    MetricDoc(key=f"{_FIT}/test/recon_mse",
              meaning="mean squared reconstruction error on the test digits (pixels scaled to "
                      "[0, 1])"),
    MetricDoc(key=f"{_FIT}/train/recon",
              meaning="mean reconstruction loss on the training digits over the epoch"),
    MetricDoc(key=f"{_FIT}/codes/perplexity",
              meaning="exp(entropy) of the codes' usage on the test digits: 1 when one code is "
                      "used, the number of codes when all are used equally", unit="codes"),
)
