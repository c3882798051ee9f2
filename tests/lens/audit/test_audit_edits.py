"""A fix as an edit of the user's code (issue 53): each kind of edit found from a real step's
recording, written into the source by :func:`apply_edits`, and the edited code run."""

from __future__ import annotations

import linecache
from pathlib import Path
from types import ModuleType

import pytest
import torch
from steps_on_disk import load

from toolkit import audit_step
from toolkit.audit.edit import Edit
from toolkit.audit.fixes.edits import apply_edits, cut_as_seen, skeleton


def _edits(audit) -> list[Edit]:
    return list(dict.fromkeys(e for kind in (audit.leaks, audit.targets, audit.dead,
                                             audit.carried, audit.held)
                              for f in kind for e in f.edits))


_GAN = """
    import torch
    from torch import nn

    def build(seed):
        torch.manual_seed(seed)
        G, D = nn.Linear(2, 3), nn.Linear(3, 1)
        z = torch.randn(4, 2)

        def step():
            fake = G(z)
            d = D(fake).mean()
            g = -D(fake).mean()
            return {"d": d, "g": g}

        opts = {"d": torch.optim.SGD(D.parameters(), lr=0.1),
                "g": torch.optim.SGD(G.parameters(), lr=0.1)}
        return step, opts, {"G": G, "D": D}
"""


def test_a_leaks_edit_wraps_the_argument_handed_to_the_module(tmp_path: Path,
                                                               seed: int) -> None:
    module = load(tmp_path / "gan_step.py", _GAN)
    step, opts, modules = module.build(seed)
    audit = audit_step(step, opts, modules=modules)
    (edit,) = _edits(audit)
    assert (edit.file, edit.old, edit.new) == ("gan_step.py", "fake",
                                               "fake.detach()")
    assert f"edit: {edit}" in str(audit)
    assert str(edit) == f"gan_step.py:{edit.line}: fake -> fake.detach()"
    fixed = load(tmp_path / "gan_fixed.py",
                  apply_edits((tmp_path / "gan_step.py").read_text("utf-8"), [edit]))
    step, opts, modules = fixed.build(seed)
    assert audit_step(step, opts, modules=modules).ok
    losses = step()
    losses["d"].backward()
    assert modules["G"].weight.grad is None and modules["D"].weight.grad is not None


def test_edits_nest_and_keep_every_line_number() -> None:
    source = "y = f(x, g(x))\nz = 1\n"
    outer = Edit("a.py", 1, 4, 1, 14, "f(x, g(x))", "torch.as_tensor(f(x, g(x))).detach()",
                 imports=("import torch",))
    inner = Edit("a.py", 1, 9, 1, 13, "g(x)", "g(x).detach()")
    out = apply_edits(source, [outer, inner])
    assert out.splitlines()[:2] == ["y = torch.as_tensor(f(x, g(x).detach())).detach()",
                                    "z = 1"]
    assert out.splitlines()[2] == "import torch"
    assert apply_edits(source, [inner, outer]) == out  # the order given does not matter


def test_a_cut_of_a_one_letter_name_nests_though_detach_spells_it_again() -> None:
    # "h" is also the last letter of "detach": the edit still wraps h, whole, once
    source = "y = f(h + c)\n"
    outer = Edit("a.py", 1, 4, 1, 12, "f(h + c)", "f(h + c).detach()")
    h = Edit("a.py", 1, 6, 1, 7, "h", "h.detach()")
    c = Edit("a.py", 1, 10, 1, 11, "c", "c.detach()")
    assert apply_edits(source, [outer, h, c]) == "y = f(h.detach() + c.detach()).detach()\n"


def test_an_import_the_file_already_binds_is_not_added_again() -> None:
    # "import types, torch" binds torch: an edit needing "import torch" adds nothing
    source = "import types, torch\nwith torch.no_grad():\n    y = 1\n"
    edit = Edit("a.py", 2, 5, 2, 20, "torch.no_grad()", "torch.enable_grad()",
                imports=("import torch",))
    assert apply_edits(source, [edit]) == source.replace("no_grad", "enable_grad")
    cut = Edit("a.py", 3, 8, 3, 9, "1", "np.float32(1)", imports=("import numpy as np",))
    assert apply_edits(source, [cut]).endswith("import numpy as np\n")


