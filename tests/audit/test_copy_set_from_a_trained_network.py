"""A copy the script sets from a trained network is not left out of an optimizer: TD7
(Fujimoto et al. 2023, sfujim/TD7's TD7.py) reads the state-action embedding of a fixed copy of
its encoder on the actor's path, ``fixed_encoder.zsa(fixed_zs, actor(state, fixed_zs))``, and
every few steps loads the copy from the encoder, which its own optimizer trains. The actor's
loss writes gradient into the copy's tensors on the way to the actor, and no optimizer steps
them: work done in vain (information), since the script sets them itself. The same copy that
nothing sets (the ``load_state_dict`` line gone), or that is set from a network no optimizer
steps, is still a network the loss trains that no optimizer steps: a failure."""

from __future__ import annotations

import pytest
from script_audit import audit, failures

pytestmark = pytest.mark.slow

SCRIPT = """\
import copy
import torch
from torch import nn

torch.manual_seed(0)
encoder = nn.Linear(3, 4)
actor = nn.Linear(2, 1)
critic = nn.Linear(4, 1)
fixed_encoder = copy.deepcopy(encoder)
SOURCE
encoder_optimizer = torch.optim.Adam(encoder.parameters(), lr=1e-2)
actor_optimizer = torch.optim.Adam(actor.parameters(), lr=1e-2)
critic_optimizer = torch.optim.Adam(critic.parameters(), lr=1e-2)
for step in range(6):
    state = torch.randn(8, 2)
    next_embedding = torch.randn(8, 4)
    embedded = encoder(torch.cat([state, torch.randn(8, 1)], 1))
    encoder_loss = ((embedded - next_embedding) ** 2).mean()
    encoder_optimizer.zero_grad()
    encoder_loss.backward()
    encoder_optimizer.step()
    with torch.no_grad():
        embedding = fixed_encoder(torch.cat([state, torch.randn(8, 1)], 1))
    critic_loss = ((critic(embedding) - torch.randn(8, 1)) ** 2).mean()
    critic_optimizer.zero_grad()
    critic_loss.backward()
    critic_optimizer.step()
    actor_loss = -critic(fixed_encoder(torch.cat([state, actor(state)], 1))).mean()
    actor_optimizer.zero_grad()
    actor_loss.backward()
    actor_optimizer.step()
    if step % 3 == 2:
        LOAD
"""


@pytest.mark.parametrize(("source", "load", "found"), [
    ("", "fixed_encoder.load_state_dict(encoder.state_dict())", False),
    ("", "pass", True),
    # set from a network no optimizer steps (averaged by hand, say): nothing says it follows
    # one that trains
    ("server = copy.deepcopy(encoder)", "fixed_encoder.load_state_dict(server.state_dict())",
     True),
], ids=["set_from_the_trained_encoder", "set_by_nothing", "set_from_an_untrained_network"])
def test_a_copy_set_from_a_trained_network_is_work_in_vain(tmp_path, source, load, found):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.replace("SOURCE", source).replace("LOAD", load), encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    unstepped = [f for f in failures(report) if f["kind"] == "unstepped"]
    assert bool(unstepped) == found, [f["message"] for f in failures(report)]
    assert (code == 1) == found, [f["message"] for f in failures(report)]
    if not found:
        wasted = [f for f in report["findings"] if f["kind"] == "wasted"
                  and "fixed_encoder" in f["message"]]
        assert wasted and "sets them from `encoder`" in wasted[0]["message"], wasted
