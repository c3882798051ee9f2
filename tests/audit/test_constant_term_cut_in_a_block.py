"""A term of a loss computed under ``torch.no_grad()`` from values that carry a graph to the
tensors the loss's optimizer steps (BEAR's actor loss, whose conservative Q term scores the
actor's actions, made before the block, with a critic called in it): the block cuts the path
to those tensors, so the term is a constant whether the network called in the block is
stepped by this loss's optimizer or not. Found as a scalar term and as one added element for
element before the loss's mean; a fixed distribution's own entropy inside a KL (an elementwise
term scaled by the target's probabilities) stays a comparison."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from script_audit import applied_and_trains, twins
from torch import nn

from toolkit.audit import audit_step

torch.manual_seed(0)
actor, critic = nn.Linear(3, 2), nn.Linear(5, 1)
optimizer = torch.optim.SGD(actor.parameters(), lr=0.1)
S = torch.randn(8, 3)


def scalar_term() -> torch.Tensor:
    actions = actor(S)
    with torch.no_grad():
        q = critic(torch.cat([S, actions], 1))
    return (-q).mean() + 0.1 * actions.pow(2).sum(1).mean()


def elementwise_term() -> torch.Tensor:
    actions = actor(S)
    with torch.no_grad():
        q = critic(torch.cat([S, actions], 1)).squeeze(1)
    return (-q + 0.1 * actions.pow(2).sum(1)).mean()


def fixed_side_of_a_kl() -> torch.Tensor:
    logits = actor(S)
    with torch.no_grad():
        q = F.softmax(logits * 2, dim=1)
    return (q * (torch.log(q) - F.log_softmax(logits, dim=1))).sum(1).mean()


layer, head = nn.Linear(3, 4), nn.Linear(4, 2)
local_optimizer = torch.optim.SGD([*layer.parameters(), *head.parameters()], lr=0.1)
Y = torch.randint(0, 2, (8,))


def local_losses_and_a_head() -> torch.Tensor:
    local = layer(S).pow(2).mean()          # the layer's own loss (Forward-Forward's)
    with torch.no_grad():                   # its activity cut on purpose, the head cut by mistake
        logits = head(layer(S))
    return local + F.cross_entropy(logits, Y)


def test_a_network_run_in_the_block_keeps_its_own_cut():
    (found,) = audit_step(local_losses_and_a_head, local_optimizer).constant_terms
    assert set(found.through) == {"head.weight", "head.bias"}


@pytest.mark.parametrize("step", [scalar_term, elementwise_term], ids=["scalar", "elementwise"])
def test_a_term_cut_by_a_block_from_the_stepped_tensors_is_a_constant(step):
    (found,) = audit_step(step, optimizer).constant_terms
    assert set(found.through) == {"actor.weight", "actor.bias"}
    assert found.cut == "no_grad" and found.edits


def test_a_fixed_distribution_inside_a_kl_is_no_term():
    assert not audit_step(fixed_side_of_a_kl, optimizer).constant_terms


SCRIPT = """\
import argparse
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default="")
args = parser.parse_args()
torch.manual_seed(0)
actor, critic = nn.Linear(3, 2), nn.Linear(5, 1)
actor_optimizer = torch.optim.Adam(actor.parameters(), lr=1e-2)
critic_optimizer = torch.optim.Adam(critic.parameters(), lr=1e-2)
for it in range(6):
    s, r = torch.randn(16, 3), torch.randn(16, 1)
    critic_loss = (critic(torch.cat([s, torch.randn(16, 2)], 1)) - r).pow(2).mean()
    critic_optimizer.zero_grad()
    critic_loss.backward()
    critic_optimizer.step()
    actions = actor(s)
BLOCK
    actor_loss = (-q + 0.1 * actions.pow(2).sum(1, keepdim=True)).mean()
    actor_optimizer.zero_grad()
    actor_loss.backward()
    actor_optimizer.step()
if args.out:
    torch.save({"actor": actor.state_dict(), "critic": critic.state_dict()}, args.out)
"""


def test_the_block_is_taken_away_and_the_actor_trains_as_published(tmp_path):
    call = "q = critic(torch.cat([s, actions], 1))"
    folder = twins(tmp_path, SCRIPT.replace("BLOCK", f"    {call}"),
                   SCRIPT.replace("BLOCK", f"    with torch.no_grad():\n        {call}"))
    done = applied_and_trains(folder, "constant_term", "--watch", "1")
    assert "train.py:19" in done.stdout
