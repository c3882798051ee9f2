"""What each metric the td_learning experiment logs means (its ``METRICS``).

Logged every ``log_every`` gradient steps or sweeps (``step``) on three problems: the A-split
(``a_split``), Baird's counterexample (``baird``) and a random chain with linear features
(``chain``). Values are in the problems' reward units.
"""

from toolkit.lab.results.schema import MetricDoc

METRICS = (
    MetricDoc(key="{variant}/a_split/V_{state:A|B|C}",
              meaning="the value estimate of that A-split state (true: A = ½, B = 1, C = 0)",
              unit="reward"),
    MetricDoc(key="{variant}/baird/weight_norm",
              meaning="‖w‖, the norm of the weight vector on Baird's counterexample (it "
                      "starts at √107)"),
    MetricDoc(key="{variant}/{problem:baird|chain}/msbe",
              meaning="mean squared Bellman error Σ_s d_s (r + γPΦw − Φw)²_s of the current "
                      "weights", unit="reward²"),
    MetricDoc(key="{variant}/chain/value_error",
              meaning="‖Φw − V‖_D, the d-weighted RMS error of the value estimate against the "
                      "true values", unit="reward"),
    MetricDoc(key="{variant}/chain/dist_td",
              meaning="‖w − w_TD‖, the distance to the TD fixed point (the blocked update's "
                      "limit)"),
    MetricDoc(key="{variant}/chain/dist_rg",
              meaning="‖w − w_RG‖, the distance to the residual-gradient fixed point (the "
                      "unblocked update's limit)"),
    MetricDoc(key="{variant}/chain_grad/norm",
              meaning="the norm of the autograd gradient of the TD loss at the blocked "
                      "iterate, with or without the block"),
    MetricDoc(key="blocked/chain_grad/cosine_vs_unblocked",
              meaning="cosine between the gradients with and without the block at the same "
                      "iterate"),
)
