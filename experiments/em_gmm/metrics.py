"""What each metric the em_gmm experiment logs means (its ``METRICS``).

Logged once per EM iteration (``step``), for the 2-D mixture (``train``, ``grad``) and for
the iris data (``iris``, ``grad_iris``); ``closed_form`` is EM with the closed-form M-step,
``sklearn`` scikit-learn's ``GaussianMixture`` from the same start.
"""

from toolkit.lab.results.schema import MetricDoc

_DATA = "{data:train|iris}"
_GRAD = "{grad:grad|grad_iris}"

METRICS = (
    MetricDoc(key=f"{{fit:blocked|unblocked|closed_form}}/{_DATA}/loglik",
              meaning="mean log-likelihood per sample of the current parameters",
              unit="nats per sample"),
    MetricDoc(key=f"{{fit:blocked|unblocked|closed_form}}/{_DATA}/resp_entropy",
              meaning="mean entropy of the responsibilities r (0: hard assignments)",
              unit="nats per sample"),
    MetricDoc(key=f"sklearn/{_DATA}/loglik",
              meaning="scikit-learn's lower bound on the mean log-likelihood (lower_bounds_), "
                      "from the same start", unit="nats per sample"),
    MetricDoc(key=f"{{variant}}/{_GRAD}/fisher_rel_err",
              meaning="‖∇Q − ∇LL‖ / ‖∇LL‖ at the current parameters: how far the M-step's "
                      "gradient is from the log-likelihood's (0 by Fisher's identity when r is "
                      "blocked)"),
    MetricDoc(key=f"{{variant}}/{_GRAD}/norm_loglik",
              meaning="‖∇LL‖, the norm of the log-likelihood's gradient in the unconstrained "
                      "parameters"),
    MetricDoc(key=f"{{variant}}/{_GRAD}/norm_q",
              meaning="‖∇Q‖, the norm of the M-step objective's gradient in the same "
                      "parameters"),
)
