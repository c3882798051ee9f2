"""What each metric the adversarial_training experiment logs means (its ``METRICS``).

Training curves are logged once per epoch (``step``), per method: plain training
(``standard``), PGD adversarial training (``pgd``) and FGSM with a random start
(``fgsm_rs``); the graph sizes once per attack step count, the gradient cosines once.
"""

from toolkit.lab.results.schema import MetricDoc

_METHOD = "{method:standard|pgd|fgsm_rs}"

METRICS = (
    MetricDoc(key=f"{{variant}}/{_METHOD}/loss",
              meaning="mean training loss over the epoch, on the inputs the model was fitted "
                      "to (adversarial ones unless the method is standard)",
              unit="nats per example"),
    MetricDoc(key=f"{{variant}}/{_METHOD}/train_acc",
              meaning="accuracy over the epoch on the inputs the model was fitted to"),
    MetricDoc(key=f"{{variant}}/{_METHOD}/clean_acc",
              meaning="accuracy on the held-out check batch after the epoch"),
    MetricDoc(key=f"{{variant}}/{_METHOD}/robust_acc",
              meaning="accuracy on the held-out check batch under a PGD attack after the "
                      "epoch"),
    MetricDoc(key="{variant}/memory/graph_nodes",
              meaning="autograd nodes in the graph of one PGD adversarial-training loss "
                      "(step: attack steps); flat with the block, growing without it",
              unit="nodes"),
    MetricDoc(key="unblocked/grad/cosine_{model:init|trained}_{norm:linf|l2}",
              meaning="cosine between the parameter gradients of the adversarial loss with "
                      "and without the block, for the untrained or the trained network and "
                      "L∞ (sign) or L2 attack steps; 1 when unrolling the attack changes "
                      "nothing"),
)
