"""An optimizer built over the parameters another optimizer holds already: the line that
builds the encoder's optimizer copied for the head's and left unedited
(``head_optim = Adam(encoder.parameters())``). The head gets gradient and no optimizer steps it,
while the encoder is stepped twice: ``unstepped`` names the head, and its edit builds the copied
optimizer over the head rather than adding the head to it (which would leave the encoder stepped
twice); the fixed script trains as the published one. An optimizer that holds tensors of its
own beside shared ones is not taken for a copy: the head is added to it."""

from __future__ import annotations

from script_audit import applied, assert_trains_as, audit, cli, failures

SCRIPT = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)
encoder = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
head = nn.Linear(8, 2)
extra = nn.Linear(8, 2)
encoder_optim = torch.optim.Adam(encoder.parameters(), lr=0.01)
head_optim = torch.optim.Adam(HEAD, lr=0.01)
x, y = torch.randn(64, 4), torch.randint(0, 2, (64,))
for step in range(4):
    loss = F.cross_entropy(head(encoder(x)), y)
    encoder_optim.zero_grad()
    head_optim.zero_grad()
    loss.backward()
    encoder_optim.step()
    head_optim.step()
if args.out:
    torch.save({**encoder.state_dict(), **{"head." + k: v for k, v in head.state_dict().items()}},
               args.out)
"""


def _write(folder, name, head):
    path = folder / name
    path.write_text(SCRIPT.replace("HEAD", head), encoding="utf-8")
    return path


def test_the_copied_optimizer_is_built_over_the_head_and_trains_as_published(tmp_path):
    folder = tmp_path / "proj"
    folder.mkdir()
    _write(folder, "published.py", "head.parameters()")
    _write(folder, "train.py", "encoder.parameters()")
    code, report = audit(folder, folder / "train.py", "--watch", "1")
    found = [f for f in failures(report) if f["kind"] == "unstepped"]
    assert code == 1 and len(found) == 1
    assert set(found[0]["names"]) == {"head.weight", "head.bias"}
    assert "built over the wrong parameters" in found[0]["message"], found[0]
    applied(folder, "unstepped", "--watch", "1")
    fixed = (folder / "train.py").read_text(encoding="utf-8")
    assert "head_optim = torch.optim.Adam(head.parameters(), lr=0.01)" in fixed, fixed
    assert cli("--watch", "1", "train.py", cwd=folder).returncode == 0
    assert_trains_as(folder)


def test_an_optimizer_with_tensors_of_its_own_is_no_copy(tmp_path):
    script = _write(tmp_path, "train.py", "[*encoder.parameters(), *extra.parameters()]")
    code, report = audit(tmp_path, script, "--watch", "1")
    found = [f for f in failures(report) if f["kind"] == "unstepped"]
    assert code == 1 and len(found) == 1
    assert "built over the wrong parameters" not in found[0]["message"], found[0]


TWINS = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)
G = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
C1, C2 = nn.Linear(8, 3), nn.Linear(8, 3)
opt_g = torch.optim.Adam(G.parameters(), lr=0.01)
opt_c1 = torch.optim.Adam(C1.parameters(), lr=0.01)
opt_c2 = torch.optim.Adam(SECOND, lr=0.01)
x, y = torch.randn(64, 4), torch.randint(0, 3, (64,))
for step in range(4):
    feat = G(x)
    loss = F.cross_entropy(C1(feat), y) + F.cross_entropy(C2(feat), y)
    for opt in (opt_g, opt_c1, opt_c2):
        opt.zero_grad()
    loss.backward()
    for opt in (opt_g, opt_c1, opt_c2):
        opt.step()
if args.out:
    torch.save({"G": G.state_dict(), "C1": C1.state_dict(), "C2": C2.state_dict()}, args.out)
"""


def test_the_twin_classifiers_copied_optimizer_is_built_over_the_second(tmp_path):
    """MCD's two classifiers on one generator, the second's optimizer built over the first
    (its line copied): the second classifier passes the loss's gradient on to the generator,
    whose optimizer is not the copy; the optimizer holding only the first's tensors, of the
    second's shapes, is."""
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "published.py").write_text(TWINS.replace("SECOND", "C2.parameters()"))
    (folder / "train.py").write_text(TWINS.replace("SECOND", "C1.parameters()"))
    applied(folder, "unstepped", "--watch", "1")
    fixed = (folder / "train.py").read_text(encoding="utf-8")
    assert "opt_c2 = torch.optim.Adam(C2.parameters(), lr=0.01)" in fixed, fixed
    assert cli("--watch", "1", "train.py", cwd=folder).returncode == 0
    assert_trains_as(folder)
