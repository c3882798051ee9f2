"""What each metric the simsiam experiment logs means (its ``METRICS``).

Logged once per training epoch (``step``).
"""

from toolkit.lab.results.schema import MetricDoc

METRICS = (
    MetricDoc(key="{variant}/train/loss",
              meaning="mean SimSiam loss ½ D(p₁, z₂) + ½ D(p₂, z₁) over the epoch, D the "
                      "negative cosine; −1 is its minimum, reached by a constant output"),
    MetricDoc(key="{variant}/test/output_std_sqrt_d",
              meaning="std(z/‖z‖) · √d of the test outputs: near 1 for outputs spread over "
                      "the sphere, 0 when every output is the same vector (collapse)"),
)
