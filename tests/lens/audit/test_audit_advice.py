"""What the audit tells the user to do (issue 42): every fix proved on the step, at the line
where the user writes it, and followed here: the test applies the fix the report names, then
checks with a real ``backward()`` that the finding is gone and that nothing else changed (the
gradients of every stepped tensor are the same).
"""

from __future__ import annotations

import copy
import inspect

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from toolkit import audit_step


def _grads(losses: dict[str, torch.Tensor], tensors: dict[str, torch.Tensor]
           ) -> dict[str, dict[str, torch.Tensor | None]]:
    """``loss -> tensor name -> .grad`` after backpropagating each loss alone."""
    out = {}
    for name, loss in losses.items():
        for t in tensors.values():
            t.grad = None
        loss.backward(retain_graph=True)
        out[name] = {k: None if t.grad is None else t.grad.clone() for k, t in tensors.items()}
    for t in tensors.values():
        t.grad = None
    return out


def _line_of(fn, text: str) -> int:
    """The line number of ``fn``'s source line that contains ``text``."""
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def test_a_dqn_leak_names_the_target_networks_call_and_following_it_changes_nothing_else(
        seed: int) -> None:
    torch.manual_seed(seed)
    q = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 2))
    q_target = copy.deepcopy(q)
    opt = torch.optim.SGD(q.parameters(), lr=0.1)
    s, s2, r = torch.randn(5, 3), torch.randn(5, 3), torch.randn(5)

    def step(fixed: bool = False) -> torch.Tensor:
        q_sa = q(s).max(1).values
        q_next = q_target(s2).max(1).values
        q_next = q_next.detach() if fixed else q_next
        return F.mse_loss(q_sa, r + 0.9 * q_next)

    audit = audit_step(step, opt)
    (line,) = {x for leak in audit.leaks for x in leak.lines}
    assert line.number == _line_of(step, "q_next = q_target(s2)") and not line.inside
    assert f"at:   {line}" in str(audit)
    assert audit_step(lambda: step(True), opt).ok
    params = {**{f"q.{k}": p for k, p in q.named_parameters()},
              **{f"q_target.{k}": p for k, p in q_target.named_parameters()}}
    before, after = _grads({"loss": step()}, params), _grads({"loss": step(True)}, params)
    for name in params:
        if name.startswith("q."):
            torch.testing.assert_close(after["loss"][name], before["loss"][name])
        else:
            assert before["loss"][name] is not None and after["loss"][name] is None


class _Discriminator(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))

    def forward(self, img: torch.Tensor) -> torch.Tensor:
        flat = img.view(img.size(0), -1)  # the first line of D's forward: never the fix
        return self.body(flat)


def test_the_gan_d_step_without_detach_gets_the_call_site_not_a_line_in_the_forward(
        seed: int) -> None:
    # Lightning's GAN template with the D step reusing the generator's output: the fix is
    # .detach() where training_step hands the fake batch to D, never inside D's forward,
    # which the G step runs too
    torch.manual_seed(seed)
    generator = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 4))
    discriminator = _Discriminator()
    opt_g = torch.optim.Adam(generator.parameters())
    opt_d = torch.optim.Adam(discriminator.parameters())
    real, z = torch.randn(6, 2, 2), torch.randn(6, 2)

    def training_step(detach: bool = False) -> dict[str, torch.Tensor]:
        fake = generator(z).view(6, 2, 2)
        g_loss = F.softplus(-discriminator(fake)).mean()
        d_fake = discriminator(fake.detach() if detach else fake)
        d_loss = F.softplus(-discriminator(real)).mean() + F.softplus(d_fake).mean()
        return {"g": g_loss, "d": d_loss}

    audit = audit_step(training_step, {"g": opt_g, "d": opt_d})
    assert {x.loss for x in audit.leaks} == {"d"}
    (line,) = {x for leak in audit.leaks for x in leak.lines}
    assert line.number == _line_of(training_step, "d_fake = discriminator(") and not line.inside
    assert "where it is handed to discriminator" in audit.leaks[0].fix
    assert "view(img.size(0)" not in str(audit).split("path:")[-1]
    assert audit_step(lambda: training_step(True), {"g": opt_g, "d": opt_d}).ok
    params = {**{f"G.{k}": p for k, p in generator.named_parameters()},
              **{f"D.{k}": p for k, p in discriminator.named_parameters()}}
    before = _grads(training_step(), params)
    after = _grads(training_step(True), params)
    for loss, prefix in (("g", "G."), ("d", "D.")):
        for name in params:  # the stepped tensors' gradients are unchanged
            if name.startswith(prefix):
                torch.testing.assert_close(after[loss][name], before[loss][name])
    assert all(after["d"][n] is None and before["d"][n] is not None for n in params
               if n.startswith("G."))


