"""The lens: a DQN target network's backward graph, with and without its cut.

Name the cut in your own training step and the lens shows where gradient flows. Here a DQN
step computes its target behind `as_constant(..., name="dqn.target")`.
"""

import copy

import torch
from torch import nn

from toolkit import as_constant, disable_blocks, draw_gradient_graph, gradient_flow

# %% A DQN step with a named cut
# An online network `q`, its copy `q_target`, a batch of 32 transitions, and the TD loss with
# the target computed as a constant named `"dqn.target"`.

torch.manual_seed(0)
q = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2))
q_target = copy.deepcopy(q)
s, a, r, s2 = torch.randn(32, 4), torch.randint(0, 2, (32,)), torch.randn(32), torch.randn(32, 4)


def td_loss():
    q_sa = q(s).gather(1, a[:, None]).squeeze(1)
    target = r + 0.99 * as_constant(lambda: q_target(s2).max(1).values, name="dqn.target")
    return nn.functional.smooth_l1_loss(q_sa, target)


groups = {"online": q, "target": q_target}

# %% With the cut
# `draw_gradient_graph` draws the backward graph from the loss (top) to the parameter groups,
# the cut as a red dashed node and everything behind it greyed out: no gradient reaches the
# target network.

with_cut = draw_gradient_graph(td_loss, groups, title="with the cut dqn.target")

# %% Without it
# Inside `disable_blocks("dqn.target")` the gradient also reaches the target network.

with disable_blocks("dqn.target"):
    without_cut = draw_gradient_graph(td_loss, groups, title="without it")

# %% The same as a table
# `gradient_flow` tabulates each group's gradient with every block active, then with each block
# disabled.

print(gradient_flow(td_loss, groups))

# %% Keep the drawings
# Run on its own, the script leaves both drawings as PNG files beside it.

with_cut.savefig("dqn_graph_with_cut.png")
without_cut.savefig("dqn_graph_without_cut.png")
