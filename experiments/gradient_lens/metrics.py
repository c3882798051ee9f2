"""What each metric the gradient_lens experiment logs means (its ``METRICS``).

Logged at every SGD step (``step``) of the DQN-style agent, whose target network sits behind
a cut; the GAN step logs nothing per step.
"""

from toolkit.lab.results.schema import MetricDoc

METRICS = (
    MetricDoc(key="{variant}/td/loss",
              meaning="the agent's TD loss on its fixed batch, before the step's update"),
    MetricDoc(key="{variant}/td/target_drift",
              meaning="‖θ_target − θ_target at step 0‖: how far SGD on all the agent's "
                      "parameters has moved the target network (0 with the cut)"),
)
