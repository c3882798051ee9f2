"""audit_step / assert_clean_step: contract, cuts it names, module state, errors."""

from __future__ import annotations

import copy
import itertools
import json
import random

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from toolkit import (
    GradientLeakError,
    as_constant,
    assert_clean_step,
    audit_step,
    disable_blocks,
    stop_gradient,
)


def _mlp() -> nn.Sequential:
    return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))


def test_runs_the_step_twice_and_never_writes_grad_or_steps(monkeypatch) -> None:
    """The audit's truth is one ``autograd.grad`` per loss: no ``backward()`` (which writes
    ``.grad``), no step."""
    q, q_target = _mlp(), _mlp()
    opt = torch.optim.SGD(q.parameters(), lr=0.1)
    x = torch.randn(5, 3)
    calls = itertools.count()  # not a list: the audit puts the lists the step fills back
    grads = []
    real_grad = torch.autograd.grad

    def forbidden(*args, **kwargs):
        raise AssertionError("the audit must not write .grad or step")

    def counted(*args, **kwargs):
        grads.append(1)
        return real_grad(*args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "backward", forbidden)
    monkeypatch.setattr(torch.autograd, "backward", forbidden)
    monkeypatch.setattr(torch.autograd, "grad", counted)
    monkeypatch.setattr(opt, "step", forbidden)

    def step() -> torch.Tensor:
        next(calls)
        return (q(x) - q_target(x)).pow(2).mean()

    audit = audit_step(step, opt)
    # twice, and twice more for the edited copy that checks the one fix before it is printed;
    # one autograd.grad per audited step
    assert next(calls) == 4 and len(audit.leaks) == 4 and len(grads) == 2
    assert all(leak.edits for leak in audit.leaks)
    assert all(p.grad is None for p in [*q.parameters(), *q_target.parameters()])


def test_module_state_is_put_back_unless_told_otherwise(seed: int) -> None:
    net = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Dropout(0.5))
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    x = torch.randn(8, 3)
    bn = net[1]
    before = (bn.running_mean.clone(), int(bn.num_batches_tracked))
    torch.manual_seed(seed + 3)
    random.seed(3)
    audit = audit_step(lambda: net(x).sum(), opt)
    assert torch.equal(bn.running_mean, before[0]) and int(bn.num_batches_tracked) == before[1]
    after_audit = (torch.rand(3), random.random())
    torch.manual_seed(seed + 3)
    random.seed(3)
    assert torch.equal(after_audit[0], torch.rand(3)) and after_audit[1] == random.random()
    assert any("running_mean" in note for note in audit.notes)
    audit_step(lambda: net(x).sum(), opt, restore_state=False)
    assert int(bn.num_batches_tracked) == before[1] + 2  # two calls, two updates
    assert not torch.equal(bn.running_mean, before[0])


@pytest.mark.parametrize("how", ["lerp_", "data"])
def test_an_in_place_update_inside_the_step_is_undone(how: str) -> None:
    student, teacher = nn.Linear(3, 2), nn.Linear(3, 2)
    teacher.requires_grad_(False)
    opt = torch.optim.SGD(student.parameters(), lr=0.1)
    x = torch.randn(4, 3)
    start = [p.clone() for p in teacher.parameters()]

    def step() -> torch.Tensor:
        with torch.no_grad():
            for t, s in zip(teacher.parameters(), student.parameters()):
                if how == "lerp_":
                    t.lerp_(s, 0.5)
                else:
                    t.data = 0.5 * (t.data + s.data)
        return (student(x) - teacher(x)).pow(2).mean()

    audit = audit_step(step, opt)
    assert audit.ok and all(torch.equal(p, q) for p, q in zip(teacher.parameters(), start))
    assert any(note.startswith("the step writes teacher.weight, teacher.bias in place")
               for note in audit.notes)
    audit_step(step, opt, restore_state=False)
    assert not torch.equal(teacher.weight, start[0])


