"""``toolkit audit SCRIPT``: a training script run unchanged, audited as it runs.

The scripts under ``scripts/`` are public training scripts written at tiny sizes, each as
published (clean) and with a bug (see each one's header). Fast tests run them in this process;
the tests marked slow run the command as a user does, rerun every edit and compare gradients.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from script_audit import check_fix, project

from toolkit.audit.cli import main
from toolkit.audit.edit import Edit
from toolkit.audit.files import Refused
from toolkit.audit.fixes.script_edits import apply_to_text, edit_at, write_edits
from toolkit.audit.verify.gradients import same_gradient
from toolkit.audit.verify.rerun import load_record

SCRIPTS = Path(__file__).parent / "scripts"


def _audit(tmp_path: Path, script: Path, *args: str, options: tuple[str, ...] = ()) -> tuple:
    rec = tmp_path / f"record-{script.stem}-{len(list(tmp_path.iterdir()))}"
    code = main([*options, "--no-verify", "--record", str(rec), str(script), *args])
    report, grads = load_record(str(rec))
    return code, report, grads


def _kinds(report: dict, failure: bool | None = None) -> list[str]:
    return [f["kind"] for f in report["findings"]
            if failure is None or f["failure"] is failure]


# --- harmful and harmless leaks, told apart ----------------------------------------------------

def test_a_generator_gradient_carried_into_its_own_step_is_a_failure(tmp_path, capsys):
    code, report, _ = _audit(tmp_path, SCRIPTS / "dcgan_leak.py", "--niter", "3")
    assert code == 1
    leak = [f for f in report["findings"] if f["kind"] == "leak"]
    assert len(leak) == 1 and leak[0]["failure"]
    assert sorted(leak[0]["tensors"]) == ["opt1.0.0", "opt1.0.1", "opt1.0.2", "opt1.0.3"]
    assert any("dcgan_leak.py:42: errD_fake.backward" in a for a in leak[0]["at"])
    assert "optimizerG.zero_grad()" in leak[0]["edits"][0]["new"]
    assert "netG.0.weight" in capsys.readouterr().out


def test_the_same_leak_cleared_by_zero_grad_before_use_is_information(tmp_path):
    code, report, _ = _audit(tmp_path, SCRIPTS / "dcgan_wasted.py", "--niter", "3")
    assert code == 0
    assert _kinds(report, failure=True) == []
    wasted = [f for f in report["findings"] if f["kind"] == "wasted"
              and "errD_fake" in f["message"]]
    assert len(wasted) == 1 and sorted(wasted[0]["tensors"]) == [
        "netG.0.bias", "netG.0.weight", "netG.2.bias", "netG.2.weight"]


def test_the_published_dcgan_is_clean_and_stopped_after_the_audited_iterations(tmp_path):
    code, report, grads = _audit(tmp_path, SCRIPTS / "dcgan.py", "--niter", "10",
                                 options=("--steps", "3", "--follow", "0"))
    assert code == 0 and report["stopped"] and _kinds(report, failure=True) == []
    assert report["steps"] == 6 and len(grads) == 6   # D and G, three iterations


# --- exit status ---------------------------------------------------------------------------------

def _script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "train.py"
    path.write_text("import sys\nimport torch\n" + body, encoding="utf-8")
    return path


def test_a_script_that_never_calls_backward_cannot_be_audited(tmp_path, capsys):
    script = _script(tmp_path, "print(torch.ones(2).sum())\n")
    assert main([str(script)]) == 2
    assert "never called backward()" in capsys.readouterr().err


def test_weights_updated_by_hand_count_iterations_from_backward_and_say_what_was_not_checked(
        tmp_path, capsys):
    script = _script(tmp_path, "w = torch.ones(2, requires_grad=True)\n"
                               "for i in range(1000):\n    (w * 2).sum().backward()\n"
                               "    with torch.no_grad():\n        w -= 0.1 * w.grad\n"
                               "    w.grad = None\n"
                               "    assert i < 5, 'the audit did not stop the loop'\n")
    assert main(["--follow", "3", str(script)]) == 0
    out = capsys.readouterr().out
    assert "stopped after 5 iterations" in out and "5 backward() calls" in out
    assert "not checked: no torch optimizer stepped" in out


def test_the_scripts_own_exit_status_and_exception_pass_through(tmp_path, capsys):
    script = _script(tmp_path, "sys.exit(int(sys.argv[1]))\n")
    assert main([str(script), "3"]) == 3
    script = _script(tmp_path, "def f():\n    raise ValueError('bad input')\nf()\n")
    assert main([str(script)]) == 1
    err = capsys.readouterr().err
    assert "ValueError: bad input" in err and 'train.py", line 5, in <module>' in err
    assert "watch" not in err   # the audit's own frames are not shown


def test_an_exit_before_any_backward_says_so_and_names_misplaced_options(tmp_path, capsys):
    """A script that exits with its own status before its first backward() (its argparse
    refusing the audit's options, put after its name) is not said to have run to its end,
    and nothing is taken as checked."""
    script = _script(tmp_path, "import argparse\nargparse.ArgumentParser().parse_args()\n")
    assert main([str(script), "--watch", "1", "--apply"]) == 2
    out = capsys.readouterr().out
    assert "exited with status 2 in iteration 0" in out and "ran to its end" not in out
    assert "--watch --apply came after train.py" in out
    assert "not checked: everything: train.py ended before its first backward()" in out
    assert "no torch optimizer stepped" not in out
    assert main([str(script), "--lr", "1"]) == 2
    out = capsys.readouterr().out
    assert "came after" not in out and "ended before its first backward()" in out


def test_command_mistakes_exit_2(tmp_path, capsys):
    assert main([str(tmp_path / "missing.py")]) == 2
    with pytest.raises(SystemExit) as stop:
        main(["--steps", "0", str(tmp_path / "missing.py")])
    assert stop.value.code == 2


def test_the_script_sees_its_own_arguments_and_name(tmp_path):
    script = _script(tmp_path, "assert sys.argv[1:] == ['--lr', '1e-3'], sys.argv\n"
                               "assert __name__ == '__main__'\nsys.exit(5)\n")
    assert main([str(script), "--lr", "1e-3"]) == 5


# --- edits --------------------------------------------------------------------------------------

def test_edits_write_only_inside_the_scripts_folder_and_keep_a_copy(tmp_path):
    inside = tmp_path / "proj" / "train.py"
    inside.parent.mkdir()
    inside.write_text("x = a.detach()\n", encoding="utf-8")
    edit = edit_at(str(inside), (1, 4), (1, 14), "a")
    other = tmp_path / "other.py"
    other.write_text("", encoding="utf-8")
    outside = edit_at(str(other), (1, 0), (1, 0), "y")
    with pytest.raises(Refused, match="outside the script's folder"):
        write_edits([edit, outside], str(inside.parent))
    assert inside.read_text() == "x = a.detach()\n"
    write_edits([edit], str(inside.parent))
    assert inside.read_text() == "x = a\n"
    assert (tmp_path / "proj" / "train.py.orig").read_text() == "x = a.detach()\n"
    assert apply_to_text("é = b\n", [Edit("f", 1, 5, 1, 6, "b", "c")]) == "é = c\n"


def test_same_gradient_compares_relative_to_the_larger_norm():
    a = torch.ones(3)
    assert same_gradient(a, a + 1e-7) and not same_gradient(a, a + 1e-3)
    assert same_gradient(None, torch.zeros(2)) and not same_gradient(None, a)
    # the step audit tells "not reached" from "reached with zeros"
    assert not same_gradient(None, torch.zeros(2), none_is_zero=False)
    assert same_gradient(None, None, none_is_zero=False)
    assert not same_gradient(a, torch.ones(4))


# --- the watch over a whole run -------------------------------------------------------------------

@pytest.mark.slow
def test_watch_finds_an_unfreeze_at_iteration_500_when_it_first_appears(tmp_path, capsys):
    code, report, _ = _audit(tmp_path, SCRIPTS / "finetune_unfreeze_bug.py",
                             options=("--watch", "100"))
    assert code == 1
    (found,) = [f for f in report["findings"] if f["failure"]]
    assert found["kind"] == "unstepped" and found["iteration"] == 500
    code, report, _ = _audit(tmp_path, SCRIPTS / "finetune_unfreeze.py",
                             options=("--watch", "100"))
    assert code == 0 and _kinds(report, failure=True) == []


# --- the published scripts and their bugs, as a user runs them -----------------------------------

# (clean script, its buggy twin, the bug's kind, tiny arguments, the library it needs)
PAIRS = [
    ("dcgan.py", "dcgan_leak.py", "leak", ["--niter", "4"], None),
    ("word_lm.py", "word_lm_carried.py", "carried", [], None),
    # the value head's own loss made of its output .detach()ed: a constant term, which names
    # the term and the cut (the head is dead by it; one finding, the same edit)
    ("actor_critic.py", "actor_critic_dead.py", "constant_term", [], None),
    ("reinforce.py", "reinforce_cleared.py", "cleared", [], None),
    ("dqn.py", "dqn_stale.py", "stale", [], None),
    ("sac.py", "sac_leak.py", "stale", [], None),
    ("ddp.py", "ddp_stale.py", "stale", [], None),
    ("amp_workers.py", "amp_workers_stale.py", "stale", [], None),
    ("hf_trainer.py", "hf_trainer_dead.py", "dead", [], "transformers"),
    ("lightning_ae.py", "lightning_ae_stale.py", "stale", [], "lightning"),
]
#: the scripts that fork (a DataLoader's workers), audited in a fresh interpreter each time
#: (script_audit.cli: a fork of this test process, which has threads, can hang)
FORKING = {"amp_workers.py"}


@pytest.mark.slow
@pytest.mark.parametrize(("clean", "buggy", "kind", "args", "needs"), PAIRS,
                         ids=[p[1] for p in PAIRS])
def test_each_bug_is_fixed_by_a_verified_edit_that_trains_as_the_published_script(
        tmp_path, clean, buggy, kind, args, needs):
    if needs:
        pytest.importorskip(needs)
    folder = project(tmp_path, buggy, clean)
    # the published script audits clean; the bug is found, with a verified edit, and --apply
    # writes it; audited again, it is clean and trains as the published script, gradient for
    # gradient
    done = check_fix(tmp_path, folder, kind, args=args, what=os.path.basename(clean),
                     own_process=clean in FORKING)
    # the bug is found at the user's line, and the script as it was is kept beside it
    assert "at:   train.py:" in done.stdout and "verified:" in done.stdout
    assert (folder / "train.py.orig").read_text() == (SCRIPTS / buggy).read_text()


# --- carried graphs, by where autograd made them ----------------------------------------------

def test_a_state_kept_with_its_graph_is_carried_and_cut_where_it_is_read(tmp_path):
    script = _script(tmp_path, "from torch import nn\ntorch.manual_seed(0)\n"
                               "cell = nn.GRUCell(4, 4)\n"
                               "opt = torch.optim.SGD(cell.parameters(), lr=0.1)\n"
                               "h = torch.zeros(1, 4)\n"
                               "for i in range(4):\n"
                               "    h = cell(torch.randn(1, 4), h)\n"
                               "    loss = h.pow(2).sum()\n"
                               "    opt.zero_grad()\n"
                               "    loss.backward(retain_graph=True)\n"
                               "    opt.step()\n")
    code, report, _ = _audit(tmp_path, script, options=("--steps", "3"))
    assert code == 1
    (carried,) = [f for f in report["findings"] if f["failure"]]
    assert carried["kind"] == "carried" and carried["iteration"] == 1
    assert any("train.py:9: h = cell(torch.randn(1, 4), h)" in a for a in carried["at"])
    assert [e["new"] for e in carried["edits"]] == ["h.detach()"]


def test_a_copy_made_once_before_the_loop_is_not_carried(tmp_path):
    script = _script(tmp_path, "import numpy as np\nfrom torch import nn\n"
                               "X = torch.tensor(np.ones((8, 3)), requires_grad=True).float()\n"
                               "model = nn.Linear(3, 1)\n"
                               "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                               "for i in range(3):\n"
                               "    loss = model(X).pow(2).mean()\n"
                               "    opt.zero_grad()\n"
                               "    loss.backward()\n"
                               "    opt.step()\n")
    code, report, _ = _audit(tmp_path, script, options=("--steps", "3"))
    assert code == 0 and _kinds(report, failure=True) == []


def test_toolkit_audit_hands_its_arguments_over(tmp_path):
    from toolkit.lab.cli.app import main as toolkit

    script = _script(tmp_path, "assert sys.argv[1:] == ['--steps', '9']\nsys.exit(4)\n")
    assert toolkit(["audit", "--steps", "1", str(script), "--steps", "9"]) == 4


# --- roles: one loss for two optimizers, a copy moved by hand ----------------------------------

def test_one_loss_stepped_by_two_optimizers_is_no_leak_but_a_second_loss_mixed_in_is(tmp_path):
    """An encoder and a decoder, each with its optimizer, trained by one loss: each step uses
    that loss's gradient once. A second loss's gradient in the decoder's .grad is a leak."""
    body = ("enc, dec = torch.nn.Linear(3, 4), torch.nn.Linear(4, 1)\n"
            "oe = torch.optim.SGD(enc.parameters(), lr=0.1)\n"
            "od = torch.optim.SGD(dec.parameters(), lr=0.1)\n"
            "x = torch.randn(8, 3)\n"
            "for it in range(3):\n"
            "    oe.zero_grad()\n    od.zero_grad()\n"
            "    loss = dec(enc(x)).pow(2).mean()\n"
            "    loss.backward()\n"
            "    oe.step()\n"
            "    EXTRA\n"
            "    od.step()\n")
    code, report, _ = _audit(tmp_path, _script(tmp_path, body.replace("    EXTRA\n", "")))
    assert code == 0 and _kinds(report, failure=True) == []
    mixed = body.replace("EXTRA", "dec(x[:, :1].expand(8, 4)).sum().backward()")
    code, report, _ = _audit(tmp_path, _script(tmp_path, mixed))
    assert code == 1 and "leak" in _kinds(report, failure=True)


def test_a_stepped_tensor_the_script_moves_by_hand_is_a_note_and_a_frozen_one_a_failure(
        tmp_path):
    """A momentum copy in the optimizer, read under no_grad and moved by hand each iteration
    (MoCo's key encoder) gets no gradient on purpose: information; so does a target read under
    no_grad that only meets the prediction in the loss (a teacher the optimizer holds). A
    network under no_grad whose output a training network reads (a backbone under its head) is
    one the optimizer was meant to train and no loss reaches: a failure."""
    body = ("q, k = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)\n"
            "opt = torch.optim.SGD([*q.parameters(), *k.parameters()], lr=0.1)\n"
            "x = torch.randn(8, 3)\n"
            "for it in range(4):\n"
            "    MOVE\n"
            "    with torch.no_grad():\n        key = k(x)\n"
            "    loss = (q(x) - key).pow(2).mean()\n"
            "    opt.zero_grad()\n    loss.backward()\n    opt.step()\n")
    moved = body.replace("MOVE", "with torch.no_grad():\n        for pk, pq in zip("
                         "k.parameters(), q.parameters()):\n"
                         "            pk.data = 0.9 * pk.data + 0.1 * pq.data")
    code, report, _ = _audit(tmp_path, _script(tmp_path, moved), options=("--steps", "3"))
    assert code == 0 and "hand_updated" in _kinds(report, failure=False)
    target = body.replace("    MOVE\n", "")
    code, report, _ = _audit(tmp_path, _script(tmp_path, target), options=("--steps", "3"))
    assert code == 0 and "hand_updated" in _kinds(report, failure=False)
    backbone = target.replace("torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)",
                              "torch.nn.Linear(2, 2), torch.nn.Linear(3, 2)").replace(
        "(q(x) - key)", "q(key)")
    code, report, _ = _audit(tmp_path, _script(tmp_path, backbone), options=("--steps", "3"))
    assert code == 1 and "dead" in _kinds(report, failure=True)


def test_a_module_between_the_loss_and_the_stepped_tensors_left_out_is_a_failure_at_the_optimizer(
        tmp_path, capsys):
    """A predictor on top of a trained encoder that no optimizer holds: the loss's gradient to
    the encoder passes through it, so the loss trains it and no step uses that. The failure is
    at the optimizer's line, and its edit adds a parameter group there. A backbone below a
    trained head, left out of the optimizer, is only wasted work."""
    body = ("enc, pred = torch.nn.Linear(3, 4), torch.nn.Linear(4, 2)\n"
            "opt = torch.optim.SGD(enc.parameters(), lr=0.1)\n"
            "x = torch.randn(8, 3)\n"
            "for it in range(3):\n"
            "    opt.zero_grad()\n"
            "    loss = pred(enc(x)).pow(2).mean()\n"
            "    loss.backward()\n"
            "    opt.step()\n")
    code, report, _ = _audit(tmp_path, _script(tmp_path, body))
    assert code == 1
    found = [f for f in report["findings"] if f["kind"] == "unstepped"]
    assert len(found) == 1 and found[0]["at"][0].startswith("train.py:4: opt = ")
    assert found[0]["edits"][0]["new"] == 'opt.add_param_group({"params": pred.parameters()})\n'
    backbone = body.replace("SGD(enc.parameters()", "SGD(pred.parameters()")
    code, report, _ = _audit(tmp_path, _script(tmp_path, backbone))
    assert code == 0 and "wasted" in _kinds(report, failure=False)


@pytest.mark.slow
def test_the_parameter_group_edit_is_verified_and_trains_as_the_script_that_held_them(tmp_path):
    body = ("torch.manual_seed(0)\n"
            "enc, pred = torch.nn.Linear(3, 4), torch.nn.Linear(4, 2)\n"
            "opt = torch.optim.Adam(enc.parameters(), lr=0.1)\n"
            "x = torch.randn(8, 3)\n"
            "for it in range(3):\n"
            "    opt.zero_grad()\n"
            "    loss = pred(enc(x)).pow(2).mean()\n"
            "    loss.backward()\n"
            "    opt.step()\n"
            "torch.save([*enc.parameters(), *pred.parameters()], sys.argv[1])\n")
    script = _script(tmp_path, body)
    done = subprocess.run([sys.executable, "-m", "toolkit.audit", "--apply", "train.py",
                           str(tmp_path / "audit.pt")], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 1 and "wrote train.py" in done.stdout, done.stdout
    (tmp_path / "twin").mkdir()
    twin = _script(tmp_path / "twin", body.replace("Adam(enc.parameters()",
                                                    "Adam([*enc.parameters(), *pred.parameters()]"))
    for path, out in ((script, "fixed.pt"), (twin, "twin.pt")):
        subprocess.run([sys.executable, str(path), str(tmp_path / out)], check=True,
                       timeout=120)
    fixed, want = torch.load(tmp_path / "fixed.pt"), torch.load(tmp_path / "twin.pt")
    assert all(torch.allclose(a, b, rtol=0, atol=1e-6) for a, b in zip(fixed, want))


def test_each_new_loops_first_iterations_are_audited_and_a_stop_says_what_it_left(
        tmp_path, capsys):
    """A warm-up loop, then the main loop with a bug (no zero_grad): watching every 100th
    iteration still audits the main loop's first iteration, and so does the default, which
    follows the script past its first loop to the next; stopped at once after the first two
    iterations, it says that what came after was not checked."""
    body = ("net = torch.nn.Linear(3, 1)\n"
            "opt = torch.optim.SGD(net.parameters(), lr=0.01)\n"
            "x = torch.randn(8, 3)\n"
            "for it in range(7):\n"
            "    opt.zero_grad()\n"
            "    net(x).pow(2).mean().backward()\n"
            "    opt.step()\n"
            "for it in range(5):\n"
            "    (net(x) - 1).pow(2).mean().backward()\n"
            "    opt.step()\n")
    script = _script(tmp_path, body)
    assert main(["--no-verify", "--watch", "100", str(script)]) == 1
    assert "FAIL    stale:" in capsys.readouterr().out
    assert main(["--no-verify", str(script)]) == 1   # it follows the script to the main loop
    assert "FAIL    stale:" in capsys.readouterr().out
    assert main(["--no-verify", "--follow", "0", str(script)]) == 0
    out = capsys.readouterr().out
    assert "not checked: what the script does after its first 2 iterations" in out


@pytest.mark.parametrize("block,fixed", [
    ("    with torch.no_grad():\n        h = enc(x)\n", "    h = enc(x)\n"),
    ("    with torch.no_grad():\n        z = x * 2\n        h = enc(z)\n",
     "    with torch.no_grad():\n        z = x * 2\n    h = enc(z)\n"),
])
def test_a_part_computed_under_no_grad_is_taken_out_of_the_block(tmp_path, block, fixed):
    """The simplest dead case: a network the optimizer holds, computed under no_grad. The edit
    takes the statement that computes it out of the block (the block goes when it held only
    that statement), in plain torch."""
    body = ("enc, head = torch.nn.Linear(3, 4), torch.nn.Linear(4, 1)\n"
            "opt = torch.optim.SGD([*enc.parameters(), *head.parameters()], lr=0.1)\n"
            "x = torch.randn(8, 3)\n"
            "for it in range(3):\n"
            "    opt.zero_grad()\n" + block +
            "    head(h).pow(2).mean().backward()\n"
            "    opt.step()\n")
    script = _script(tmp_path, body)
    code, report, _ = _audit(tmp_path, script)
    dead = [f for f in report["findings"] if f["kind"] == "dead"]
    assert code == 1 and len(dead) == 1 and dead[0]["edits"]
    edits = [edit_at(str(script), tuple(e["start"]), tuple(e["end"]), e["new"]) for e in dead[0]["edits"]]
    assert apply_to_text(script.read_text(), edits) == script.read_text().replace(block, fixed)


def test_a_target_that_is_the_trained_network_itself_is_aliased_and_copied(tmp_path):
    """``ema = net``: the network read under no_grad as the target is the one that trains. The
    edit copies it where the name is bound (``copy.deepcopy``, ``import copy`` added). One
    network read both ways by one name (pseudo-labels from the model itself) is no finding."""
    body = ("net = torch.nn.Linear(3, 2)\n"
            "ema = net\n"
            "opt = torch.optim.SGD(net.parameters(), lr=0.1)\n"
            "x = torch.randn(8, 3)\n"
            "for it in range(3):\n"
            "    with torch.no_grad():\n        target = ema(x + 0.1)\n"
            "    loss = (net(x) - target).pow(2).mean()\n"
            "    opt.zero_grad()\n    loss.backward()\n    opt.step()\n"
            "    with torch.no_grad():\n"
            "        for pe, p in zip(ema.parameters(), net.parameters()):\n"
            "            pe.mul_(0.9).add_(p, alpha=0.1)\n")
    script = _script(tmp_path, body)
    code, report, _ = _audit(tmp_path, script)
    aliased = [f for f in report["findings"] if f["kind"] == "aliased"]
    assert code == 1 and len(aliased) == 1 and aliased[0]["at"][0] == "train.py:4: ema = net"
    edits = [edit_at(str(script), tuple(e["start"]), tuple(e["end"]), e["new"])
             for e in aliased[0]["edits"]]
    fixed = apply_to_text(script.read_text(), edits)
    assert "ema = copy.deepcopy(net)" in fixed and fixed.startswith("import copy\n")
    pseudo = body.replace("ema = net\n", "").replace("ema(", "net(").replace(
        "ema.parameters()", "[]")
    code, report, _ = _audit(tmp_path, _script(tmp_path, pseudo))
    assert code == 0 and "aliased" not in _kinds(report)


def test_a_critic_frozen_for_the_generator_and_never_switched_back_on_is_frozen(tmp_path):
    """WGAN's critic is frozen for the generator's step; switched back on once before the loop
    instead of at the top of each pass, it stays frozen while its optimizer steps it. The edit
    switches it on at the top of the pass, before the critic's inner loop."""
    body = ("D, G = torch.nn.Linear(2, 1), torch.nn.Linear(2, 2)\n"
            "scale = torch.nn.Parameter(torch.ones(()))  # keeps the critic's loss a graph\n"
            "oD = torch.optim.SGD([*D.parameters(), scale], lr=0.01)\n"
            "oG = torch.optim.SGD(G.parameters(), lr=0.01)\n"
            "for p in D.parameters():\n    p.requires_grad = True\n"
            "for it in range(3):\n"
            "    for _ in range(2):\n"
            "        oD.zero_grad()\n"
            "        (scale * (D(G(torch.randn(4, 2)).detach()) - D(torch.randn(4, 2)))).mean()"
            ".backward()\n"
            "        oD.step()\n"
            "    for p in D.parameters():\n        p.requires_grad = False\n"
            "    oG.zero_grad()\n"
            "    (-D(G(torch.randn(4, 2)))).mean().backward()\n"
            "    oG.step()\n")
    script = _script(tmp_path, body)
    code, report, _ = _audit(tmp_path, script, options=("--watch", "1"))
    frozen = [f for f in report["findings"] if f["kind"] == "frozen"]
    assert code == 1 and len(frozen) == 1
    assert frozen[0]["at"][0] == "train.py:14: for p in D.parameters():"
    edit = frozen[0]["edits"][0]
    assert edit["new"] == "    D.requires_grad_(True)\n" and edit["start"] == [10, 0]
    clean = body.replace("for it in range(3):\n", "for it in range(3):\n"
                         "    for p in D.parameters():\n        p.requires_grad = True\n")
    code, report, _ = _audit(tmp_path, _script(tmp_path, clean), options=("--watch", "1"))
    assert code == 0 and "frozen" not in _kinds(report)


def test_one_gradient_stepped_by_two_optimizers_is_shared_two_phases_are_not(tmp_path):
    """Two optimizers over one tensor, both stepping after one backward(): the gradient moves
    it twice. Pre-training with one optimizer, then fine-tuning with another over the same
    backbone, each after its own backward(): no finding."""
    body = ("net = torch.nn.Linear(3, 1)\n"
            "a = torch.optim.SGD(net.parameters(), lr=0.1)\n"
            "b = torch.optim.SGD(net.parameters(), lr=0.1)\n"
            "x = torch.randn(8, 3)\n"
            "for it in range(3):\n"
            "    a.zero_grad()\n"
            "    net(x).pow(2).mean().backward()\n"
            "    a.step()\n"
            "    b.step()\n")
    code, report, _ = _audit(tmp_path, _script(tmp_path, body))
    assert code == 1 and "shared" in _kinds(report, failure=True)
    phases = ("net = torch.nn.Linear(3, 1)\n"
              "x = torch.randn(8, 3)\n"
              "a = torch.optim.SGD(net.parameters(), lr=0.1)\n"
              "for it in range(3):\n"
              "    a.zero_grad()\n    net(x).pow(2).mean().backward()\n    a.step()\n"
              "b = torch.optim.SGD(net.parameters(), lr=0.01)\n"
              "for it in range(3):\n"
              "    b.zero_grad()\n    (net(x) - 1).pow(2).mean().backward()\n    b.step()\n")
    code, report, _ = _audit(tmp_path, _script(tmp_path, phases))
    assert code == 0 and "shared" not in _kinds(report)


def test_one_network_reached_as_self_teacher_and_model_teacher_is_no_alias(tmp_path):
    """A teacher trained first (called as ``model.teacher``), then read under no_grad inside the
    model's forward (``self.teacher``): one binding reached from two places, in two phases."""
    body = ("class KD(torch.nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__()\n"
            "        self.teacher, self.student = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)\n"
            "    def forward(self, x):\n"
            "        with torch.no_grad():\n            t = self.teacher(x)\n"
            "        return (self.student(x) - t).pow(2).mean()\n"
            "model = KD()\n"
            "x = torch.randn(8, 3)\n"
            "ot = torch.optim.SGD(model.teacher.parameters(), lr=0.1)\n"
            "for it in range(3):\n"
            "    ot.zero_grad()\n    model.teacher(x).pow(2).mean().backward()\n    ot.step()\n"
            "os_ = torch.optim.SGD(model.student.parameters(), lr=0.1)\n"
            "for it in range(3):\n"
            "    os_.zero_grad()\n    model(x).backward()\n    os_.step()\n")
    code, report, _ = _audit(tmp_path, _script(tmp_path, body))
    assert code == 0 and "aliased" not in _kinds(report)


def test_a_guessed_label_made_with_gradients_is_a_trained_target_cut_where_it_is_made(
        tmp_path):
    """A pseudo-label the model guesses on another view, computed with gradients, compared
    with the model's prediction: the loss trains the model through its own target (the step
    audit's targets rule, on the script's backward). The edit detaches the network call that
    made it; a label guessed under no_grad is clean."""
    body = ("net = torch.nn.Linear(3, 2)\n"
            "opt = torch.optim.SGD(net.parameters(), lr=0.1)\n"
            "x = torch.randn(8, 3)\n"
            "for it in range(3):\n"
            "    guess = net(x + 0.1).softmax(1)\n"
            "    loss = F.mse_loss(net(x).softmax(1), guess)\n"
            "    opt.zero_grad()\n    loss.backward()\n    opt.step()\n")
    body = "import torch.nn.functional as F\n" + body
    script = _script(tmp_path, body)
    code, report, _ = _audit(tmp_path, script)
    found = [f for f in report["findings"] if f["kind"] == "target"]
    assert code == 1 and len(found) == 1
    assert found[0]["at"][0] == "train.py:8:     guess = net(x + 0.1).softmax(1)".replace(
        ":     ", ": ")
    assert [e["new"] for e in found[0]["edits"]] == ["net(x + 0.1).detach()"]
    clean = body.replace("    guess = net(x + 0.1)", "    with torch.no_grad():\n"
                         "        guess = net(x + 0.1)")
    code, report, _ = _audit(tmp_path, _script(tmp_path, clean))
    assert code == 0 and "target" not in _kinds(report)


def test_a_tensor_kept_as_a_plain_attribute_of_a_module_is_named_by_it(tmp_path):
    """A tensor an optimizer holds that is no parameter of its module, a plain attribute made
    with requires_grad_() (DARTS's architecture weights, a learned temperature), is named as
    the module holds it (``model.temperature``), not by its place in the optimizer."""
    body = ("class Net(torch.nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__()\n"
            "        self.fc = torch.nn.Linear(3, 2)\n"
            "        self.temperature = torch.ones(1).requires_grad_()\n"
            "    def forward(self, x):\n"
            "        return self.fc(x) / self.temperature\n"
            "model = Net()\n"
            "opt = torch.optim.SGD([*model.parameters(), model.temperature], lr=0.1)\n"
            "x, y = torch.randn(8, 3), torch.randint(0, 2, (8,))\n"
            "for it in range(3):\n"
            "    loss = torch.nn.functional.cross_entropy(model(x), y)\n"
            "    loss.backward()\n"
            "    opt.step()\n")
    code, report, _ = _audit(tmp_path, _script(tmp_path, body))
    (stale,) = [f for f in report["findings"] if f["kind"] == "stale"]
    assert code == 1
    assert sorted(stale["names"]) == ["model.fc.bias", "model.fc.weight", "model.temperature"]
