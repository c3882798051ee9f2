"""Target networks aliased in two more spellings, each copied where it is made, and the edit
trains as the published script:

- a list of targets made as a shallow copy of the list of online networks (REDQ's ensemble,
  watchernyu/REDQ ``redq_sac.py`` makes each target ``copy.deepcopy``; ``list(q_nets)`` holds
  the same networks): the edit copies the list deeply, ``copy.deepcopy(q_nets)``;
- a pair of targets bound in one tuple assignment (discrete SAC's twin critics, CleanRL
  ``sac_atari.py`` loads each target from its critic): each item is copied alone,
  ``qf1_target, qf2_target = copy.deepcopy(qf1), copy.deepcopy(qf2)``.
"""

from __future__ import annotations

import pytest
from script_audit import applied, assert_trains_as, audit, cli, failures, twins

SCRIPT = """\
import copy
import sys

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
nets = [nn.Linear(3, 1) for _ in range(2)]
MADE
optimizers = [torch.optim.SGD(n.parameters(), lr=0.05) for n in nets]
for step in range(4):
    obs, next_obs, r = torch.randn(8, 3), torch.randn(8, 3), torch.randn(8, 1)
    with torch.no_grad():
        target = r + 0.9 * torch.min(READ)
    for net, optimizer in zip(nets, optimizers):
        loss = F.mse_loss(net(obs), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        for t_net, net in zip(TARGETS, nets):
            for t, p in zip(t_net.parameters(), net.parameters()):
                t.mul_(0.9).add_(0.1 * p)
if "--out" in sys.argv:
    torch.save({f"net{i}": n.state_dict() for i, n in enumerate(nets)},
               sys.argv[sys.argv.index("--out") + 1])
"""

PAIR = """\
import copy
import sys

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
qf1, qf2 = nn.Linear(3, 1), nn.Linear(3, 1)
MADE
optimizer = torch.optim.SGD([*qf1.parameters(), *qf2.parameters()], lr=0.05)
for step in range(4):
    obs, next_obs, r = torch.randn(8, 3), torch.randn(8, 3), torch.randn(8, 1)
    with torch.no_grad():
        target = r + 0.9 * torch.min(qf1_target(next_obs), qf2_target(next_obs))
    loss = F.mse_loss(qf1(obs), target) + F.mse_loss(qf2(obs), target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        for t_net, net in ((qf1_target, qf1), (qf2_target, qf2)):
            for t, p in zip(t_net.parameters(), net.parameters()):
                t.mul_(0.9).add_(0.1 * p)
if "--out" in sys.argv:
    torch.save({"qf1": qf1.state_dict(), "qf2": qf2.state_dict()},
               sys.argv[sys.argv.index("--out") + 1])
"""


@pytest.mark.parametrize(("script", "published", "buggy"), [
    (SCRIPT.replace("READ", "targets[0](next_obs), targets[1](next_obs)")
     .replace("TARGETS", "targets"), "targets = copy.deepcopy(nets)", "targets = list(nets)"),
    (PAIR, "qf1_target, qf2_target = copy.deepcopy(qf1), copy.deepcopy(qf2)",
     "qf1_target, qf2_target = qf1, qf2"),
], ids=["list_of_the_online_networks", "tuple_assignment"])
def test_an_alias_in_a_container_or_a_pair_is_copied_where_it_is_made(
        tmp_path, script, published, buggy):
    folder = twins(tmp_path, script.replace("MADE", published), script.replace("MADE", buggy))
    assert audit(tmp_path, folder / "published.py", "--watch", "1")[0] == 0
    code, report = audit(tmp_path, folder / "train.py", "--watch", "1")
    found = [f for f in failures(report) if f["kind"] == "aliased"]
    assert code == 1 and found, failures(report)
    assert all(f["at"][0] == f"train.py:10: {buggy}" for f in found), found
    applied(folder, "aliased", "--watch", "1")
    assert f"{published}\n" in (folder / "train.py").read_text()
    assert cli("--watch", "1", "train.py", cwd=folder).returncode == 0
    assert_trains_as(folder)
