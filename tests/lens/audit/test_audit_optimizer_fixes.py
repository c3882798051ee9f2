"""Fixes that are not cuts (issue 53): a learned tensor left out of its optimizer is told to
join the optimizer, at the line that builds it, and following that advice is checked with a
real ``backward()``: the finding is gone and every stepped tensor's gradient is unchanged.
An optimizer built from param groups gets the tensor as a group of its own. A module replaced
after the optimizer was built (a new head) moves the line that builds the optimizer below it.
"""

from __future__ import annotations

import inspect
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from steps_on_disk import load
from torch import nn

from toolkit import audit_step
from toolkit.audit.fixes.edits import apply_edits


def _line_of(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


class _Clip(nn.Module):
    """openai/CLIP, clip/model.py@main (``CLIP``): two encoders and a learned temperature
    ``logit_scale`` held by the model itself, read as ``logit_scale.exp()`` in its forward."""

    def __init__(self) -> None:
        super().__init__()
        self.visual, self.text = nn.Linear(6, 4), nn.Linear(5, 4)
        self.logit_scale = nn.Parameter(torch.ones([]) * math.log(1 / 0.07))

    def forward(self, image: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
        a = F.normalize(self.visual(image), dim=-1)
        b = F.normalize(self.text(text), dim=-1)
        return self.logit_scale.exp() * a @ b.t()


class _ScalarMix(nn.Module):
    """allenai/allennlp, allennlp/modules/scalar_mix.py@main (``ScalarMix``, ELMo's learned
    layer pooling): softmax-normalised scalar weights and a scale ``gamma`` over the layers of
    an encoder, learned with it."""

    def __init__(self, n_layers: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(n_layers))
        self.scalar_parameters = nn.Parameter(torch.zeros(n_layers))
        self.gamma = nn.Parameter(torch.ones(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        outs = []
        for layer in self.layers:
            x = torch.tanh(layer(x))
            outs.append(x)
        weights = F.softmax(self.scalar_parameters, dim=0)
        return self.gamma * sum(w * h for w, h in zip(weights, outs))


def _clip_case(seed: int, fixed: bool):
    torch.manual_seed(seed)
    model = _Clip()
    image, text = torch.randn(6, 6), torch.randn(6, 5)
    params = [*model.visual.parameters(), *model.text.parameters()]
    optimizer = torch.optim.AdamW([*params, model.logit_scale] if fixed else params, lr=1e-3)

    def step() -> torch.Tensor:
        logits = model(image, text)
        labels = torch.arange(6)
        return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.t(), labels)) / 2

    return model, optimizer, step, ["model.logit_scale"]


def _scalar_mix_case(seed: int, fixed: bool):
    torch.manual_seed(seed)
    model = _ScalarMix(3)
    head = nn.Linear(4, 2)
    x, y = torch.randn(5, 4), torch.randint(0, 2, (5,))
    params = [*model.layers.parameters(), *head.parameters()]
    extra = [model.scalar_parameters, model.gamma]
    optimizer = torch.optim.Adam([*params, *extra] if fixed else params, lr=1e-3)

    def step() -> torch.Tensor:
        return F.cross_entropy(head(model(x).mean(0, keepdim=True).expand(5, -1)), y)

    return model, optimizer, step, ["model.gamma", "model.scalar_parameters"]


def _clip_groups_case(seed: int, fixed: bool):
    """mlfoundations/open_clip, src/open_clip_train/main.py@main: the optimizer built from two
    param groups, biases and gains without weight decay and the rest with it. The bug is
    constructed: a filter that keeps only tensors with a dimension (``p.ndim > 0``) drops the
    0-d ``logit_scale`` from both groups; open_clip keeps it in the first."""
    torch.manual_seed(seed)
    model = _Clip()
    image, text = torch.randn(6, 6), torch.randn(6, 5)
    named = [(n, p) for n, p in model.named_parameters() if fixed or p.ndim > 0]
    exclude = lambda n, p: p.ndim < 2 or "bias" in n or "logit_scale" in n  # noqa: E731
    gain_or_bias = [p for n, p in named if exclude(n, p) and p.requires_grad]
    rest = [p for n, p in named if not exclude(n, p) and p.requires_grad]
    optimizer = torch.optim.AdamW([
        {"params": gain_or_bias, "weight_decay": 0.0},
        {"params": rest, "weight_decay": 0.2},
    ], lr=1e-3)

    def step() -> torch.Tensor:
        logits = model(image, text)
        labels = torch.arange(6)
        return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.t(), labels)) / 2

    return model, optimizer, step, ["model.logit_scale"]