class _QNetwork(nn.Module):
    """philtabor's style: the network holds its loss module and its optimizer."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.loss = nn.MSELoss()
        self.optimizer = torch.optim.RMSprop(self.parameters(), lr=1e-3)

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        return self.fc(state)


@pytest.mark.parametrize("order", ["target_first", "prediction_first"])
def test_a_loss_module_held_by_the_network_is_a_plain_function_and_the_leak_is_cut(
        order: str, seed: int) -> None:
    torch.manual_seed(seed)
    q_eval, q_next = _QNetwork(), _QNetwork()
    s, s2, r = torch.randn(5, 4), torch.randn(5, 4), torch.randn(5)
    idx, a = torch.arange(5), torch.randint(0, 3, (5,))

    def learn() -> torch.Tensor:
        q_pred = q_eval.forward(s)[idx, a]
        q_nx = q_next.forward(s2).max(1)[0]
        q_target = r + 0.99 * q_nx
        if order == "target_first":  # MSELoss()(target, prediction): symmetric, either order
            return q_eval.loss(q_target, q_pred)
        return q_eval.loss(q_pred, q_target)

    audit = audit_step(learn, q_eval.optimizer)
    assert sorted(x.parameter for x in audit.leaks) == ["q_next.fc.bias", "q_next.fc.weight"]
    assert all(x.cut_at is not None and "pair it" not in x.fix for x in audit.leaks)
    (line,) = {x for leak in audit.leaks for x in leak.lines}
    assert line.number == _line_of(learn, "q_nx = q_next.forward(s2)")
    assert "q_eval.loss" not in " ".join(audit.leaks[0].path)  # no module boundary


def _policy(seed: int) -> tuple[nn.Module, nn.Module, torch.optim.Optimizer, torch.Tensor]:
    torch.manual_seed(seed)
    actor, critic = nn.Linear(4, 3), nn.Linear(4, 1)
    opt = torch.optim.Adam([*actor.parameters(), *critic.parameters()])
    return actor, critic, opt, torch.randn(6, 4)


@pytest.mark.parametrize("form", ["p_log_p", "log_softmax_and_softmax", "categorical_probs",
                                  "categorical_logits"])
def test_an_entropy_bonus_is_no_target(form: str, seed: int) -> None:
    # -(p * log p).sum(), -(log_prob * prob).sum(1) (the A3C reference) and
    # Categorical(probs=p).entropy(): p and log p of one distribution, not a prediction and a
    # target; cutting either would stop exploration
    actor, critic, opt, s = _policy(seed)
    a = torch.randint(0, 3, (6,))
    ret = torch.randn(6)

    def step() -> torch.Tensor:
        logits, value = actor(s), critic(s).squeeze(1)
        if form == "p_log_p":
            p = F.softmax(logits, 1)
            entropy = -(p * torch.log(p)).sum(1)
            log_pa = torch.log(p.gather(1, a[:, None]).squeeze(1))
        elif form == "log_softmax_and_softmax":
            log_prob, prob = F.log_softmax(logits, 1), F.softmax(logits, 1)
            entropy = -(log_prob * prob).sum(1)
            log_pa = log_prob.gather(1, a[:, None]).squeeze(1)
        else:
            dist = (torch.distributions.Categorical(probs=F.softmax(logits, 1))
                    if form == "categorical_probs"
                    else torch.distributions.Categorical(logits=logits))
            entropy, log_pa = dist.entropy(), dist.log_prob(a)
        advantage = ret - value
        return (-(log_pa * advantage.detach()) - 0.01 * entropy + advantage.pow(2)).mean()

    audit = audit_step(step, opt)
    assert audit.ok, str(audit)
    # and the entropy's gradient is not zero: what a cut would have removed
    entropy_grad = torch.autograd.grad(
        -(F.log_softmax(actor(s), 1) * F.softmax(actor(s), 1)).sum(), actor.weight)[0]
    assert entropy_grad.abs().sum() > 0


def test_soft_pseudo_labels_and_teacher_probabilities_are_still_found(seed: int) -> None:
    torch.manual_seed(seed)
    model = nn.Linear(4, 3)
    teacher = nn.Linear(4, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    weak, strong = torch.randn(6, 4), torch.randn(6, 4)

    def pseudo_label_step() -> torch.Tensor:  # a soft label from another input, with graph
        soft = F.softmax(model(weak), 1)
        return -(soft * F.log_softmax(model(strong), 1)).sum(1).mean()

    (target,) = audit_step(pseudo_label_step, opt).targets
    assert target.form == "a log-probability times a weight that carries gradient"
    assert target.lines and target.lines[0].number == _line_of(pseudo_label_step, "soft =")

    def distill_step() -> torch.Tensor:  # the teacher outside no_grad, through nn.KLDivLoss
        student = F.log_softmax(model(weak) / 2.0, 1)
        probs = F.softmax(teacher(weak) / 2.0, 1)
        return nn.KLDivLoss(reduction="batchmean")(student, probs)

    audit = audit_step(distill_step, opt)
    assert sorted(x.parameter for x in audit.leaks) == ["teacher.bias", "teacher.weight"]
    # one cut that removes both of KLDivLoss's paths into the teacher (xlogy and target·input)
    (line,) = {x for leak in audit.leaks for x in leak.lines}
    assert line.number in {_line_of(distill_step, "probs ="), _line_of(distill_step, "probs =")}


def test_a_loss_that_is_not_a_scalar_is_an_error_naming_it_and_its_shape() -> None:
    w = nn.Parameter(torch.ones(3))
    with pytest.raises(ValueError, match=r"loss 'per_sample' has shape \(4, 3\).*scalar"):
        audit_step(lambda: {"per_sample": w * torch.ones(4, 3)},
                   {"per_sample": torch.optim.SGD([w], lr=0.1)})


def test_a_tensor_in_two_optimizers_is_a_finding() -> None:
    body, head = nn.Linear(3, 4), nn.Linear(4, 1)
    model = nn.Sequential(body, head)
    opt_all = torch.optim.Adam(model.parameters())
    opt_head = torch.optim.SGD(head.parameters(), lr=0.1)
    x = torch.randn(5, 3)
    audit = audit_step(lambda: {"a": model(x).mean(), "b": model(x).pow(2).mean()},
                       {"a": opt_all, "b": opt_head})
    assert not audit.ok
    # one finding for the pair, the head named by the first module the step refers to
    (shared,) = audit.shared
    assert sorted(shared.parameters) == ["model.1.bias", "model.1.weight"]
    assert shared.optimizers == ("a", "b")
    assert "SHARED  2 tensors stepped by both optimizer 'a' and optimizer 'b'" in str(audit)
    assert "2 times per iteration" in str(audit)
    # both construction lines, in the fix and as at: lines
    numbers = sorted(line.number for line in shared.lines)
    first = inspect.getsourcelines(test_a_tensor_in_two_optimizers_is_a_finding)[1]
    source = inspect.getsource(test_a_tensor_in_two_optimizers_is_a_finding).splitlines()
    assert numbers == [first + i for i, text in enumerate(source)
                       if text.strip().startswith("opt_")]
    assert all(f"{line.file}:{line.number}" in shared.fix for line in shared.lines)
    # the edit, followed: the head left out of the model-wide optimizer, which held more; the
    # finding is gone and the other findings (loss 'b' reaching the body) are as they were
    (edit,) = shared.edits
    assert edit.old == "model.parameters()" and f"edit: {edit}" in str(audit)
    kept = eval(edit.new, {"model": model})
    assert [id(p) for p in kept] == [id(p) for p in body.parameters()]
    fixed = {"a": torch.optim.Adam(kept), "b": opt_head}
    again = audit_step(lambda: {"a": model(x).mean(), "b": model(x).pow(2).mean()}, fixed)
    assert not again.shared
    assert [(x.loss, x.parameter) for x in again.leaks] == [
        (x.loss, x.parameter) for x in audit.leaks]


def test_a_shared_group_is_dropped_from_the_optimizer_built_from_groups() -> None:
    # the same pair, the model-wide optimizer built from param groups (a learning rate for
    # the head): the edit drops the head's group, and following it ends the finding
    body, head = nn.Linear(3, 4), nn.Linear(4, 1)
    model = nn.Sequential(body, head)
    opt_all = torch.optim.Adam([{"params": body.parameters()},
                                {"params": head.parameters(), "lr": 1e-3}])
    opt_head = torch.optim.SGD(head.parameters(), lr=0.1)
    x = torch.randn(5, 3)

    def step() -> dict[str, torch.Tensor]:
        return {"a": model(x).mean(), "b": model(x).pow(2).mean()}

    audit = audit_step(step, {"a": opt_all, "b": opt_head})
    (shared,) = audit.shared
    (edit,) = shared.edits
    assert "".join(edit.new.split()) == '[{"params":body.parameters()}]'
    assert edit.new.count("\n") == edit.old.count("\n") and f"edit: {edit}" in str(audit)
    fixed = {"a": torch.optim.Adam(eval(edit.new, {"body": body, "head": head})),
             "b": opt_head}
    again = audit_step(step, fixed)
    assert not again.shared
    assert [(x.loss, x.parameter) for x in again.leaks] == [
        (x.loss, x.parameter) for x in audit.leaks]


def test_a_trunk_both_losses_train_gets_no_edit_that_would_leak() -> None:
    # an actor-critic with a shared trunk in both optimizers (param groups): leaving it out of
    # either would leave that loss's gradient to the trunk unstepped (a leak), so no edit is
    # written; the fix said, one optimizer over both losses, audits clean
    trunk, actor, critic = nn.Linear(4, 8), nn.Linear(8, 2), nn.Linear(8, 1)
    opt_a = torch.optim.Adam([{"params": trunk.parameters()}, {"params": actor.parameters()}])
    opt_c = torch.optim.Adam([{"params": trunk.parameters()}, {"params": critic.parameters()}])
    s, a, ret = torch.randn(6, 4), torch.randint(0, 2, (6,)), torch.randn(6)

    def step() -> dict[str, torch.Tensor]:
        h = torch.relu(trunk(s))
        logp = F.log_softmax(actor(h), -1).gather(1, a[:, None]).squeeze(1)
        v = critic(h).squeeze(1)
        return {"actor": -(logp * (ret - v).detach()).mean(), "critic": F.mse_loss(v, ret)}

    audit = audit_step(step, {"actor": opt_a, "critic": opt_c})
    (shared,) = audit.shared
    assert not shared.edits and len(shared.lines) == 2
    assert shared.fix.startswith("the losses of 'actor' and of 'critic' both train them")
    one = torch.optim.Adam([*trunk.parameters(), *actor.parameters(), *critic.parameters()])
    assert audit_step(lambda: sum(step().values()), one).ok


def test_losses_paired_with_param_groups_of_one_optimizer_share_nothing() -> None:
    # an actor-critic with one optimizer, each loss paired with its param group as the README
    # documents: the shared trunk is in both pairings, and stepped once
    trunk, pi, v = nn.Linear(3, 4), nn.Linear(4, 2), nn.Linear(4, 1)
    x = torch.randn(5, 3)
    groups = {"actor": {"params": [*trunk.parameters(), *pi.parameters()]},
              "critic": {"params": [*trunk.parameters(), *v.parameters()]}}
    audit = audit_step(lambda: {"actor": pi(torch.tanh(trunk(x))).logsumexp(1).mean(),
                                "critic": v(torch.tanh(trunk(x))).pow(2).mean()}, groups)
    assert audit.ok and not audit.shared, str(audit)


def test_the_headline_names_only_the_losses_that_have_a_finding() -> None:
    q, q_target, critic = nn.Linear(3, 2), nn.Linear(3, 2), nn.Linear(3, 1)
    x = torch.randn(4, 3)
    audit = audit_step(lambda: {"q": (q(x) - q_target(x)).pow(2).mean(),
                                "v": critic(x).pow(2).mean()},
                       {"q": torch.optim.SGD(q.parameters(), lr=0.1),
                        "v": torch.optim.SGD(critic.parameters(), lr=0.1)})
    assert str(audit).splitlines()[0].startswith("audit_step: 2 leaking tensors (losses 'q';")


def test_a_generator_term_reading_a_detached_fake_says_remove_the_detach(seed: int) -> None:
    # SRGAN's first attempt at #148: the G loss reads D(G(z).detach()): the adversarial term
    # gives G no gradient; cutting D out of the term would be the wrong advice
    torch.manual_seed(seed)
    generator, discriminator = nn.Linear(2, 4), nn.Linear(4, 1)
    opt_g = torch.optim.Adam(generator.parameters())
    z = torch.randn(5, 2)

    def g_step() -> torch.Tensor:
        fake = generator(z)
        adversarial = discriminator(fake.detach()).mean()
        return fake.pow(2).mean() - 1e-3 * adversarial

    audit = audit_step(g_step, opt_g)
    assert all("remove the .detach()" in x.fix and x.cut_at is None for x in audit.leaks)
    (line,) = {x for leak in audit.leaks for x in leak.lines}
    assert line.number == _line_of(g_step, "adversarial = discriminator(fake.detach())")


def test_an_actor_loss_through_a_no_grad_rollout_is_told_the_cause_not_to_re_pair(
        seed: int) -> None:
    # Dreamer's actor loss with the imagined rollout under torch.no_grad(): the loss reaches
    # the reward and value models, not the actor; pairing it with their optimizer would train
    # them on the actor's objective
    torch.manual_seed(seed)
    actor, reward_model, value_model = nn.Linear(3, 2), nn.Linear(2, 1), nn.Linear(2, 1)
    opt_actor = torch.optim.Adam(actor.parameters())
    state = torch.randn(4, 3)

    def actor_step() -> torch.Tensor:
        with torch.no_grad():
            imagined = torch.tanh(actor(state))
        return -(reward_model(imagined) + value_model(imagined)).mean()

    audit = audit_step(actor_step, opt_actor)
    assert {d.kind for d in audit.dead} == {"no_grad"}
    (line,) = {x for d in audit.dead for x in d.lines}
    assert line.number == _line_of(actor_step, "with torch.no_grad():")
    assert audit.leaks and all("pair it" not in x.fix and "reaches none of the tensors" in x.fix
                               and x.lines == (line,) for x in audit.leaks)


def test_a_reentrant_checkpoint_with_no_input_requiring_grad_is_named(seed: int) -> None:
    # a LoRA adapter under gradient checkpointing with use_reentrant=True and frozen
    # embeddings: the loss has no graph; the fix is the checkpoint's mode, or an input that
    # requires grad (Hugging Face: enable_input_require_grads()), at the checkpoint's line
    torch.manual_seed(seed)
    embed, base, lora = nn.Embedding(10, 4), nn.Linear(4, 4), nn.Linear(4, 4, bias=False)
    embed.requires_grad_(False)
    base.requires_grad_(False)
    opt = torch.optim.AdamW(lora.parameters())
    ids = torch.randint(0, 10, (3, 5))

    def step() -> torch.Tensor:
        h = embed(ids)
        h = torch.utils.checkpoint.checkpoint(lambda x: base(x) + lora(x), h,
                                              use_reentrant=True)
        return h.pow(2).mean()

    with pytest.warns(UserWarning, match="None of the inputs have requires_grad"):
        audit = audit_step(step, opt)
    assert {d.kind for d in audit.dead} == {"checkpoint"}
    assert all("enable_input_require_grads" in d.fix for d in audit.dead)
    (line,) = {x for d in audit.dead for x in d.lines}
    assert line.number == _line_of(step, "h = torch.utils.checkpoint.checkpoint(")
    # the edit, followed: use_reentrant=False; the adapter then trains (a real backward) and
    # the audit is clean
    (edit,) = {e for d in audit.dead for e in d.edits}
    assert (edit.old, edit.new) == ("True", "False") and f"edit: {edit}" in str(audit)

    def fixed() -> torch.Tensor:
        h = torch.utils.checkpoint.checkpoint(lambda x: base(x) + lora(x), embed(ids),
                                              use_reentrant=False)
        return h.pow(2).mean()

    fixed().backward()
    assert lora.weight.grad is not None and lora.weight.grad.abs().sum() > 0
    lora.weight.grad = None
    assert audit_step(fixed, opt).ok


def test_three_dead_codebooks_cut_on_three_lines_name_all_three(seed: int) -> None:
    torch.manual_seed(seed)
    books = [nn.Linear(4, 4) for _ in range(3)]
    opt = torch.optim.SGD([p for b in books for p in b.parameters()], lr=0.1)
    x = torch.randn(5, 4)

    def step() -> torch.Tensor:
        a = books[0](x).detach()
        b = books[1](x).detach()
        c = books[2](x).detach()
        return (a + b + c).pow(2).mean() + 0.0 * x.sum()

    audit = audit_step(step, opt)
    lines = {x.number for d in audit.dead for x in d.lines}
    assert lines == {_line_of(step, "a = books[0]"), _line_of(step, "b = books[1]"),
                     _line_of(step, "c = books[2]")}
    assert str(audit).count("at:   ") == 3


def test_to_dict_names_lines_without_the_machines_paths() -> None:
    q, q_target = nn.Linear(3, 2), nn.Linear(3, 2)
    x = torch.randn(4, 3)
    audit = audit_step(lambda: (q(x) - q_target(x)).pow(2).mean(),
                       torch.optim.SGD(q.parameters(), lr=0.1))
    (line,) = audit.to_dict()["leaks"][0]["lines"]
    assert set(line) == {"file", "number", "function", "text", "inside"}
    assert line["file"] == "test_audit_advice.py" and "/" not in str(line)