def test_an_edit_that_does_not_match_the_source_is_refused() -> None:
    stale = Edit("a.py", 1, 4, 1, 8, "h(x)", "h(x).detach()")
    with pytest.raises(ValueError, match=r"apply_edits: a\.py:1 does not hold 'h\(x\)'"):
        apply_edits("y = g(x)\n", [stale])
    one = Edit("a.py", 1, 4, 1, 8, "g(x)", "h")
    two = Edit("a.py", 1, 6, 1, 7, "x", "w")
    with pytest.raises(ValueError, match="two edits overlap"):
        apply_edits("y = g(x)\n", [one, two])


_MEAN = """
    import torch
    from torch import nn

    class Tracker(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)
            self.register_buffer("running", torch.zeros(2))

        def forward(self, x):
            out = self.lin(x)
            self.running.mul_(0.9).add_(0.1 * out.mean(0))
            return out

    def build(seed):
        torch.manual_seed(seed)
        model = Tracker()
        x = torch.randn(4, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        return (lambda: model(x).pow(2).mean()), opt, model
"""


def test_a_buffer_written_from_a_graph_is_cut_where_the_write_reads_it(tmp_path: Path,
                                                                       seed: int) -> None:
    module = load(tmp_path / "mean_step.py", _MEAN)
    step, opt, model = module.build(seed)
    audit = audit_step(step, opt)
    (held,) = audit.held
    (edit,) = held.edits
    assert (edit.old, edit.new) == ("0.1 * out.mean(0)", "(0.1 * out.mean(0)).detach()")
    fixed = load(tmp_path / "mean_fixed.py",
                  apply_edits((tmp_path / "mean_step.py").read_text("utf-8"), [edit]))
    step, opt, model = fixed.build(seed)
    assert audit_step(step, opt).ok
    step().backward()
    step().backward()  # no graph kept from the first call
    assert model.running.grad_fn is None


def test_a_cut_is_written_in_plain_torch_for_the_value_the_step_held(tmp_path: Path) -> None:
    # the cut of a value is written for what the step held there on each call: a tensor, a
    # number then a tensor (a running mean that starts as 0), a state made on the first call,
    # a tuple of tensors; an assignment of mixed values goes under torch.no_grad()
    path = tmp_path / "a.py"
    path.write_text("def f(x, m):\n    out, (h, c) = m(x)\n    return g(x)\n", "utf-8")
    linecache.checkcache(str(path))
    x = Edit("a.py", 3, 13, 3, 14, "x", "x.detach()", str(path), cut=True)
    call = Edit("a.py", 2, 18, 2, 22, "m(x)", "m(x).detach()", str(path), cut=True)
    t = torch.zeros(1)
    forms = [
        ((t, t), "x.detach()"),
        ((0, t), "torch.as_tensor(x).detach()"),
        ((None, t), "None if x is None else x.detach()"),
        (((), [t, t]), None),  # a tuple, then a list: no one comprehension is both
        (((t, t), (t, t)), "tuple(t.detach() for t in x)"),
        (([(t, t)], [(t, t)]), "[tuple(t.detach() for t in s) for s in x]"),
        (({"a": t}, {"a": t}), "{k: t.detach() for k, t in x.items()}"),
    ]
    for values, new in forms:
        found = cut_as_seen(x, [skeleton(v) for v in values])
        assert (None if found is None else found.new) == new, values
        assert found is None or not found.cut
    mixed = cut_as_seen(call, [skeleton((t, (t, t)))] * 2)
    assert mixed is not None and (mixed.line, mixed.col, mixed.new) == (
        2, 4, "with torch.no_grad():\n        out, (h, c) = m(x)")
    assert cut_as_seen(x, [skeleton((t, (t, t)))]) is None  # a read, not an assignment
    assert cut_as_seen(x, []) is x  # never ran: the proof decides