def _grads(step, tensors: list[torch.Tensor]) -> list[torch.Tensor | None]:
    for t in tensors:
        t.grad = None
    step().backward()
    out = [None if t.grad is None else t.grad.clone() for t in tensors]
    for t in tensors:
        t.grad = None
    return out


@pytest.mark.parametrize("build", [_clip_case, _scalar_mix_case, _clip_groups_case],
                         ids=["clip", "scalar_mix", "clip_groups"])
def test_a_learned_tensor_left_out_of_the_optimizer_is_told_to_join_it_at_its_line(
        build, seed: int) -> None:
    model, optimizer, step, left_out = build(seed, fixed=False)
    audit = audit_step(step, optimizer)
    assert sorted(x.parameter for x in audit.leaks) == left_out, str(audit)
    for leak in audit.leaks:
        assert leak.cut_at is None and leak.fix.startswith("add it to the optimizer built at")
        (line,) = leak.lines
        assert line.number == _line_of(build, "optimizer = torch.optim.")
        assert f"{line.file}:{line.number}" in leak.fix and f"at:   {line}" in str(audit)
    # the oracle: real backward gives the left-out tensors a gradient no step uses
    stepped = [p for g in optimizer.param_groups for p in g["params"]]
    named = dict(model.named_parameters())
    grads = _grads(step, [named[n.removeprefix("model.")] for n in left_out])
    assert all(g is not None and g.abs().sum() > 0 for g in grads)
    before = dict(zip(_keys(model, stepped), _grads(step, stepped)))
    # follow the fix: the same step, the tensors added where the optimizer is built
    model_fixed, optimizer_fixed, step_fixed, _ = build(seed, fixed=True)
    assert audit_step(step_fixed, optimizer_fixed).ok
    stepped = [p for g in optimizer_fixed.param_groups for p in g["params"]]
    after = dict(zip(_keys(model_fixed, stepped), _grads(step_fixed, stepped)))
    assert after.keys() == before.keys() | set(left_out)
    for key, b in before.items():  # the tensors stepped before keep their gradients
        torch.testing.assert_close(after[key], b)
    assert all(after[key] is not None for key in left_out)


def _keys(model: nn.Module, tensors: list[torch.Tensor]) -> list[str]:
    """Each tensor's name in ``model`` (``model.logit_scale``), or its place among the
    others: a tensor of another module (a head) keeps its place in both builds."""
    names = {id(p): f"model.{n}" for n, p in model.named_parameters()}
    return [names.get(id(t), f"#{i}") for i, t in enumerate(tensors)]


def test_a_target_network_is_still_told_to_cut_not_to_join_the_optimizer(seed: int) -> None:
    # the sibling rule looks at the module holding the tensor directly: a target network's
    # layers hold nothing the optimizer steps
    torch.manual_seed(seed)
    agent = nn.ModuleDict({"online": nn.Linear(3, 2), "target": nn.Linear(3, 2)})
    opt = torch.optim.SGD(agent["online"].parameters(), lr=0.1)
    s, s2 = torch.randn(4, 3), torch.randn(4, 3)
    audit = audit_step(lambda: (agent["online"](s).max(1).values
                                - 0.9 * agent["target"](s2).max(1).values).pow(2).mean(), opt)
    assert sorted(x.parameter for x in audit.leaks) == ["agent.target.bias",
                                                        "agent.target.weight"]
    assert all(x.cut_at is not None and "add it" not in x.fix for x in audit.leaks)


