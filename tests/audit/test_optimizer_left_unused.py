"""Optimizers a script builds and leaves unused, while a loss trains what they hold:

- **never stepped**: a new generation's network and its optimizer built, only the network
  handed to the code that steps (nocotan/born_again_neuralnet's ``train.py``; its fork hands
  both): the loss trains the new network, the loop steps the old optimizer, and the new one
  never steps in the whole run. A failure at the line that builds it, with no edit (which
  optimizer the loop should step, only the script says). An optimizer built and stepped from a
  later iteration on (a phase that begins late) is no finding. An encoder's optimizer the loop
  clears beside the decoder's and never steps (the PyTorch seq2seq tutorial's ``train`` steps
  both): the step left out is inserted after the decoder's, and the script trains as published.
- **an optimizer rebuilt under the same name over a part**: IRM's Adam reset once the penalty
  is annealed (DomainBed's ``IRM.update`` rebuilds it over the whole network) written over the
  classifier alone: the first optimizer, its name rebound, can never step again, and the
  featurizer the loss trains is stepped by none: a failure at the new optimizer's line, whose
  group adds it. Rebuilt over the whole network, it is clean.
- **a network left out of the optimizer beside one in it**: twin critics whose optimizer is
  built over the first only (discrete SAC's ``q_optimizer``): the loss's term of the second
  trains it, beside the first's; a failure whose edit adds it to that optimizer. A backbone under
  a trained head, left out of the optimizer, is wasted work (information).
"""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, audit, failures, twins

_GENERATIONS = """\
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)


class Updater:
    def __init__(self, model, optimizer):
        self.model, self.optimizer = model, optimizer

    def update(self, x, y):
        self.optimizer.zero_grad()
        loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        self.optimizer.step()


model = nn.Linear(4, 3)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
updater = Updater(model, optimizer)
for generation in range(2):
    for _ in range(3):
        updater.update(torch.randn(8, 4), torch.randint(0, 3, (8,)))
    model = nn.Linear(4, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    updater.model = model
    {handed}
"""


@pytest.mark.parametrize(("handed", "found"), [("", ["unstepped"]),
                                               ("updater.optimizer = optimizer", [])],
                         ids=["new_optimizer_never_handed", "handed_over"])
def test_an_optimizer_that_never_steps_what_a_loss_trains_is_named_where_it_is_built(
        tmp_path, handed, found):
    script = tmp_path / "born_again.py"
    script.write_text(_GENERATIONS.format(handed=handed))
    code, report = audit(tmp_path, script, "--watch", "1")
    got = failures(report)
    assert [f["kind"] for f in got] == found, got
    assert code == (1 if found else 0)
    if found:
        assert got[0]["at"][0].startswith("born_again.py:26: optimizer = torch.optim.SGD(")
        assert set(got[0]["names"]) == {"model.weight", "model.bias"}


_CRITICS = """\
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
backbone, qf1, qf2 = nn.Linear(4, 4), nn.Linear(4, 2), nn.Linear(4, 2)
q_optimizer = torch.optim.Adam({held}, lr=1e-2)
for _ in range(3):
    obs = {obs}
    actions, target = torch.randint(0, 2, (8, 1)), torch.randn(8)
    qf1_a = qf1(obs).gather(1, actions).squeeze(1)
    qf2_a = qf2(obs).gather(1, actions).squeeze(1)
    loss = F.mse_loss(qf1_a, target) + F.mse_loss(qf2_a, target)
    q_optimizer.zero_grad()
    loss.backward()
    q_optimizer.step()
"""


@pytest.mark.parametrize(("obs", "held", "failed", "noted"), [
    ("torch.randn(8, 4)", "qf1.parameters()", ["unstepped"], []),
    ("torch.relu(backbone(torch.randn(8, 4)))", "[*qf1.parameters(), *qf2.parameters()]", [],
     ["wasted"]),
], ids=["second_critic_left_out", "backbone_left_out"])
def test_a_network_whose_own_term_trains_it_beside_a_stepped_one_is_left_out(
        tmp_path, obs, held, failed, noted):
    script = tmp_path / "sac_discrete.py"
    script.write_text(_CRITICS.format(obs=obs, held=held))
    code, report = audit(tmp_path, script)
    got = failures(report)
    assert [f["kind"] for f in got] == failed, got
    assert [f["kind"] for f in report["findings"] if not f["failure"]] == noted
    assert code == (1 if failed else 0)
    if failed:
        assert set(got[0]["names"]) == {"qf2.weight", "qf2.bias"}
        assert got[0]["at"][0].startswith("sac_discrete.py:7: q_optimizer =")


_RESET = """\
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
featurizer, classifier = nn.Linear(4, 8), nn.Linear(8, 1)
network = nn.Sequential(featurizer, nn.ReLU(), classifier)
x, y = torch.randn(16, 4), torch.rand(16, 1).round()
optimizer = torch.optim.Adam(network.parameters(), lr=1e-2)
for _ in range(2):
    loss = F.binary_cross_entropy_with_logits(network(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
optimizer = torch.optim.Adam({rebuilt}.parameters(), lr=1e-2)
for _ in range(2):
    loss = 2.0 * F.binary_cross_entropy_with_logits(network(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


@pytest.mark.parametrize(("rebuilt", "found"), [("classifier", ["unstepped"]),
                                                ("network", [])],
                         ids=["rebuilt_over_the_classifier", "rebuilt_over_the_network"])
def test_an_optimizer_rebuilt_under_its_name_over_a_part_leaves_the_rest_unstepped(
        tmp_path, rebuilt, found):
    script = tmp_path / "irm.py"
    script.write_text(_RESET.format(rebuilt=rebuilt))
    code, report = audit(tmp_path, script, "--watch", "1")
    got = failures(report)
    assert [f["kind"] for f in got] == found, got
    assert code == (1 if found else 0)
    if found:
        assert got[0]["at"][0].startswith("irm.py:15: optimizer = torch.optim.Adam(classifier")
        assert set(got[0]["names"]) == {"network.0.weight", "network.0.bias"}


_ENCODER_DECODER = """\
import argparse
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)
encoder, decoder = nn.Linear(4, 6), nn.Linear(6, 3)
encoder_optimizer = torch.optim.Adam(encoder.parameters(), lr=1e-2)
decoder_optimizer = torch.optim.Adam(decoder.parameters(), lr=1e-2)
for step in range(4):
    x, y = torch.randn(8, 4), torch.randn(8, 3)
    encoder_optimizer.zero_grad()
    decoder_optimizer.zero_grad()
    loss = ((decoder(torch.tanh(encoder(x))) - y) ** 2).mean()
    loss.backward()
    decoder_optimizer.step()
STEP
if args.out:
    torch.save({"encoder": encoder.state_dict(), "decoder": decoder.state_dict()}, args.out)
"""


@pytest.mark.slow
def test_an_optimizer_the_loop_clears_and_never_steps_gets_its_step(tmp_path):
    folder = twins(tmp_path, _ENCODER_DECODER.replace("STEP", "    encoder_optimizer.step()"),
                   _ENCODER_DECODER.replace("STEP\n", ""))
    done = applied_and_trains(folder, "unstepped", "--watch", "1")
    assert "encoder_optimizer.step()" in done.stdout, done.stdout