def test_a_named_cut_is_named_as_what_stops_a_dead_parameter() -> None:
    encoder, head = nn.Linear(3, 4), nn.Linear(4, 2)
    opt = torch.optim.SGD([*encoder.parameters(), *head.parameters()], lr=0.1)
    x = torch.randn(5, 3)
    audit = audit_step(lambda: head(stop_gradient(encoder(x), name="demo.features")).sum(), opt)
    assert {d.parameter for d in audit.dead} == {"encoder.weight", "encoder.bias"}
    assert {d.cut for d in audit.dead} == {"stop_gradient 'demo.features'"}
    assert all("cut 'demo.features'" in d.path for d in audit.dead)


def test_no_grad_frozen_and_unused_parameters_are_told_apart() -> None:
    # rll-research/cic#5: the encoder ran under no_grad, so the optimizer never moves it
    model = nn.ModuleDict({"encoder": nn.Linear(3, 4), "head": nn.Linear(4, 2),
                           "unused": nn.Linear(2, 2)})
    frozen = nn.Parameter(torch.ones(2), requires_grad=False)
    opt = torch.optim.SGD([*model.parameters(), frozen], lr=0.1)
    x = torch.randn(5, 3)

    def step() -> torch.Tensor:
        with torch.no_grad():
            h = model["encoder"](x)
        return (model["head"](h) * frozen).sum()

    audit = audit_step(step, opt)
    cuts = {d.parameter: d.cut for d in audit.dead}
    assert cuts["model.encoder.weight"].startswith("torch.no_grad()")
    assert cuts["model.unused.weight"] == "not used: the step never reads it"
    kinds = {d.parameter: (d.kind, d.line) for d in audit.dead}
    no_grad_line = step.__code__.co_firstlineno + 2  # the line that calls the encoder
    assert kinds["model.encoder.bias"] == ("no_grad", f"at test_audit_step.py:{no_grad_line} (step)")
    assert kinds["model.unused.bias"] == ("not_used", None)
    assert f"(read by linear with gradients off), at test_audit_step.py:{no_grad_line}" in str(audit)
    assert "model.head.weight" not in cuts and "frozen" not in cuts
    # a tensor that does not require grad is skipped by every optimizer: frozen, not dead
    assert [(f.parameter, f.written, f.by_step) for f in audit.frozen] == [("frozen", None, False)]
    assert "FROZEN  optimizer 'SGD' holds 1 tensor that does not require grad" in str(audit)


def test_a_module_that_runs_but_whose_output_is_unused_is_not_called_unused() -> None:
    # layer_norm reads its weight and bias as keyword arguments: they are read, not "not used"
    model = nn.ModuleDict({"head": nn.Linear(3, 2), "norm": nn.LayerNorm(3)})
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(5, 3)

    def step() -> torch.Tensor:
        model["norm"](x)  # computed, then dropped
        return model["head"](x).sum()

    dead = audit_step(step, opt).dead
    cuts = {d.parameter: d.cut for d in dead}
    assert set(cuts) == {"model.norm.weight", "model.norm.bias"}
    assert all(c.startswith("no graph: the step reads it") for c in cuts.values())
    called = step.__code__.co_firstlineno + 1  # where the dropped output is computed
    assert {(d.kind, d.line) for d in dead} == {("no_graph", f"at test_audit_step.py:{called} "
                                                             "(step)")}


def test_the_pairing_can_be_learnt_from_running_the_step() -> None:
    """``optimizers`` as a function, asked after the first call (Lightning's manual
    optimization tells which optimizer steps which loss only by running the step)."""
    g, d = nn.Linear(2, 3), nn.Linear(3, 1)
    opt_g, opt_d = torch.optim.SGD(g.parameters(), lr=0.1), torch.optim.SGD(d.parameters(), lr=0.1)
    z, real = torch.randn(4, 2), torch.randn(4, 3)
    asked = []

    def step():
        fake = g(z)  # not detached for the discriminator: a leak into g
        return {"d": d(real).mean() - d(fake).mean(), "g": -d(fake).mean()}

    def pairing():
        asked.append(len(asked))
        return {"d": opt_d, "g": opt_g}

    audit = audit_step(step, pairing)
    assert asked == [0]
    assert {leak.parameter for leak in audit.leaks} == {"g.weight", "g.bias"}
    with pytest.raises(ValueError, match="optimizers must have the same names as the losses"):
        audit_step(step, lambda: {"d": opt_d})