_NEW_HEAD = '''
import torch
import torch.nn.functional as F
from torch import nn


class Net(nn.Module):
    """torchvision's ResNet in miniature: a body and a classifier head ``fc``."""

    def __init__(self):
        super().__init__()
        self.body, self.fc = nn.Linear(6, 8), nn.Linear(8, 10)

    def forward(self, x):
        return self.fc(torch.relu(self.body(x)))


def build(seed):
    torch.manual_seed(seed)
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01,
                                momentum=0.9)
    {between}model.fc = nn.Linear(8, 3)  # a new head for 3 classes
    x, y = torch.randn(8, 6), torch.randint(0, 3, (8,))

    def step():
        return F.cross_entropy(model(x), y)

    return model, optimizer, step
'''


def test_a_head_replaced_after_the_optimizer_is_built_moves_the_optimizer_below_it(
        tmp_path: Path, seed: int) -> None:
    # the fine-tuning bug of microsoft/nni#4521 (layers replaced by ModelSpeedup after the
    # optimizer was built; "an easy way is reinitializing a new optimizer"), as a new head:
    # the optimizer steps the old head, which no module holds, and not the new one
    source = _NEW_HEAD.format(between="")
    model, optimizer, step = load(tmp_path / "new_head.py", source).build(seed)
    audit = audit_step(step, optimizer)
    assert sorted(x.parameter for x in audit.leaks) == ["model.fc.bias", "model.fc.weight"]
    assert {d.kind for d in audit.dead} == {"replaced"} and len(audit.dead[0].shape) == 2
    findings = [*audit.leaks, *audit.dead]
    assert all(f.fix.startswith("model.fc was replaced after optimizer 'SGD'") for f in findings)
    assert {line.number for f in findings for line in f.lines} == {
        source.splitlines().index("    optimizer = torch.optim.SGD(model.parameters(), lr=0.01,")
        + 1}
    edits = list(dict.fromkeys(e for f in findings for e in f.edits))
    assert len(edits) == 2 and all(f"edit: {e}" in str(audit) for e in edits)
    assert str(edits[0]).startswith("new_head.py:") and ": remove: optimizer =" in str(edits[0])
    # follow the fix: the optimizer built below the new head steps it, and nothing else changed
    edited = apply_edits(source, edits)
    assert len(edited.splitlines()) == len(source.splitlines())  # every line keeps its number
    assert edited.splitlines()[edits[0].line - 1] == ""  # no whitespace left behind
    model, optimizer, step = load(tmp_path / "new_head_fixed.py", edited).build(seed)
    assert audit_step(step, optimizer).ok
    assert [id(p) for g in optimizer.param_groups for p in g["params"]] == [
        id(p) for p in model.parameters()]
    fixed = "    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)\n"
    ref = source.replace("    optimizer = torch.optim.SGD(model.parameters(), lr=0.01,\n"
                         "                                momentum=0.9)\n", "")
    ref = ref.replace("    x, y = torch.randn", fixed + "    x, y = torch.randn")
    _, ref_optimizer, ref_step = load(tmp_path / "new_head_ref.py", ref).build(seed)
    stepped = [p for g in optimizer.param_groups for p in g["params"]]
    ref_stepped = [p for g in ref_optimizer.param_groups for p in g["params"]]
    for mine, want in zip(_grads(step, stepped), _grads(ref_step, ref_stepped), strict=True):
        torch.testing.assert_close(mine, want)


