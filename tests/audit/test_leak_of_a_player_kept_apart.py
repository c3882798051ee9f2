"""Two players of one objective, each with its optimizer, both backward() calls before either
step: the script keeps the first player's loss to its own network (``backward(inputs=...)``)
and leaves the second's without, so the second's gradient, the first's with its sign turned
(ValueDICE's ``pi_loss = -loss``, Kostrikov et al. 2020, each loss differentiated with respect
to its own network's variables), is added to the first's update. ``leak`` at the first
player's step; the edit gives the second backward ``inputs=`` its own optimizer's tensors, as
that optimizer was built over them, and the fixed script trains as the published one. A loss
that trains both networks beside a term kept to one of them (a reconstruction beside a
decoder's own penalty), pulling the same way, is no leak."""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, cli, twins

pytestmark = pytest.mark.slow

SCRIPT = """\
import argparse
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default="")
args = parser.parse_args()
torch.manual_seed(0)
critic, actor = nn.Linear(4, 1), nn.Linear(3, 4)
critic_opt = torch.optim.Adam(critic.parameters(), lr=0.01)
actor_opt = torch.optim.Adam(actor.parameters(), lr=0.01)
for step in range(4):
    states, expert = torch.randn(8, 3), torch.randn(8, 4)
    objective = critic(expert).mean() - critic(actor(states)).mean()
    critic_loss = -objective + 0.1 * critic.weight.pow(2).sum()
    actor_loss = objective
    critic_opt.zero_grad()
    actor_opt.zero_grad()
    critic_loss.backward(inputs=list(critic.parameters()), retain_graph=True)
ACTOR
    critic_opt.step()
    actor_opt.step()
if args.out:
    torch.save({"critic": critic.state_dict(), "actor": actor.state_dict()}, args.out)
"""

PUBLISHED = "    actor_loss.backward(inputs=list(actor.parameters()))\n"
BUG = "    actor_loss.backward()\n"

BOTH = """\
import torch
from torch import nn

torch.manual_seed(0)
encoder, decoder = nn.Linear(4, 2), nn.Linear(2, 4)
enc_opt = torch.optim.Adam(encoder.parameters(), lr=0.01)
dec_opt = torch.optim.Adam(decoder.parameters(), lr=0.01)
for step in range(4):
    x = torch.randn(8, 4)
    codes = encoder(x)
    recon = (decoder(codes) - x).pow(2).mean()
    smooth = decoder(codes).pow(2).mean()
    enc_opt.zero_grad()
    dec_opt.zero_grad()
    smooth.backward(inputs=list(decoder.parameters()), retain_graph=True)
    recon.backward()
    dec_opt.step()
    enc_opt.step()
"""


def test_the_second_players_backward_is_kept_to_its_own_network(tmp_path):
    folder = twins(tmp_path, SCRIPT.replace("ACTOR\n", PUBLISHED),
                   SCRIPT.replace("ACTOR\n", BUG))
    done = applied_and_trains(folder, "leak", "--watch", "1")
    assert "actor_loss.backward(inputs=[*actor.parameters()])" in done.stdout


def test_a_loss_that_trains_both_beside_one_kept_to_one_is_none(tmp_path):
    (tmp_path / "train.py").write_text(BOTH, encoding="utf-8")
    done = cli("--watch", "1", "train.py", cwd=tmp_path)
    assert done.returncode == 0, done.stdout
