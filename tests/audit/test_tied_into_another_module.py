"""``toolkit audit SCRIPT``, a tensor tied into a module from the network another optimizer
trains: SAC-AE's and DrQ's actor takes the critic's convolutions by assignment
(``copy_conv_weights_from``: ``conv.weight = source_conv.weight``, denisyarats/drq, drq.py), its
optimizer is built over ``actor.parameters()`` and so holds them, and the actor's loss reads the
encoder cut (``detach_encoder=True``): the critic's loss trains them, the actor's optimizer skips
them. No ``dead`` finding: the tie says whose they are. The same cut with the encoder listed in
the actor's optimizer on purpose, no tie (InfoGAN's information optimizer over the generator,
:mod:`test_principle_held_twice`), keeps the encoder from a loss meant to train it: dead.
"""

from __future__ import annotations

import pytest
from script_audit import audit, failures

_SCRIPT = """\\
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Linear(6, 8)
        self.head = nn.Linear(8, 4)

    def forward(self, obs, detach=False):
        h = torch.relu(self.conv(obs))
        if detach:
            h = h.detach()
        return self.head(h)


critic_encoder, actor_encoder = Encoder(), Encoder()
q_head, pi_head = nn.Linear(4 + 2, 1), nn.Linear(4, 2)
{tie}
critic_optimizer = torch.optim.Adam([*critic_encoder.parameters(), *q_head.parameters()], lr=1e-3)
actor_optimizer = torch.optim.Adam([*actor_encoder.parameters(), {listed}*pi_head.parameters()],
                                   lr=1e-3)
for _ in range(3):
    obs, action, target = torch.randn(8, 6), torch.randn(8, 2), torch.randn(8, 1)
    q = q_head(torch.cat([critic_encoder(obs), action], 1))
    critic_loss = F.mse_loss(q, target)
    critic_optimizer.zero_grad()
    critic_loss.backward()
    critic_optimizer.step()
    pi = torch.tanh(pi_head(actor_encoder(obs, detach=True)))
    actor_q = q_head(torch.cat([critic_encoder(obs, detach=True), pi], 1))
    actor_loss = -actor_q.mean()
    actor_optimizer.zero_grad()
    actor_loss.backward()
    actor_optimizer.step()
"""

_TIE = "actor_encoder.conv.weight = critic_encoder.conv.weight\n" \
       "actor_encoder.conv.bias = critic_encoder.conv.bias"
# no tie: the actor's optimizer is given the critic's convolution on purpose
_LISTED = "*critic_encoder.conv.parameters(), "


@pytest.mark.parametrize(("tie", "listed", "dead"), [(_TIE, "", False), ("", _LISTED, True)],
                         ids=["tied_by_assignment", "listed_in_the_optimizer"])
def test_a_tensor_tied_from_a_network_another_optimizer_trains_is_its(tmp_path, tie, listed,
                                                                      dead):
    script = tmp_path / "drq.py"
    script.write_text(_SCRIPT.format(tie=tie, listed=listed))
    code, report = audit(tmp_path, script)
    found = failures(report)
    if not dead:
        assert code == 0 and found == [], found
    else:
        assert code == 1 and [f["kind"] for f in found] == ["dead"], found