_RUNNING = """
    import torch
    from torch import nn

    class Centred(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)
            self.avg = 0  # a running mean that starts as a Python number

        def forward(self, x):
            out = self.lin(x)
            self.avg = 0.9 * self.avg + 0.1 * out.mean()
            return out - self.avg

    def build(seed):
        torch.manual_seed(seed)
        model = Centred()
        x = torch.randn(4, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        return (lambda: model(x).pow(2).mean()), opt, model, x
"""


def test_a_state_this_steps_loss_trains_through_is_cut_where_it_is_read(tmp_path: Path,
                                                                        seed: int) -> None:
    # issue 53: detaching where the running mean is stored would also cut this step's own
    # gradient through it; the fix cuts the previous step's value where it is read, and
    # works on the first call, when it is still the number 0
    module = load(tmp_path / "running_step.py", _RUNNING)
    step, opt, model, x = module.build(seed)
    audit = audit_step(step, opt)
    assert audit.carried and audit.held
    edits = _edits(audit)
    assert [(e.old, e.new) for e in edits] == [("self.avg", "torch.as_tensor(self.avg).detach()")]
    fixed = load(tmp_path / "running_fixed.py",
                  apply_edits((tmp_path / "running_step.py").read_text("utf-8"), edits))
    step, opt, model, x = fixed.build(seed)
    lin = torch.nn.Linear(2, 2)
    lin.load_state_dict(model.lin.state_dict())
    avg = torch.zeros(())
    for _ in range(2):  # the reference: each step's own mean trained, the old one constant
        step().backward()
        out = lin(x)
        new = 0.9 * avg + 0.1 * out.mean()
        (out - new).pow(2).mean().backward()
        avg = new.detach()
        for mine, ref in ((model.lin.weight, lin.weight), (model.lin.bias, lin.bias)):
            torch.testing.assert_close(mine.grad, ref.grad)
            mine.grad, ref.grad = None, None
    assert audit_step(step, opt).ok


def _sibling(name: str) -> ModuleType:
    """The test module ``name`` of this folder, whose constructed steps the edits fix."""
    return load(Path(__file__).with_name(f"{name}.py"), name=f"_steps_of_{name}")


def _edited(module: ModuleType, edits: list[Edit], folder: Path) -> ModuleType:
    """``module`` loaded again from a copy of its file with ``edits`` written in."""
    source = Path(module.__file__).read_text("utf-8")
    edited = apply_edits(source, edits)
    assert len(edited.splitlines()) == len(source.splitlines())  # every line keeps its number
    return load(folder / f"edited_{Path(module.__file__).name}", edited)


def _stepped_grads(step, optimizer) -> list[torch.Tensor | None]:
    tensors = [p for g in optimizer.param_groups for p in g["params"]]
    for t in tensors:
        t.grad = None
    step().backward()
    return [None if t.grad is None else t.grad.clone() for t in tensors]


def _named_grads(step, optimizer, model) -> dict[str, torch.Tensor | None]:
    """The gradient of each tensor ``optimizer`` steps, by its name in ``model`` (or its
    place among the stepped tensors, for a tensor of another module)."""
    names = {id(p): n for n, p in model.named_parameters()}
    tensors = [p for g in optimizer.param_groups for p in g["params"]]
    return {names.get(id(t), f"#{i}"): g
            for i, (t, g) in enumerate(zip(tensors, _stepped_grads(step, optimizer)))}


@pytest.mark.parametrize("case", ["_clip_case", "_scalar_mix_case", "_clip_groups_case"])
def test_a_learned_tensor_joins_its_optimizer_by_the_printed_edit(case: str, tmp_path: Path,
                                                                   seed: int) -> None:
    source = _sibling("test_audit_optimizer_fixes")
    _, optimizer, step, left_out = getattr(source, case)(seed, fixed=False)
    audit = audit_step(step, optimizer)
    edits = _edits(audit)
    assert len(edits) == 1 and all(name in edits[0].new for name in left_out), str(audit)
    edited = _edited(source, edits, tmp_path)
    model, optimizer, step, _ = getattr(edited, case)(seed, fixed=False)
    assert audit_step(step, optimizer).ok
    ref_model, ref_optimizer, ref_step, _ = getattr(source, case)(seed, fixed=True)
    mine, ref = (_named_grads(step, optimizer, model),
                 _named_grads(ref_step, ref_optimizer, ref_model))
    assert mine.keys() == ref.keys()
    torch.testing.assert_close(mine, ref)