def test_a_disabled_block_is_named_in_the_leak_path_and_its_fix() -> None:
    q, q_target = _mlp(), _mlp()
    opt = torch.optim.SGD(q.parameters(), lr=0.1)
    s, s2 = torch.randn(5, 3), torch.randn(5, 3)

    def step() -> torch.Tensor:
        target = as_constant(lambda: q_target(s2).max(1).values, name="demo.target")
        return F.mse_loss(q(s).max(1).values, target)

    assert audit_step(step, opt).ok
    with disable_blocks("demo.target"):
        audit = audit_step(step, opt)
    assert len(audit.leaks) == 4
    assert all("block 'demo.target' (disabled)" in leak.path for leak in audit.leaks)
    assert all(leak.fix.startswith("the block 'demo.target' is disabled here")
               for leak in audit.leaks)


def test_a_generator_step_passes_through_the_discriminator_unless_it_is_frozen() -> None:
    generator, discriminator = nn.Linear(2, 3), nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 1))
    opt_g = torch.optim.Adam(generator.parameters())
    z = torch.randn(6, 2)

    def g_step() -> torch.Tensor:
        return F.softplus(-discriminator(generator(z))).mean()

    names = sorted(f"discriminator.{n}" for n, _ in discriminator.named_parameters())
    audit = audit_step(g_step, opt_g)  # pass-through is information by default
    assert audit.ok and not audit.leaks
    assert sorted(x.parameter for x in audit.pass_through) == names
    assert all(x.cut_at is None and x.fix.startswith("no cut can remove it")
               for x in audit.pass_through)
    size = sum(p.numel() * p.element_size() for p in discriminator.parameters())
    (line,) = [x for x in str(audit).splitlines() if x.startswith("PASS")]
    assert f"passes through 4 tensors optimizer 'Adam' does not step ({size} B of" in line
    assert "requires_grad_(False)" in line and "toggle_optimizer" in line
    strict = audit_step(g_step, opt_g, allow_pass_through=False)
    assert sorted(x.parameter for x in strict.leaks) == names and not strict.ok

    def g_step_frozen() -> torch.Tensor:
        discriminator.requires_grad_(False)
        try:
            return g_step()
        finally:
            discriminator.requires_grad_(True)

    frozen = audit_step(g_step_frozen, opt_g)
    assert frozen.ok and not frozen.pass_through


def test_graph_built_before_the_audit_is_carried() -> None:
    table, lin = torch.randn(4, 3), nn.Linear(3, 3)
    opt = torch.optim.SGD(lin.parameters(), lr=0.1)
    cached = lin(table)  # computed once, outside the step: its graph is kept between steps
    audit = audit_step(lambda: (lin(table) * cached).sum(), opt)
    (carried,) = audit.carried
    assert carried.created == "before the audit" and carried.shape == (4, 3)
    assert carried.source == "the output of Addmm (lin)"  # made before the hooks were on


def test_a_carried_state_enters_where_this_call_hands_it_on() -> None:
    # a seq2seq step: the encoder's last state is kept for the next batch and starts the
    # decoder; the previous call handed it to the decoder, this call to the encoder
    encoder, decoder = nn.GRU(4, 6, batch_first=True), nn.GRU(4, 6, batch_first=True)
    opt = torch.optim.Adam([*encoder.parameters(), *decoder.parameters()])
    x, y, state = torch.randn(2, 5, 4), torch.randn(2, 3, 4), {"h": torch.zeros(1, 2, 6)}

    def step() -> torch.Tensor:
        _, h = encoder(x, state["h"])
        state["h"] = h
        return decoder(y, h)[0].pow(2).mean()

    (carried,) = audit_step(step, opt, modules={"encoder": encoder, "decoder": decoder}).carried
    assert carried.entered == "the input of encoder" and "(the input of encoder)" in carried.fix