def test_a_replaced_head_whose_optimizer_is_read_before_it_gets_no_edit(tmp_path: Path,
                                                                        seed: int) -> None:
    # a scheduler built from the optimizer between the two lines: moving the optimizer below
    # the head would leave the scheduler without it, so the fix is said, never written
    source = _NEW_HEAD.format(
        between="scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 10)\n    ")
    _, optimizer, step = load(tmp_path / "new_head_sched.py", source).build(seed)
    audit = audit_step(step, optimizer)
    assert {d.kind for d in audit.dead} == {"replaced"}
    assert all(f.lines and not f.edits for f in [*audit.leaks, *audit.dead]), str(audit)
    assert "build the optimizer after the replacement, or add" in audit.leaks[0].fix


def test_a_loose_tensor_beside_an_unstepped_module_is_no_replacement(seed: int) -> None:
    # an unused loose parameter in the optimizer, and a backbone left out of it on purpose:
    # one tensor of one dimension is not the make of the backbone's (a weight and a bias)
    torch.manual_seed(seed)
    model = nn.ModuleDict({"backbone": nn.Linear(4, 4), "head": nn.Linear(4, 2)})
    extra = nn.Parameter(torch.zeros(3))
    optimizer = torch.optim.SGD([*model["head"].parameters(), extra], lr=0.1)
    x = torch.randn(5, 4)
    audit = audit_step(lambda: model["head"](model["backbone"](x)).pow(2).mean(), optimizer,
                       modules={"model": model})
    assert {d.kind for d in audit.dead} == {"not_used"}
    assert not any("replaced" in f.fix for f in [*audit.leaks, *audit.pass_through, *audit.dead])


def _unfrozen_case(seed: int, fixed: bool):
    """A layer unfrozen after the optimizer was built from the tensors that required grad then
    (``filter(lambda p: p.requires_grad, model.parameters())``, the fine-tuning recipe of
    many training scripts): the gradient passes through it to the embedding, and no optimizer
    steps it."""
    torch.manual_seed(seed)
    model = nn.ModuleDict({"emb": nn.Embedding(10, 4), "rnn": nn.GRU(4, 4, batch_first=True),
                           "out": nn.Linear(4, 10)})
    model["rnn"].requires_grad_(False)
    if fixed:
        model["rnn"].requires_grad_(True)
    optimizer = torch.optim.Adam(filter(lambda p: p.requires_grad, model.parameters()), lr=1e-3)
    model["rnn"].requires_grad_(True)  # unfrozen after a warm-up
    x = torch.randint(0, 10, (3, 5))

    def step() -> torch.Tensor:
        h, _ = model["rnn"](model["emb"](x[:, :-1]))
        return F.cross_entropy(model["out"](h).reshape(-1, 10), x[:, 1:].reshape(-1))

    return model, optimizer, step


def test_a_layer_no_optimizer_steps_inside_a_trained_model_is_offered_the_optimizer(
        seed: int) -> None:
    model, optimizer, step = _unfrozen_case(seed, fixed=False)
    audit = audit_step(step, optimizer, modules={"model": model})
    assert audit.ok and {x.parameter.split(".")[1] for x in audit.pass_through} == {"rnn"}
    (line,) = [x for x in str(audit).splitlines() if x.startswith("PASS")]
    built = _line_of(_unfrozen_case, "optimizer = torch.optim.Adam(")
    assert line.endswith("no optimizer given steps them: if they should train, add them to "
                         f"optimizer 'Adam' (built at test_audit_optimizer_fixes.py:{built})")
    # following it (the optimizer built with the layer in it) trains the layer, and the
    # tensors stepped before keep their gradients
    before = dict(zip(_keys(model, stepped := [p for g in optimizer.param_groups
                                               for p in g["params"]]), _grads(step, stepped)))
    model, optimizer, step = _unfrozen_case(seed, fixed=True)
    fixed = audit_step(step, optimizer, modules={"model": model})
    assert fixed.ok and not fixed.pass_through
    stepped = [p for g in optimizer.param_groups for p in g["params"]]
    after = dict(zip(_keys(model, stepped), _grads(step, stepped)))
    for key, grad in before.items():
        torch.testing.assert_close(after[key], grad)
    assert any(key.startswith("model.rnn.") and g is not None for key, g in after.items())


