"""A network frozen before its optimizer is built, and never switched on for the phase that
optimizer is for: a pretrained encoder kept fixed while a decoder warms up, then an optimizer
built over the encoder for fine-tuning, the freeze left on (the ``requires_grad_(True)`` that
starts fine-tuning forgotten). Every tensor that optimizer holds is off at each of its steps,
so it steps nothing: ``frozen``, with the encoder switched on before the fine-tuning loop, after
which the script trains as the published one. A freeze for a phase that the script ends (the
encoder switched on before the loop) is no finding, nor is an optimizer that holds a frozen part
beside a trained one."""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, audit, cli, failures, twins

pytestmark = pytest.mark.slow

SCRIPT = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default="")
args = parser.parse_args()
torch.manual_seed(0)
encoder = nn.Sequential(nn.Linear(6, 8), nn.Tanh())
decoder = nn.Linear(8, 3)
x, y = torch.randn(32, 6), torch.randint(0, 3, (32,))
encoder.requires_grad_(False)
decoder_optimizer = torch.optim.Adam(decoder.parameters(), lr=0.05)
for step in range(3):
    loss = F.cross_entropy(decoder(encoder(x)), y)
    decoder_optimizer.zero_grad()
    loss.backward()
    decoder_optimizer.step()
SWITCH_ON
encoder_optimizer = torch.optim.Adam(encoder.parameters(), lr=0.01)
for step in range(3):
    loss = F.cross_entropy(decoder(encoder(x)), y)
    decoder_optimizer.zero_grad()
    encoder_optimizer.zero_grad()
    loss.backward()
    decoder_optimizer.step()
    encoder_optimizer.step()
if args.out:
    torch.save({"encoder": encoder.state_dict(), "decoder": decoder.state_dict()}, args.out)
"""

PUBLISHED = SCRIPT.replace("SWITCH_ON", "encoder.requires_grad_(True)")
FORGOTTEN = SCRIPT.replace("SWITCH_ON", "")
# the second phase's optimizer over both, the encoder left frozen on purpose (a linear probe
# with a new learning rate): no finding
PROBE = FORGOTTEN.replace(
    "encoder.parameters(), lr=0.01", "[*encoder.parameters(), *decoder.parameters()], lr=0.01"
).replace("    decoder_optimizer.zero_grad()\n    encoder_optimizer.zero_grad()\n",
          "    encoder_optimizer.zero_grad()\n").replace(
    "    decoder_optimizer.step()\n    encoder_optimizer.step()\n",
    "    encoder_optimizer.step()\n")


def test_the_freeze_never_undone_is_frozen_and_its_edit_trains_as_published(tmp_path):
    folder = twins(tmp_path, PUBLISHED, FORGOTTEN)
    done = applied_and_trains(folder, "frozen", "--watch", "1")
    assert "train.py:22: insert before it: encoder.requires_grad_(True)" in done.stdout, \
        done.stdout


@pytest.mark.parametrize("text", [PUBLISHED, PROBE], ids=["switched-on", "beside-a-trained"])
def test_a_freeze_ended_or_kept_beside_trained_tensors_is_no_finding(tmp_path, text):
    script = tmp_path / "train.py"
    script.write_text(text, encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    assert code == 0 and not failures(report), failures(report)
    assert cli("--watch", "1", "train.py", cwd=tmp_path).returncode == 0