@pytest.mark.parametrize("case", ["_binary_net", "_fake_quant"])
def test_a_zero_derivative_op_gets_the_printed_straight_through_estimator(
        case: str, tmp_path: Path, seed: int) -> None:
    source = _sibling("test_audit_zero_derivative")
    _, opt, step = getattr(source, case)(seed, ste=False)
    audit = audit_step(step, opt)
    edits = _edits(audit)
    assert edits and all(e.new == f"{e.old.split('(')[1].rstrip(')')} + ({e.old} - "
                                  f"{e.old.split('(')[1].rstrip(')')}).detach()" for e in edits), str(audit)
    edited = _edited(source, edits, tmp_path)
    _, opt, step = getattr(edited, case)(seed, ste=False)
    assert audit_step(step, opt).ok
    _, ref_opt, ref_step = getattr(source, case)(seed, ste=True)
    torch.testing.assert_close(step(), ref_step())
    for mine, ref in zip(_stepped_grads(step, opt), _stepped_grads(ref_step, ref_opt),
                         strict=True):
        torch.testing.assert_close(mine, ref)


def _value_copy_case(seed: int, *, stacked: bool = False):
    """A learned temperature read through ``torch.tensor([...])`` (issue 53): the values are
    copied and the graph is not, so ``log_t`` gets no gradient; ``stacked`` writes the value
    with ``torch.stack``, which keeps it."""
    torch.manual_seed(seed)
    net = torch.nn.Linear(3, 2)
    log_t = torch.nn.Parameter(torch.zeros(()))
    opt = torch.optim.Adam([*net.parameters(), log_t], lr=1e-2)
    x = torch.randn(5, 3)

    def step() -> torch.Tensor:
        if stacked:
            scale = torch.stack([torch.as_tensor(1.0), log_t.exp()])
        else:
            scale = torch.tensor([1.0, log_t.exp()])
        return (net(x) * scale).pow(2).mean()

    return step, opt


# torch's own warning on the step's torch.tensor of a tensor that requires grad
@pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad")
def test_a_value_copied_by_torch_tensor_is_dead_at_its_line_and_the_edit_trains_it(
        tmp_path: Path, seed: int) -> None:
    step, opt = _value_copy_case(seed)
    assert _stepped_grads(step, opt)[-1] is None  # the oracle: log_t gets no gradient
    audit = audit_step(step, opt)
    (dead,) = audit.dead
    assert dead.kind == "value_copy" and dead.shape == ()
    (line,) = dead.lines
    assert line.file == "test_audit_edits.py" and "torch.tensor([1.0, log_t.exp()])" in line.text
    (edit,) = dead.edits
    assert f"edit: {edit}" in str(audit)
    this = _sibling("test_audit_edits")
    step, opt = _edited(this, [edit], tmp_path)._value_copy_case(seed)
    want = _stepped_grads(*_value_copy_case(seed, stacked=True))
    assert all(g is not None and torch.equal(g, h)
               for g, h in zip(_stepped_grads(step, opt), want))
    assert audit_step(step, opt).ok


_EMA_TEACHER = """
    import torch
    from torch import nn

    def build(seed):
        torch.manual_seed(seed)
        student, teacher = nn.Linear(4, 3), nn.Linear(4, 3)
        teacher.load_state_dict(student.state_dict())
        teacher.requires_grad_(False)
        opt = torch.optim.SGD(student.parameters(), lr=0.1)
        x = torch.randn(8, 4)

        def step():
            for ps, pt in zip(student.parameters(), teacher.parameters()):
                pt.mul_(0.99).add_(ps, alpha=0.01)
            t = torch.softmax(teacher(x), -1).detach()
            return -(t * torch.log_softmax(student(x), -1)).sum(-1).mean()

        return step, opt, student, teacher
"""