_MEAN_TEACHER = '''
import copy

import torch
import torch.nn.functional as F
from torch import nn


def ema(teacher, student, alpha):
    with torch.no_grad():
        for t, s in zip(teacher.parameters(), student.parameters()):
            t.mul_(alpha).add_(s, alpha=1 - alpha)


def build(seed):
    torch.manual_seed(seed)
    student = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 3))
    mt = nn.ModuleDict({"student": student, "teacher": copy.deepcopy(student)})
    opt = torch.optim.SGD({params}, lr=0.05)
    x = torch.randn(6, 10)

    def step():
        ema(mt.teacher, mt.student, 0.99)
        out = mt.student(x + 0.1)
        with torch.no_grad():
            t_out = mt.teacher(x - 0.1)
        return F.mse_loss(F.softmax(out, 1), F.softmax(t_out, 1))

    return mt, opt, step
'''


def test_an_ema_teacher_in_the_optimizer_is_left_out_of_it_not_given_gradients(
        tmp_path: Path, seed: int) -> None:
    # Mean Teacher (CuriousAI/mean-teacher, update_ema_variables): the teacher is an EMA of
    # the student, written by the step under no_grad; the bug, constructed, builds the
    # optimizer over both. Switching gradients on where the EMA is written (the no_grad
    # finding's edit) would crash on an in-place write of a leaf: the teacher is left out
    source = _MEAN_TEACHER.replace("{params}", "mt.parameters()")
    _, opt, step = load(tmp_path / "mean_teacher.py", source).build(seed)
    audit = audit_step(step, opt)
    assert {d.kind for d in audit.dead} == {"written"} and len(audit.dead) == 4, str(audit)
    assert all(d.parameter.startswith("mt.teacher.") for d in audit.dead)
    (edit,) = {e for d in audit.dead for e in d.edits}
    edited = apply_edits(source, [edit])
    mt, opt, step = load(tmp_path / "mean_teacher_fixed.py", edited).build(seed)
    assert audit_step(step, opt).ok
    _, ref_opt, ref_step = load(tmp_path / "mean_teacher_ref.py", _MEAN_TEACHER.replace(
        "{params}", "mt.student.parameters()")).build(seed)
    stepped = [p for g in opt.param_groups for p in g["params"]]
    ref_stepped = [p for g in ref_opt.param_groups for p in g["params"]]
    assert _keys(mt, stepped) == [f"model.student.{n}" for n, _ in
                                  mt["student"].named_parameters()]
    for _ in range(2):  # the teacher moves by its average between the calls, as published
        for mine, want in zip(_grads(step, stepped), _grads(ref_step, ref_stepped),
                              strict=True):
            torch.testing.assert_close(mine, want)


_TIED_LATE = '''
import torch
import torch.nn.functional as F
from torch import nn


def build(seed):
    torch.manual_seed(seed)
    model = nn.ModuleDict({"emb": nn.Embedding(10, 4), "dec": nn.Linear(4, 10)})
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model.dec.weight = model.emb.weight  # tied (Press and Wolf 2017)
    x = torch.randint(0, 10, (6,))

    def step():
        return F.cross_entropy(model.dec(model.emb(x)), x)

    return model, opt, step
'''


