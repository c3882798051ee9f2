"""What each metric the dice experiment logs means (its ``METRICS``).

``expectation``: every trajectory of the two-step policy weighted by its probability, logged
at step 0; ``monte_carlo``: from N sampled trajectories, logged at step N. ``surrogate`` is the
classic surrogate loss Σ log p · c, scored like the two variants of DiCE.
"""

from toolkit.lab.results.schema import MetricDoc

_FIT = "{fit:blocked|unblocked|surrogate}"

METRICS = (
    MetricDoc(key=f"{_FIT}/{{kind:expectation|monte_carlo}}/grad_rel_err",
              meaning="‖∇Ĵ − ∇J‖ / ‖∇J‖: the estimated gradient's error relative to the exact "
                      "one (Monte Carlo: root mean square over the repeats)"),
    MetricDoc(key=f"{_FIT}/{{kind:expectation|monte_carlo}}/hessian_rel_err",
              meaning="‖∇²Ĵ − ∇²J‖ / ‖∇²J‖: the estimated Hessian's error relative to the "
                      "exact one (Monte Carlo: root mean square over the repeats)"),
    MetricDoc(key=f"{_FIT}/expectation/grad_norm",
              meaning="‖∇Ĵ‖, the norm of the gradient in expectation (0 without the block)"),
    MetricDoc(key=f"{_FIT}/expectation/hessian_norm",
              meaning="‖∇²Ĵ‖, the norm of the Hessian in expectation (0 without the block)"),
)
