"""Restricted Boltzmann machines trained by contrastive divergence (CD-k) and persistent CD.

The package is laid out so that the cut is easy to find:

- :mod:`~toolkit.algorithms.rbm.core`: :data:`BLOCK` (``"rbm.negative_samples"``) at the top,
  then the free energy, the conditionals, the Gibbs chain and :func:`cd_loss`, whose one cut is
  the block;
- :mod:`~toolkit.algorithms.rbm.likelihood`: exact ``log Z`` (enumeration of the smaller layer),
  annealed importance sampling and the (deterministic) pseudo-likelihood;
- :mod:`~toolkit.algorithms.rbm.training`: :func:`train_cd`, the one training loop (CD-k and
  PCD-k, with a ``callback`` that sees every update);
- :mod:`~toolkit.algorithms.rbm.estimator`: :class:`BernoulliRBM`, a scikit-learn transformer
  trained by that loop (scikit-learn's parameters, defaults and PCD-1; values in [0, 1],
  others computed as scikit-learn does, with a :class:`DataRangeWarning`);
- :mod:`~toolkit.algorithms.rbm.inputs`: what it accepts, dense data or scipy.sparse matrices
  read a block of rows at a time.
"""

from toolkit.algorithms.rbm.core import (
    BLOCK,
    CHAINS,
    RBMParams,
    cd_gradient,
    cd_loss,
    free_energy,
    gibbs_chain,
    init_params,
    negative_samples,
    sample_hidden,
    sample_visible,
)
from toolkit.algorithms.rbm.estimator import BernoulliRBM
from toolkit.algorithms.rbm.inputs import DataRangeWarning
from toolkit.algorithms.rbm.likelihood import (
    MAX_EXACT_UNITS,
    AISResult,
    ais_log_partition,
    exact_log_likelihood_gradient,
    exact_log_partition,
    log_likelihood,
    pseudo_log_likelihood,
)
from toolkit.algorithms.rbm.training import CDStep, TrainState, train_cd

__all__ = [
    "BLOCK",
    "CHAINS",
    "MAX_EXACT_UNITS",
    "AISResult",
    "BernoulliRBM",
    "CDStep",
    "DataRangeWarning",
    "RBMParams",
    "TrainState",
    "ais_log_partition",
    "cd_gradient",
    "cd_loss",
    "exact_log_likelihood_gradient",
    "exact_log_partition",
    "free_energy",
    "gibbs_chain",
    "init_params",
    "log_likelihood",
    "negative_samples",
    "pseudo_log_likelihood",
    "sample_hidden",
    "sample_visible",
    "train_cd",
]
