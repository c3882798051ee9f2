"""What each metric the rbm_cd experiment logs means (its ``METRICS``).

Logged every ``log_every`` epochs (``step``), per training method: CD-1 (``cd1``), CD-10
(``cd10``) and PCD (``pcd``); ``sampled`` trains with stochastic Gibbs chains (with the block
only), ``sklearn`` and ``toolkit`` are scikit-learn's and this toolkit's ``BernoulliRBM``
estimators with the same parameters.
"""

from toolkit.lab.results.schema import MetricDoc

_METHOD = "{method:cd1|cd10|pcd}"

METRICS = (
    MetricDoc(key=f"{{fit:blocked|unblocked|sampled}}/{_METHOD}/loglik",
              meaning="exact mean log-likelihood of the training data (log Z by enumerating "
                      "the hidden layer)", unit="nats per sample"),
    MetricDoc(key=f"{{fit:blocked|unblocked|sampled}}/{_METHOD}/cos_exact",
              meaning="cosine between the gradient applied at the epoch's first mini-batch "
                      "and the exact log-likelihood gradient"),
    MetricDoc(key=f"{{fit:blocked|unblocked|sampled}}/{_METHOD}/cos_cd",
              meaning="cosine between the gradient applied at the epoch's first mini-batch "
                      "and the CD update at the same samples (1 with the block)"),
    MetricDoc(key="{peer:sklearn|toolkit}/{method:cd1|pcd}/loglik",
              meaning="exact mean log-likelihood of the training data after the peer "
                      "estimator's fit (scikit-learn: PCD-1 only)", unit="nats per sample"),
)