def test_a_teacher_parameter_written_with_its_graph_is_held_and_cut_where_written(
        tmp_path: Path, seed: int) -> None:
    # facebookresearch/dino's EMA (param_k.data.mul_(m).add_((1 - m) * param_q.detach().data)
    # under torch.no_grad()), written without either: the frozen teacher's parameters become
    # non-leaves holding each step's graph
    module = load(tmp_path / "ema_step.py", _EMA_TEACHER)
    step, opt, student, teacher = module.build(seed)
    audit = audit_step(step, opt, modules={"student": student, "teacher": teacher})
    assert sorted((h.module, h.name, h.kind) for h in audit.held) == [
        ("teacher", "bias", "parameter"), ("teacher", "weight", "parameter")]
    (edit,) = _edits(audit)
    assert (edit.old, edit.new) == ("ps", "ps.detach()")
    fixed = load(tmp_path / "ema_fixed.py",
                  apply_edits((tmp_path / "ema_step.py").read_text("utf-8"), [edit]))
    step, opt, student, teacher = fixed.build(seed)
    assert audit_step(step, opt, modules={"student": student, "teacher": teacher}).ok
    ref_step, _, ref_student, ref_teacher = module.build(seed)
    for _ in range(2):  # the student's gradient as before; the teacher stays a leaf
        step().backward()
        ref_step().backward()
        torch.testing.assert_close(student.weight.grad, ref_student.weight.grad)
        torch.testing.assert_close(teacher.weight, ref_teacher.weight.detach())
        assert teacher.weight.is_leaf and not ref_teacher.weight.is_leaf


_PPO = """
    import torch
    import torch.nn.functional as F
    from torch import nn

    def build(seed, fixed):
        torch.manual_seed(seed)
        pi, v = nn.Linear(4, 3), nn.Linear(4, 1)
        opt = torch.optim.Adam([*pi.parameters(), *v.parameters()], lr=3e-4)
        s, a = torch.randn(8, 4), torch.randint(0, 3, (8, 1))
        prob_a, td_target = torch.rand(8, 1) * 0.9 + 0.05, torch.randn(8, 1)

        def step():
            delta = td_target - v(s)
            advantage = delta.detach() if fixed else delta
            pi_a = F.softmax(pi(s), dim=1).gather(1, a)
            ratio = torch.exp(torch.log(pi_a) - torch.log(prob_a))
            surr1 = ratio * advantage
            surr2 = torch.clamp(ratio, 1 - 0.1, 1 + 0.1) * advantage
            return (-torch.min(surr1, surr2) + F.smooth_l1_loss(v(s), td_target)).mean()

        return step, opt, pi, v
"""


def test_a_clipped_surrogate_reads_its_advantage_through_torch_min(tmp_path: Path,
                                                                     seed: int) -> None:
    # seungeunrho/minimalRL ppo.py's loss (-torch.min(surr1, surr2) + smooth_l1_loss), its
    # advantage left on the critic's graph: the critic is trained through the policy term
    module = load(tmp_path / "ppo_step.py", _PPO)
    step, opt, pi, v = module.build(seed, False)
    audit = audit_step(step, opt, modules={"pi": pi, "v": v})
    (target,) = audit.targets
    assert sorted(target.parameters) == ["v.bias", "v.weight"] and "Minimum" in target.path
    (edit,) = _edits(audit)
    assert (edit.old, edit.new) == ("td_target - v(s)", "(td_target - v(s)).detach()")
    fixed = load(tmp_path / "ppo_fixed.py",
                  apply_edits((tmp_path / "ppo_step.py").read_text("utf-8"), [edit]))
    step, opt, pi, v = fixed.build(seed, False)
    assert audit_step(step, opt, modules={"pi": pi, "v": v}).ok
    ref_step, ref_opt, ref_pi, ref_v = module.build(seed, True)
    assert audit_step(ref_step, ref_opt, modules={"pi": ref_pi, "v": ref_v}).ok
    step().backward()
    ref_step().backward()
    for mine, ref in ((pi.weight, ref_pi.weight), (v.weight, ref_v.weight), (v.bias, ref_v.bias)):
        torch.testing.assert_close(mine.grad, ref.grad)


