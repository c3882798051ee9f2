"""A leaf frozen for the call that reads it and never switched back on: dataset condensation's
synthetic images (Zhao et al. 2021), handed to an evaluation with
``image_syn.requires_grad_(False)`` for the reference's detached copy. From then on the match
loss reaches only the network, and the images' optimizer steps them with no gradient.
``frozen`` names the images by the name the script holds them by, alone (the network the loss
still reaches is no ``unstepped`` failure: the freeze is why), and its edit switches them back
on after the call the freeze was made for, so that the fixed script trains as the published
one."""

from __future__ import annotations

import textwrap

from script_audit import applied, assert_trains_as, audit, cli, failures

from toolkit.audit.fixes.switch_edits import switch_on_after_its_use

SCRIPT = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)
x_real, y_real = torch.randn(32, 4), torch.randint(0, 2, (32,))
image_syn = torch.randn(4, 4, requires_grad=True)
label_syn = torch.tensor([0, 0, 1, 1])
optimizer_img = torch.optim.SGD([image_syn], lr=0.1)


def evaluate(images):
    net_eval = nn.Linear(4, 2)
    opt = torch.optim.SGD(net_eval.parameters(), lr=0.1)
    for _ in range(2):
        loss = F.cross_entropy(net_eval(images), label_syn)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return (net_eval(x_real).argmax(1) == y_real).float().mean().item()


for it in range(5):
    if it == 2:
EVALUATE
    net = nn.Linear(4, 2)
    optimizer_net = torch.optim.SGD(net.parameters(), lr=0.1)
    for ol in range(2):
        g_real = torch.autograd.grad(F.cross_entropy(net(x_real), y_real),
                                     net.weight)[0].detach()
        g_syn = torch.autograd.grad(F.cross_entropy(net(image_syn), label_syn), net.weight,
                                    create_graph=True)[0]
        loss = (g_real - g_syn).pow(2).sum()
        optimizer_img.zero_grad()
        loss.backward()
        optimizer_img.step()
        if ol == 1:
            break
        net_loss = F.cross_entropy(net(image_syn.detach()), label_syn)
        optimizer_net.zero_grad()
        net_loss.backward()
        optimizer_net.step()
if args.out:
    torch.save({"image_syn": image_syn.detach()}, args.out)
"""

PUBLISHED = "        acc = evaluate(image_syn.detach().clone())\n        print(acc)\n"
FROZEN = ("        image_syn.requires_grad_(False)\n        acc = evaluate(image_syn)\n"
          "        print(acc)\n")


def test_the_images_are_switched_on_after_the_evaluation_and_train_as_published(tmp_path):
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "published.py").write_text(SCRIPT.replace("EVALUATE\n", PUBLISHED),
                                         encoding="utf-8")
    (folder / "train.py").write_text(SCRIPT.replace("EVALUATE\n", FROZEN), encoding="utf-8")
    code, report = audit(folder, folder / "train.py", "--watch", "1")
    assert code == 1 and [f["kind"] for f in failures(report)] == ["frozen"], failures(report)
    assert failures(report)[0]["names"] == ["image_syn"]
    applied(folder, "frozen", "--watch", "1")
    fixed = (folder / "train.py").read_text(encoding="utf-8")
    assert "acc = evaluate(image_syn)\n        image_syn.requires_grad_(True)\n" in fixed, fixed
    assert cli("--watch", "1", "train.py", cwd=folder).returncode == 0
    assert_trains_as(folder)


def test_no_edit_where_nothing_after_the_freeze_reads_it(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent("""\
        image_syn.requires_grad_(False)
        log()
        """), encoding="utf-8")
    assert switch_on_after_its_use(str(path), 1) is None