def test_weights_tied_after_the_optimizer_is_built_move_the_optimizer_below_the_tie(
        tmp_path: Path, seed: int) -> None:
    # pytorch/examples word_language_model ties decoder.weight = encoder.weight in the model's
    # __init__, before any optimizer; tied after it, the optimizer steps the decoder's old
    # weight, which nothing holds
    source = _TIED_LATE
    model, opt, step = load(tmp_path / "tied.py", source).build(seed)
    audit = audit_step(step, opt, modules={"model": model})
    (dead,) = audit.dead
    assert dead.kind == "replaced" and dead.shape == (10, 4) and not audit.leaks, str(audit)
    assert len(dead.edits) == 2 and "weights tied" in dead.fix
    edited = apply_edits(source, dead.edits)
    assert len(edited.splitlines()) == len(source.splitlines())
    model, opt, step = load(tmp_path / "tied_fixed.py", edited).build(seed)
    assert audit_step(step, opt, modules={"model": model}).ok
    stepped = [p for g in opt.param_groups for p in g["params"]]
    assert [id(p) for p in stepped] == [id(p) for p in model.parameters()]
    ref = source.replace("    opt = torch.optim.Adam(model.parameters(), lr=1e-3)\n", "").replace(
        "    x = torch.randint", "    opt = torch.optim.Adam(model.parameters(), lr=1e-3)\n"
                                "    x = torch.randint")
    _, ref_opt, ref_step = load(tmp_path / "tied_ref.py", ref).build(seed)
    ref_stepped = [p for g in ref_opt.param_groups for p in g["params"]]
    for mine, want in zip(_grads(step, stepped), _grads(ref_step, ref_stepped), strict=True):
        torch.testing.assert_close(mine, want)


class _LoRALinear(nn.Module):
    """microsoft/LoRA, loralib/layers.py@main (``Linear``): a base layer and a low-rank update
    ``x @ A.T @ B.T * scaling``; loralib.mark_only_lora_as_trainable freezes the base."""

    def __init__(self, n_in: int, n_out: int, r: int = 2) -> None:
        super().__init__()
        self.base = nn.Linear(n_in, n_out)
        self.lora_A = nn.Parameter(torch.randn(r, n_in) * 0.1)
        self.lora_B = nn.Parameter(torch.randn(n_out, r) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + x @ self.lora_A.t() @ self.lora_B.t()


def _lora_case(seed: int, frozen: bool):
    torch.manual_seed(seed)
    model = nn.Sequential(_LoRALinear(6, 6), nn.Tanh(), _LoRALinear(6, 2))
    if frozen:  # loralib.mark_only_lora_as_trainable(model)
        for name, p in model.named_parameters():
            p.requires_grad_("lora_" in name)
    optimizer = torch.optim.AdamW([p for n, p in model.named_parameters() if "lora_" in n])
    x, y = torch.randn(5, 6), torch.randint(0, 2, (5,))
    return model, optimizer, lambda: F.cross_entropy(model(x), y)


def test_a_base_layer_no_optimizer_steps_is_offered_both_fixes_and_no_edit(seed: int) -> None:
    # the base layers left trainable (mark_only_lora_as_trainable not called): meant to stay
    # fixed here, meant to train elsewhere, so both fixes are said and no edit picks one
    model, optimizer, step = _lora_case(seed, frozen=False)
    audit = audit_step(step, optimizer, modules={"model": model})
    assert {x.parameter for x in audit.leaks} == {"model.0.base.weight", "model.0.base.bias"}
    assert all(not x.edits and "requires_grad_(False) on it" in x.fix
               and x.fix.startswith("add it to the optimizer built at") for x in audit.leaks)
    before = dict(zip(_keys(model, stepped := [p for g in optimizer.param_groups
                                               for p in g["params"]]), _grads(step, stepped)))
    # the fix that applies here, followed: the base frozen, the adapters' gradients as before
    model, optimizer, step = _lora_case(seed, frozen=True)
    assert audit_step(step, optimizer, modules={"model": model}).ok
    stepped = [p for g in optimizer.param_groups for p in g["params"]]
    after = dict(zip(_keys(model, stepped), _grads(step, stepped)))
    assert after.keys() == before.keys()
    for key, grad in before.items():
        torch.testing.assert_close(after[key], grad)