_WGAN_GP = """
    import torch
    from torch import nn

    def build(seed, fixed):
        torch.manual_seed(seed)
        G = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 2))
        D = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 1))
        opt_d = torch.optim.Adam(D.parameters(), lr=1e-4, betas=(0.5, 0.9))
        real, noise, alpha = torch.randn(4, 2), torch.randn(4, 2), torch.rand(4, 1)

        def step():
            fake = G(noise).detach() if fixed else G(noise)
            d_fake = D(fake).mean()
            interpolates = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
            grads, = torch.autograd.grad(D(interpolates).sum(), interpolates,
                                         create_graph=True)
            penalty = ((grads.norm(2, dim=1) - 1) ** 2).mean() * 10
            return d_fake - D(real).mean() + penalty

        return step, opt_d, G, D
"""


def test_a_gradient_penalty_is_a_second_path_one_cut_where_made_removes_both(
        tmp_path: Path, seed: int) -> None:
    # caogang/wgan-gp gan_toy.py's critic step (the fake batch detached through .data), with
    # the detach left out: the fake batch reaches the critic's loss by D(fake) and by the
    # gradient penalty's interpolates; a cut where D reads it leaves the penalty's path open
    module = load(tmp_path / "gp_step.py", _WGAN_GP)
    step, opt, G, D = module.build(seed, False)
    audit = audit_step(step, opt, modules={"G": G, "D": D})
    assert sorted(x.parameter for x in audit.leaks) == sorted(
        f"G.{n}" for n, _ in G.named_parameters())
    (edit,) = _edits(audit)
    assert (edit.old, edit.new) == ("G(noise)", "G(noise).detach()")
    fixed = load(tmp_path / "gp_fixed.py",
                  apply_edits((tmp_path / "gp_step.py").read_text("utf-8"), [edit]))
    step, opt, G, D = fixed.build(seed, False)
    assert audit_step(step, opt, modules={"G": G, "D": D}).ok
    ref_step, _, _, ref_D = module.build(seed, True)
    step().backward()
    ref_step().backward()
    assert all(p.grad is None for p in G.parameters())
    for mine, ref in zip(D.parameters(), ref_D.parameters(), strict=True):
        torch.testing.assert_close(mine.grad, ref.grad)


_SAC_ALPHA = """
    import torch
    from torch import nn

    def build(seed, fixed):
        torch.manual_seed(seed)
        policy = nn.Linear(3, 2)
        log_alpha = torch.zeros(1, requires_grad=True)
        opts = {"policy": torch.optim.Adam(policy.parameters(), lr=3e-4),
                "alpha": torch.optim.Adam([log_alpha], lr=3e-4)}
        state, target_entropy = torch.randn(8, 3), -1.0

        def step():
            mean, log_std = policy(state).chunk(2, 1)
            normal = torch.distributions.Normal(mean, log_std.exp())
            log_pi = normal.log_prob(normal.rsample())
            policy_loss = (log_alpha.exp().detach() * log_pi).mean()
            entropy_gap = (log_pi + target_entropy).detach() if fixed else log_pi + target_entropy
            return {"policy": policy_loss, "alpha": -(log_alpha * entropy_gap).mean()}

        return step, opts, policy, log_alpha
"""


def test_a_temperature_loss_trains_its_weight_and_leaks_into_the_policy(
        tmp_path: Path, seed: int) -> None:
    # pranz24/pytorch-soft-actor-critic sac.py's temperature loss, -(log_alpha * (log_pi +
    # target_entropy).detach()).mean(), without its detach: the log-probability side trains
    # nothing the temperature's optimizer steps, so it is no score-function term (no TARGET
    # naming log_alpha); it leaks into the policy, cut where it is read
    module = load(tmp_path / "sac_step.py", _SAC_ALPHA)
    step, opts, policy, log_alpha = module.build(seed, False)
    audit = audit_step(step, opts, modules={"policy": policy})
    assert not audit.targets and {(x.loss, x.parameter) for x in audit.leaks} == {
        ("alpha", "policy.weight"), ("alpha", "policy.bias")}, str(audit)
    edits = _edits(audit)
    fixed = load(tmp_path / "sac_fixed.py",
                  apply_edits((tmp_path / "sac_step.py").read_text("utf-8"), edits))
    step, opts, policy, log_alpha = fixed.build(seed, False)
    assert audit_step(step, opts, modules={"policy": policy}).ok
    step()["alpha"].backward()  # each build reseeds: its draws before the next build
    ref_step, _, ref_policy, ref_log_alpha = module.build(seed, True)
    ref_step()["alpha"].backward()
    torch.testing.assert_close(log_alpha.grad, ref_log_alpha.grad)
    assert policy.weight.grad is None and ref_policy.weight.grad is None


