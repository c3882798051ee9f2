"""The previous iterate of a variance-reduced gradient bound to the model itself: ``previous =
model`` where the published code keeps ``copy.deepcopy(model)``. STORM (Cutkosky and Orabona
2019, "Momentum-Based Variance Reduction in Non-Convex SGD", arXiv:1905.10018: ``d_t = g(x_t) +
(1 - a)(d_{t-1} - g(x_{t-1}))``, both gradients on the same minibatch) and SARAH (Nguyen et al.
2017, arXiv:1703.00102: ``v_t = g(w_t) - g(w_{t-1}) + v_{t-1}``) each take a minibatch's
gradient at the weights and at the previous iterate, a second network the script differentiates
and clears by its own name. Bound to the model, that network's ``zero_grad()`` clears the
gradient the model's loss just wrote, and its backward writes its own into the model's tensors:
the correction is of the model with itself. The fix is the binding, a deep copy, not the clear.

Guards: both as published; a clear inside a gradient-accumulation loop through the trained
network's own name, while another name binds it for evaluation (a clear to move, no copy to
make); and a second name's clear before the backward (one network, cleared once per update)."""

from __future__ import annotations

import pytest
from script_audit import applied, assert_trains_as, audit, cli, failures, twins

HEAD = """\
import argparse
import copy
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)
x_all = torch.randn(128, 6)
y_all = (x_all @ torch.randn(6)).gt(0).long()
"""

STORM = HEAD + """
model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
d = None
for step in range(6):
    idx = torch.randint(0, 128, (16,))
    loss = F.cross_entropy(model(x_all[idx]), y_all[idx])
    optimizer.zero_grad()
    loss.backward()
    if d is None:   # d_1 = g(x_1)
        d = [p.grad.clone() for p in model.parameters()]
    else:
        previous_loss = F.cross_entropy(previous(x_all[idx]), y_all[idx])
        previous.zero_grad()
        previous_loss.backward()
        with torch.no_grad():
            d = [p.grad + 0.9 * (dk - q.grad)
                 for p, q, dk in zip(model.parameters(), previous.parameters(), d)]
            for p, dk in zip(model.parameters(), d):
                p.grad.copy_(dk)
    previous = PREVIOUS
    optimizer.step()
if args.out:
    torch.save({"model": model.state_dict(), "previous": previous.state_dict()}, args.out)
"""

SARAH = HEAD + """
net = nn.Sequential(nn.Linear(6, 24), nn.ReLU(), nn.Linear(24, 2))
opt = torch.optim.SGD(net.parameters(), lr=0.05)
for step in range(3):   # plain SGD first
    idx = torch.randint(0, 128, (16,))
    loss = F.cross_entropy(net(x_all[idx]), y_all[idx])
    opt.zero_grad()
    loss.backward()
    opt.step()

for epoch in range(2):   # SARAH: v_0 the full gradient, then the recursive estimate
    opt.zero_grad()
    F.cross_entropy(net(x_all), y_all).backward()
    v = [p.grad.clone() for p in net.parameters()]
    last = copy.deepcopy(net)
    opt.step()
    for t in range(3):
        idx = torch.randint(0, 128, (16,))
        loss = F.cross_entropy(net(x_all[idx]), y_all[idx])
        opt.zero_grad()
        loss.backward()
        last_loss = F.cross_entropy(last(x_all[idx]), y_all[idx])
        last.zero_grad()
        last_loss.backward()
        with torch.no_grad():
            v = [p.grad - q.grad + vk for p, q, vk in zip(net.parameters(), last.parameters(), v)]
            for p, vk in zip(net.parameters(), v):
                p.grad.copy_(vk)
        last = LAST
        opt.step()
if args.out:
    torch.save(net.state_dict(), args.out)
"""

BUGS = {
    "storm-previous-iterate": (STORM.replace("PREVIOUS", "copy.deepcopy(model)"),
                               STORM.replace("PREVIOUS", "model"), "previous = model",
                               ("model.", "previous.")),
    "sarah-last-iterate": (SARAH.replace("LAST", "copy.deepcopy(net)"),
                           SARAH.replace("LAST", "net"), "last = net",
                           ("net.", "last.")),
}


@pytest.mark.parametrize("case", sorted(BUGS))
def test_a_previous_iterate_bound_to_the_model_is_named_and_copied(tmp_path, case):
    published, buggy, binding, networks = BUGS[case]
    folder = twins(tmp_path, published, buggy)
    assert audit(tmp_path, folder / "published.py", "--watch", "1")[0] == 0
    code, report = audit(tmp_path, folder / "train.py", "--watch", "1")
    found = failures(report)
    assert code == 1 and found, report["findings"]
    assert any(n.startswith(networks) for f in found for n in f["names"]), found
    line = next(i for i, text in enumerate(buggy.splitlines(), 1) if text.strip() == binding)
    assert any(at.startswith(f"train.py:{line}:") for f in found for at in f["at"]), found
    applied(folder, found[0]["kind"], "--watch", "1")
    assert cli("--watch", "1", "train.py", cwd=folder).returncode == 0
    assert_trains_as(folder)


ACCUMULATION = HEAD + """
model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 2))
eval_net = model
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for step in range(4):
    for micro in range(2):
        idx = torch.randint(0, 128, (8,))
        loss = F.cross_entropy(model(x_all[idx]), y_all[idx]) / 2
        model.zero_grad()
        loss.backward()
    optimizer.step()
    with torch.no_grad():
        accuracy = (eval_net(x_all).argmax(1) == y_all).float().mean()
"""

CLEARED_FIRST = HEAD + """
model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 2))
net = model
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(4):
    idx = torch.randint(0, 128, (16,))
    net.zero_grad()
    loss = F.cross_entropy(model(x_all[idx]), y_all[idx])
    loss.backward()
    optimizer.step()
"""


def test_a_clear_through_the_trained_name_is_moved_not_copied(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(ACCUMULATION, encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    found = failures(report)
    assert code == 1 and {f["kind"] for f in found} == {"cleared"}, found
    assert not any("deepcopy" in str(f) for f in found), found


GUARDS = {"storm-as-published": BUGS["storm-previous-iterate"][0],
          "sarah-as-published": BUGS["sarah-last-iterate"][0],
          "second-name-cleared-before-the-backward": CLEARED_FIRST}


@pytest.mark.parametrize("case", sorted(GUARDS))
def test_a_previous_iterate_of_its_own_is_no_failure(tmp_path, case):
    script = tmp_path / "train.py"
    script.write_text(GUARDS[case], encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    assert code == 0 and not failures(report), report["findings"]
