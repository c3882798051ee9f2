"""Softmax, log-softmax and log-sum-exp with the max shift behind the block ``"softmax.max"``.

- :mod:`~toolkit.algorithms.softmax.functions`: the functions and their one block, ``BLOCK``
  (``z = x - stop_gradient(max x)``, computed through :func:`toolkit.as_constant`);
- :mod:`~toolkit.algorithms.softmax.inputs`: argument checks and conversion.
"""

from toolkit.algorithms.softmax.functions import (
    BLOCK,
    log_softmax,
    logsumexp,
    naive_softmax,
    stable_softmax,
)

__all__ = ["BLOCK", "log_softmax", "logsumexp", "naive_softmax", "stable_softmax"]