_PIX2PIX = """
    import torch
    from torch import nn

    def build(seed, fixed):
        torch.manual_seed(seed)
        G, D = nn.Linear(4, 4), nn.Linear(8, 1)
        opts = {"d": torch.optim.Adam(D.parameters(), lr=2e-4),
                "g": torch.optim.Adam(G.parameters(), lr=2e-4)}
        real_A, real_B = torch.randn(8, 4), torch.randn(8, 4)

        def step():
            fake_B = G(real_A) if fixed else G(real_A).detach()
            fake_AB = torch.cat((real_A, fake_B), 1)
            pred_fake = D(fake_AB.detach() if fixed else fake_AB)
            loss_d = pred_fake.pow(2).mean() + (D(torch.cat((real_A, real_B), 1)) - 1).pow(2).mean()
            loss_g = (D(torch.cat((real_A, fake_B), 1)) - 1).pow(2).mean() + (fake_B - real_B).abs().mean()
            return {"d": loss_d, "g": loss_g}

        return step, opts, G, D
"""


def test_a_detach_two_losses_read_is_moved_where_only_one_must_not_train_through_it(
        tmp_path: Path, seed: int) -> None:
    # junyanz/pytorch-CycleGAN-and-pix2pix pix2pix_model.py detaches the fake pair where the
    # discriminator's loss reads it (backward_D) and not for the generator's (backward_G);
    # the bug, constructed, detaches fake_B where it is made: the generator never trains, and
    # removing that detach alone would train it on the discriminator's loss
    module = load(tmp_path / "p2p_step.py", _PIX2PIX)
    step, opts, G, D = module.build(seed, False)
    audit = audit_step(step, opts, modules={"G": G, "D": D})
    (dead,) = {(d.kind, d.edits) for d in audit.dead}
    edits = list(dead[1])
    assert dead[0] == "detach" and [e.new for e in edits] == ["G(real_A)",
                                                               "fake_B.detach()"]
    fixed = load(tmp_path / "p2p_fixed.py",
                  apply_edits((tmp_path / "p2p_step.py").read_text("utf-8"), edits))
    step, opts, G, D = fixed.build(seed, False)
    assert audit_step(step, opts, modules={"G": G, "D": D}).ok
    ref_step, _, ref_G, ref_D = module.build(seed, True)
    for name, trained, ref in (("d", D, ref_D), ("g", G, ref_G)):
        for m in (G, D, ref_G, ref_D):
            m.zero_grad(set_to_none=True)
        step()[name].backward()
        ref_step()[name].backward()
        for mine, want in zip(trained.parameters(), ref.parameters(), strict=True):
            torch.testing.assert_close(mine.grad, want.grad)
        if name == "d":  # the discriminator's loss leaves the generator alone
            assert G.weight.grad is None and ref_G.weight.grad is None


_GROUPS = """
    import torch
    from torch import nn

    def build(kind):
        torch.manual_seed(0)
        model = nn.ModuleDict({"trunk": nn.Linear(3, 4), "actor": nn.Linear(4, 2),
                               "critic": nn.Linear(4, 1)})
        model.scale = nn.Parameter(torch.ones(()))
        opt_a = torch.optim.Adam([
            {"name": "tête", "params": model.trunk.parameters()},  # the shared trunk
            {"params": model.actor.parameters(), "lr": 1e-3},  # the actor
        ])
        group = {"params": model.critic.parameters(), "lr": 1e-2}
        opt_c = torch.optim.SGD([group], lr=0.1)
        x = torch.randn(5, 3)

        def step():
            h = model.trunk(x).detach() if kind == "shared" else model.trunk(x)
            return {"a": model.actor(h).mean() * model.scale, "c": model.critic(h).pow(2).mean()}

        return step, {"a": opt_a, "c": opt_c}, model
"""