def test_names_come_from_modules_then_self_then_the_closure() -> None:
    class Agent(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.online, self.target = _mlp(), _mlp()
            self.s = torch.randn(5, 3)

        def loss(self) -> torch.Tensor:
            return (self.online(self.s) - self.target(self.s)).pow(2).mean()

    agent = Agent()
    opt = torch.optim.SGD(agent.online.parameters(), lr=0.1)
    names = {x.parameter for x in audit_step(agent.loss, opt).leaks}
    assert names == {f"target.{n}" for n, _ in agent.target.named_parameters()}
    renamed = audit_step(agent.loss, opt, modules={"frozen_copy": agent.target})
    assert {x.parameter for x in renamed.leaks} == {
        f"frozen_copy.{n}" for n, _ in agent.target.named_parameters()}


def test_an_ema_written_through_data_while_the_optimizer_steps_it_is_updated_twice() -> None:
    # MoCo's momentum update assigns .data; here the optimizer also steps the key encoder
    query, key = nn.Linear(3, 2), nn.Linear(3, 2)
    opt = torch.optim.SGD([*query.parameters(), *key.parameters()], lr=0.1)
    x = torch.randn(5, 3)

    def step() -> torch.Tensor:
        for k, q in zip(key.parameters(), query.parameters()):
            k.data = k.data * 0.99 + q.data * 0.01
        return (query(x) * key(x)).sum()

    audit = audit_step(step, opt)
    assert {x.parameter for x in audit.leaks} == {"key.weight", "key.bias"}
    assert all("updated twice" in x.reason for x in audit.leaks)


def test_assert_clean_step_raises_with_the_audits_text() -> None:
    q, q_target = _mlp(), _mlp()
    opt = torch.optim.SGD(q.parameters(), lr=0.1)
    x = torch.randn(5, 3)
    with pytest.raises(GradientLeakError, match=r"(?s)^audit_step: 4 leaking tensors.*LEAK") as info:
        assert_clean_step(lambda: (q(x) - q_target(x)).pow(2).mean(), opt)
    assert str(info.value) == str(info.value.audit)
    assert set(info.value.paths) == {f"q_target.{n}" for n, _ in q_target.named_parameters()}
    clean = assert_clean_step(lambda: q(x).sum(), opt)
    assert clean.ok and json.loads(json.dumps(clean.to_dict()))["ok"] is True


def test_errors_name_the_argument() -> None:
    net = nn.Linear(2, 1)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    x = torch.ones(3, 2)
    with pytest.raises(TypeError, match="audit_step: step must be a zero-argument callable"):
        audit_step(net(x).sum(), opt)
    with pytest.raises(TypeError, match=r"audit_step: step\(\) must return a loss tensor or a "
                                        r"dict name -> loss tensor, got float"):
        audit_step(lambda: 1.0, opt)
    with pytest.raises(ValueError, match=r"optimizers must have the same names as the losses "
                                         r"step\(\) returns; losses \['a', 'b'\], optimizers "
                                         r"\['a', 'c'\]"):
        audit_step(lambda: {"a": net(x).sum(), "b": net(x).mean()}, {"a": opt, "c": opt})
    with pytest.raises(TypeError, match=r"audit_step: optimizers must be an optimizer, one of "
                                        r"its param groups, an nn\.Module or tensors"):
        audit_step(lambda: net(x).sum(), 3)
    with pytest.raises(ValueError, match="audit_step: optimizers is an empty dict"):
        audit_step(lambda: net(x).sum(), {})
    with pytest.raises(TypeError, match=r"audit_step: modules must be an nn\.Module or a dict"):
        audit_step(lambda: net(x).sum(), opt, modules=[net])
    with pytest.raises(TypeError, match=r"got a dict whose entry 'prompt' is a Parameter \(a "
                                        r"tensor is named by the module that holds it\)"):
        audit_step(lambda: net(x).sum(), opt, modules={"net": net,
                                                        "prompt": nn.Parameter(torch.ones(2))})
    with pytest.raises(TypeError, match="audit_step: restore_state must be a bool, got int"):
        audit_step(lambda: net(x).sum(), opt, restore_state=1)
    with pytest.raises(ValueError, match=r"audit_step: optimizers\['a'\] has no parameters"):
        audit_step(lambda: {"a": net(x).sum()}, {"a": []})


def test_the_state_is_restored_even_when_the_step_fails() -> None:
    net = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    x = torch.randn(8, 3)
    calls = []

    def step() -> torch.Tensor:
        calls.append(1)
        out = net(x)
        if len(calls) == 2:
            raise RuntimeError("boom")
        return out.sum()

    with pytest.raises(RuntimeError, match="boom"):
        audit_step(step, opt)
    assert int(net[1].num_batches_tracked) == 0


def test_a_copy_of_a_clean_step_reports_clean_text() -> None:
    net = copy.deepcopy(_mlp())
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    text = str(audit_step(lambda: net(torch.ones(2, 3)).sum(), opt))
    assert text.startswith("audit_step: clean; 1 loss ('loss'), 4 stepped tensors all reached")


def test_a_baseline_that_carries_gradient_is_a_leak_not_pass_through() -> None:
    # issue 33: a shared encoder, the policy loss using the critic's value as its baseline:
    # (reward - value).detach() removes the critic head's gradient and every stepped tensor is
    # still reached, so it is a leak (and the baseline a trained target), not pass-through
    encoder, pi, v = nn.Linear(4, 8), nn.Linear(8, 2), nn.Linear(8, 1)
    opts = {"actor": torch.optim.Adam([*encoder.parameters(), *pi.parameters()]),
            "critic": torch.optim.Adam([*encoder.parameters(), *v.parameters()])}
    s, a, reward = torch.randn(6, 4), torch.randint(0, 2, (6,)), torch.randn(6)

    def step(detach: bool) -> dict[str, torch.Tensor]:
        h = torch.tanh(encoder(s))
        value = v(h).squeeze(1)
        log_pi = F.log_softmax(pi(h), 1).gather(1, a[:, None]).squeeze(1)
        advantage = reward - value
        weight = advantage.detach() if detach else advantage
        return {"actor": -(log_pi * weight).mean(), "critic": advantage.pow(2).mean()}

    audit = audit_step(lambda: step(False), opts)
    assert sorted(x.parameter for x in audit.leaks) == ["v.bias", "v.weight"]
    assert not audit.pass_through
    assert {x.cut_at for x in audit.leaks} == {"the output of Sub (shape (6,))"}
    (target,) = audit.targets
    assert set(target.parameters) == {"encoder.weight", "encoder.bias"}
    fixed = audit_step(lambda: step(True), opts)
    assert not (fixed.leaks or fixed.targets or fixed.dead)
    # the encoder is in both optimizers: each step() moves it, twice per iteration
    (shared,) = fixed.shared  # one finding for the pair of optimizers
    assert sorted(shared.parameters) == ["encoder.bias", "encoder.weight"]
    assert shared.optimizers == ("actor", "critic")


def test_writes_are_called_averages_only_when_they_are() -> None:
    q, q_target, ema, clipped = (nn.Linear(3, 2) for _ in range(4))
    for module in (q_target, ema, clipped):
        module.requires_grad_(False)
    opt = torch.optim.SGD(q.parameters(), lr=0.1)
    x = torch.randn(5, 3)

    def step() -> torch.Tensor:
        q_target.load_state_dict(q.state_dict())  # a hard copy
        with torch.no_grad():
            for e, p in zip(ema.parameters(), q.parameters()):
                e.mul_(0.9).add_(p, alpha=0.1)  # an average
            for c in clipped.parameters():
                c.clamp_(-0.01, 0.01)  # WGAN's weight clipping: neither
        return (q(x) - q_target(x) - ema(x) - clipped(x)).pow(2).mean()

    notes = "\n".join(audit_step(step, opt).notes)
    assert "q_target.weight, q_target.bias in place: a copy of q.weight, q.bias (copy_)" in notes
    assert "ema.weight, ema.bias in place: an average of itself and q.weight, q.bias" in notes
    assert "clipped.weight, clipped.bias in place: written in place (clamp_)" in notes
    assert notes.count("an average") == 1


def test_a_foreach_average_of_a_whole_model_names_the_model_it_averages() -> None:
    # torch.optim.swa_utils' EMA (get_ema_multi_avg_fn): one torch._foreach_lerp_ over every
    # parameter; each average reads its own tensor of the model, not the other averages
    from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

    q = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    ema = AveragedModel(q, multi_avg_fn=get_ema_multi_avg_fn(0.99))
    opt = torch.optim.SGD(q.parameters(), lr=0.1)
    x = torch.randn(5, 3)
    ema.update_parameters(q)  # the first update copies; each one after it averages

    def step() -> torch.Tensor:
        ema.update_parameters(q)
        return q(x).pow(2).mean()

    audit = audit_step(step, opt, modules={"q": q, "ema": ema})
    (note,) = [n for n in audit.notes if "an average of itself and" in n]
    read = note.split("an average of itself and ", 1)[1]
    assert read.startswith("q.") and "ema." not in read, note
    assert "(foreach_lerp_)" in note


def test_module_state_that_keeps_the_steps_graph_is_held() -> None:
    class RunningMean(nn.Module):  # d2l-ai/d2l-en#1342: moving statistics with their graph
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.register_buffer("moving_mean", torch.zeros(3))

        def forward(self, x: torch.Tensor, detach: bool) -> torch.Tensor:
            y = self.lin(x)
            mean = y.mean(0)
            self.moving_mean = 0.9 * self.moving_mean + 0.1 * (mean.detach() if detach else mean)
            return y - mean

    net = RunningMean()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    x = torch.randn(4, 3)
    (held,) = audit_step(lambda: net(x, False).pow(2).sum(), opt).held
    assert (held.module, held.name, held.kind) == ("net", "moving_mean", "buffer")
    assert held.written.startswith("assigned a tensor made by Add") and held.older > 0
    assert held.graph_bytes > 0 and "HELD    net.moving_mean (buffer of shape (3,))" in str(
        audit_step(lambda: net(x, False).pow(2).sum(), opt))
    assert net.moving_mean.grad_fn is None  # restored without its graph
    assert audit_step(lambda: net(x, True).pow(2).sum(), opt).ok


@pytest.mark.parametrize("reentrant", [True, False])
def test_parameters_inside_a_checkpoint_are_reached_as_backward_reaches_them(
        reentrant: bool) -> None:
    """A reentrant checkpoint runs its function with gradients off and again in backward: its
    parameters hang off the checkpoint's node, not off any edge, yet backward() trains them."""
    from torch.utils.checkpoint import checkpoint

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b, self.c = nn.Linear(6, 8), nn.Linear(8, 8), nn.Linear(8, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = checkpoint(lambda t: torch.relu(self.b(t)), self.a(x), use_reentrant=reentrant)
            return self.c(h)

    net = Net()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    x, y = torch.randn(4, 6), torch.randint(0, 2, (4,))

    def step() -> torch.Tensor:
        return F.cross_entropy(net(x), y)

    audit = audit_step(step, opt)
    assert audit.ok, audit
    step().backward()  # the oracle: every parameter gets a gradient
    assert all(p.grad is not None for p in net.parameters())


def test_a_step_on_the_meta_device_is_refused_in_one_line() -> None:
    net = nn.Linear(3, 2, device="meta")
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    x = torch.randn(4, 3, device="meta")
    with pytest.raises(ValueError, match=r"^audit_step: the optimizers' tensors are on the meta "
                                         r"device, which holds no values"):
        audit_step(lambda: net(x).pow(2).sum(), opt)
    real = nn.Linear(3, 2)
    opt = torch.optim.SGD(real.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="the step's loss is on the meta device"):
        audit_step(lambda: net(x).sum(), opt)


def test_two_threads_auditing_at_once_each_get_their_own_findings() -> None:
    """The recording's hooks are global and CPython's ast module is not safe to use from two
    threads at once: audits in threads run one at a time, each with its own findings."""
    import threading

    def leaky() -> bool:
        q, q_target = _mlp(), _mlp()
        opt = torch.optim.SGD(q.parameters(), lr=0.1)
        s = torch.randn(6, 3)
        audit = audit_step(lambda: (q(s) - q_target(s)).pow(2).mean(), opt)
        return not audit.ok and {f.parameter for f in audit.leaks} == {
            "q_target.0.weight", "q_target.0.bias", "q_target.2.weight", "q_target.2.bias"}

    def clean() -> bool:
        q = _mlp()
        opt = torch.optim.SGD(q.parameters(), lr=0.1)
        s = torch.randn(6, 3)
        return audit_step(lambda: q(s).pow(2).mean(), opt).ok

    results: list[object] = []

    def run(check) -> None:
        try:
            results.extend(check() for _ in range(3))
        except BaseException as err:  # a thread's error is the test's failure
            results.append(err)

    threads = [threading.Thread(target=run, args=(check,)) for check in (leaky, clean) * 2]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert results == [True] * 12, results
