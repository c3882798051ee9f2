"""Adversarial examples (FGSM, PGD) and adversarial training, with the block on the examples.

- :mod:`~toolkit.algorithms.adversarial.attacks`: the functional core and its one block,
  ``BLOCK = "adversarial.examples"`` (the attack is computed through :func:`toolkit.as_constant`:
  the examples are constants for the parameter update, Danskin's theorem); ``pgd``, ``fgsm``,
  ``eval_mode``, ``predict``;
- :mod:`~toolkit.algorithms.adversarial.training`: ``adversarial_training`` (PGD-AT, Fast-FGSM,
  FGSM, with a catastrophic-overfitting check) and ``evaluate_robustness``;
- :mod:`~toolkit.algorithms.adversarial.batches`: their data (a ``DataLoader``, an iterable of
  ``(x, y)`` batches, a map-style ``Dataset`` or an ``(X, y)`` pair) as batches on the model's
  device, and the checks of every batch (finite inputs, labels in range).
"""

from toolkit.algorithms.adversarial.attacks import BLOCK, NORMS, eval_mode, fgsm, pgd, predict
from toolkit.algorithms.adversarial.training import (
    METHODS,
    CatastrophicOverfittingWarning,
    TrainingHistory,
    adversarial_training,
    evaluate_robustness,
)

__all__ = [
    "BLOCK",
    "METHODS",
    "NORMS",
    "CatastrophicOverfittingWarning",
    "TrainingHistory",
    "adversarial_training",
    "eval_mode",
    "evaluate_robustness",
    "fgsm",
    "pgd",
    "predict",
]