def test_edits_of_optimizers_built_from_groups_keep_lines_text_and_comments(
        tmp_path: Path) -> None:
    # a group list over four lines with comments and a non-ASCII group name; a one-group
    # optimizer built from a dict variable: the edits keep every line, run, and end the finding
    module = load(tmp_path / "groups_step.py", _GROUPS)
    step, opts, model = module.build("plain")
    audit = audit_step(step, opts, modules={"model": model})
    (scale,) = [x for x in audit.leaks if x.parameter == "model.scale"]
    (join,) = scale.edits
    assert '# the actor' not in join.new.split('{"params": [model.scale]}')[0].splitlines()[-1]
    source = (tmp_path / "groups_step.py").read_text("utf-8")
    edited = apply_edits(source, [join])
    assert len(edited.splitlines()) == len(source.splitlines()) and "tête" in edited
    step, opts, model = load(tmp_path / "groups_joined.py", edited).build("plain")
    assert not any(x.parameter == "model.scale"
                   for x in audit_step(step, opts, modules={"model": model}).leaks)


def test_an_optimizer_is_moved_only_when_nothing_it_reads_changes_on_the_way(
        tmp_path: Path) -> None:
    # the head replaced after the optimizer, with the learning rate assigned again in
    # between: moving the optimizer would build it with lr=100, so no edit is written
    source = """
        import torch
        import torch.nn.functional as F
        from torch import nn

        def build():
            torch.manual_seed(0)
            model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
            model.fc = nn.Linear(4, 2)
            model.forward = lambda x: model.fc(model[1](model[0](x)))
            lr = 0.1
            optimizer = torch.optim.SGD(model.parameters(), lr=lr)
            lr = 100.0
            model.fc = nn.Linear(4, 3)
            x, y = torch.randn(6, 4), torch.randint(0, 3, (6,))

            def step():
                return F.cross_entropy(model(x), y)

            return audit_step(step, optimizer, modules={"model": model})
    """.replace("import torch\n", "import torch\n        from toolkit import audit_step\n", 1)
    audit = load(tmp_path / "moved_lr.py", source).build()
    assert {d.kind for d in audit.dead} == {"replaced"}, str(audit)
    assert all(f.lines and not f.edits for f in [*audit.leaks, *audit.dead]), str(audit)
    audit = load(tmp_path / "moved_ok.py", source.replace("            lr = 100.0\n", "")).build()
    assert all(len(f.edits) == 2 for f in [*audit.leaks, *audit.dead]), str(audit)


def test_a_detached_value_both_losses_read_through_one_value_gets_no_edit(seed: int) -> None:
    # fake_AB, made once from the detached fake_B, is read by both losses: a cut where it is
    # made would keep the generator dead, so the fix is said and no edit is written
    torch.manual_seed(seed)
    G, D = torch.nn.Linear(4, 4), torch.nn.Linear(8, 1)
    opts = {"d": torch.optim.Adam(D.parameters()), "g": torch.optim.Adam(G.parameters())}
    real_A, z = torch.randn(5, 4), torch.randn(5, 4)

    def step() -> dict[str, torch.Tensor]:
        fake_B = G(z).detach()
        fake_AB = torch.cat((real_A, fake_B), 1)
        return {"d": D(fake_AB).mean(), "g": -D(fake_AB).mean()}

    audit = audit_step(step, opts, modules={"G": G, "D": D})
    (dead,) = {(d.kind, d.edits, d.fix) for d in audit.dead}
    assert dead[0] == "detach" and not dead[1] and "on loss 'd''s side only" in dead[2]


@pytest.mark.parametrize(("old", "new", "said"), [
    ("        x = f(y)\n", "    x = f(y)\n", "moved out of its block: x = f(y)"),
    ("    x = f(y)\n", "        x = f(y)\n", "moved into the block above: x = f(y)"),
    ("x = f(y)", "x = f(y).detach()", "x = f(y) -> x = f(y).detach()"),
])
def test_an_edit_that_only_indents_says_where_it_moves_the_lines(old, new, said):
    edit = Edit("train.py", 7, 0, 8, 0, old, new)
    assert str(edit) == f"train.py:7: {said}"
