"""``toolkit audit SCRIPT`` on three published idioms that look like a bug to a rule and are not
(each with the bug it resembles beside it, still found):

- **a reset to a snapshot** (Tent, DequanWang/tent ``tent.py``: ``copy_model_and_optimizer``
  keeps a deep copy of the model's state, ``reset`` loads it back before each domain). The
  model was copied from a source model an earlier phase trained, so the reset moves the adapted
  tensors onto the source's values: no momentum copy following a network that trains (the
  ``target`` rule of followers asks that the tensor followed was stepped since). A key encoder
  that follows the query encoder it is compared with, trained by the loss, is still one.
- **a gradient scaled** between unroll steps, ``x * s + x.detach() * (1 - s)`` (MuZero's
  pseudocode ``scale_gradient``, Schrittwieser et al. 2020): the detached half is added beside
  the same value with its graph, no constant term. A loss term made only of an output
  ``.detach()``-ed, beside another value, is still one.
- **an exact expectation over a policy's actions** (discrete SAC, Christodoulou 2019; CleanRL
  ``sac_atari.py``): ``(probs * (alpha * log_pi - q)).sum(1)`` with ``probs`` from
  ``Categorical(logits=x).probs`` and ``log_pi = log_softmax(x)``: one distribution, whose
  normalised logits ``x - x.logsumexp()`` are ``x``'s. Probabilities of the same network's
  logits for other inputs (other rows of the batch) are still a target.
"""

from __future__ import annotations

import pytest
from script_audit import audit, failures

_RESET = """\
import copy
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
source = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.Linear(6, 3))
source_optimizer = torch.optim.SGD(source.parameters(), lr=0.1)
for _ in range(3):
    loss = F.cross_entropy(source(torch.randn(8, 4)), torch.randint(0, 3, (8,)))
    source_optimizer.zero_grad()
    loss.backward()
    source_optimizer.step()
model = copy.deepcopy(source)
model.requires_grad_(False)
model[1].requires_grad_(True)
optimizer = torch.optim.SGD(model[1].parameters(), lr=0.1)
state = copy.deepcopy(model.state_dict())
for domain in range(2):
    model.load_state_dict(state)
    for _ in range(2):
        logits = model(torch.randn(8, 4) + domain)
        loss = -(logits.softmax(1) * logits.log_softmax(1)).sum(1).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
"""

_FOLLOWER = """\
import copy
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
query = nn.Linear(4, 3)
key = copy.deepcopy(query)
optimizer = torch.optim.SGD([*query.parameters(), *key.parameters()], lr=0.1)
for _ in range(4):
    x = torch.randn(8, 4)
    loss = F.mse_loss(query(x), key(x + 0.1 * torch.randn(8, 4)))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        for k, q in zip(key.parameters(), query.parameters()):
            k.mul_(0.9).add_(0.1 * q)
"""


@pytest.mark.parametrize(("script", "found"), [(_RESET, []), (_FOLLOWER, ["target"])],
                         ids=["reset_to_a_snapshot", "key_encoder_follows_the_query"])
def test_a_reset_follows_no_network_that_trains(tmp_path, script, found):
    path = tmp_path / "tent.py"
    path.write_text(script)
    code, report = audit(tmp_path, path)
    assert [f["kind"] for f in failures(report)] == found, failures(report)
    assert code == (1 if found else 0)


_UNROLL = """\
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
represent, dynamics, value = nn.Linear(4, 6), nn.Linear(6, 6), nn.Linear(6, 1)
params = [*represent.parameters(), *dynamics.parameters(), *value.parameters()]
optimizer = torch.optim.SGD(params, lr=0.1)


def scale_gradient(tensor, scale):
    return tensor * scale + tensor.detach() * (1 - scale)


for _ in range(3):
    hidden = torch.tanh(represent(torch.randn(8, 4)))
    loss = F.mse_loss(value(hidden), torch.randn(8, 1))
    for _ in range(2):
        hidden = torch.tanh(dynamics(hidden))
        step_loss = F.mse_loss(value(hidden), torch.randn(8, 1))
        {term}
        hidden = scale_gradient(hidden, 0.5)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


@pytest.mark.parametrize(("term", "found"), [
    ("loss = loss + scale_gradient(step_loss, 0.5)", []),
    ("loss = loss + step_loss.detach() * 0.5 + value(hidden).mean() * 0.0", ["constant_term"]),
], ids=["gradient_scaled", "term_detached"])
def test_a_value_added_beside_its_own_detached_copy_is_no_constant_term(tmp_path, term, found):
    path = tmp_path / "muzero.py"
    path.write_text(_UNROLL.format(term=term))
    code, report = audit(tmp_path, path)
    assert [f["kind"] for f in failures(report)] == found, failures(report)
    assert code == (1 if found else 0)


_EXPECTATION = """\
import torch
from torch import nn
from torch.distributions import Categorical

torch.manual_seed(0)
actor, critic = nn.Linear(4, 3), nn.Linear(4, 3)
optimizer = torch.optim.Adam(actor.parameters(), lr=1e-2)
for _ in range(3):
    obs = torch.randn(8, 4)
    logits = actor(obs)
    log_pi = torch.log_softmax(logits, dim=1)
    probs = Categorical(logits={weighted}).probs
    with torch.no_grad():
        q = critic(obs)
    loss = (probs * (0.2 * log_pi - q)).sum(1).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


@pytest.mark.parametrize(("weighted", "found"), [("logits", []),
                                                 ("actor(obs.flip(0))", ["target"])],
                         ids=["the_policys_own_probabilities", "other_rows_probabilities"])
def test_an_expectation_under_the_policy_is_no_target(tmp_path, weighted, found):
    path = tmp_path / "sac_discrete.py"
    path.write_text(_EXPECTATION.format(weighted=weighted))
    code, report = audit(tmp_path, path)
    assert [f["kind"] for f in failures(report)] == found, failures(report)
    assert code == (1 if found else 0)
