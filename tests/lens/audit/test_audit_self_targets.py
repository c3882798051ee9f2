"""Targets the model trains through itself (issue 53): a value target bootstrapped from other
rows of the critic's own forward (V-trace's ``v_s``, GAE's returns) and a symmetric cosine
self-distillation loss with no stop-gradient on either side (SimSiam, BYOL without a target
network). The oracle is a real ``backward()``: the tensors the audit names are those whose
gradient changes when the target is cut, and the cut the audit prints, made by hand, gives the
gradients of the step written with its stop-gradient. Look-alikes that are no target (a
centring, a total-variation penalty, a target network, a contrastive loss) stay clean.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from toolkit import audit_step

_BOOTSTRAP = "a target bootstrapped from other rows of the same forward"
_COSINE = "a cosine similarity of two views, neither side cut"


def _grads(loss: Callable[[], torch.Tensor], params: dict[str, torch.Tensor]
           ) -> dict[str, torch.Tensor]:
    got = torch.autograd.grad(loss(), list(params.values()), allow_unused=True)
    return {k: torch.zeros_like(p) if g is None else g
            for (k, p), g in zip(params.items(), got)}


def _changed(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> set[str]:
    return {k for k in a if not torch.allclose(a[k], b[k], rtol=1e-5, atol=1e-7)}


def _gae(seed: int, cut: bool, T: int = 5):
    """A2C with GAE and a separate critic (one optimizer): the returns ``A + V`` are the value
    loss's target; ``cut`` computes them from the detached values."""
    torch.manual_seed(seed)
    actor, critic = nn.Linear(4, 3), nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 1))
    opt = torch.optim.Adam([*actor.parameters(), *critic.parameters()], lr=1e-3)
    obs, actions = torch.randn(T + 1, 4), torch.randint(0, 3, (T,))
    rewards, gamma, lam = torch.randn(T), 0.99, 0.95

    def step() -> torch.Tensor:
        values = critic(obs).squeeze(-1)
        v = values.detach() if cut else values
        advantages, last = [], torch.zeros(())
        for t in reversed(range(T)):
            delta = rewards[t] + gamma * v[t + 1] - v[t]
            last = delta + gamma * lam * last
            advantages.insert(0, last)
        adv = torch.stack(advantages)
        returns = adv + v[:-1]
        logp = F.log_softmax(actor(obs[:-1]), -1).gather(1, actions[:, None]).squeeze(1)
        policy_loss = -(logp * adv.detach()).mean()
        return policy_loss + 0.5 * (returns - values[:-1]).pow(2).mean()

    return step, opt, {"actor": actor, "critic": critic}


def _vtrace(seed: int, cut: bool, T: int = 4, B: int = 2):
    """IMPALA's learner over ``T + 1`` steps of one forward; ``cut``: V-trace under
    ``no_grad`` (Espeholt et al. 2018; torchbeast's ``from_importance_weights``)."""
    torch.manual_seed(seed)
    net = nn.Linear(4, 4)  # three logits and a value
    opt = torch.optim.RMSprop(net.parameters(), lr=1e-3)
    obs, actions = torch.randn(T + 1, B, 4), torch.randint(0, 3, (T, B))
    behaviour, rewards = torch.randn(T, B, 3), torch.randn(T, B)

    def vtrace(log_rhos: torch.Tensor, values: torch.Tensor, boot: torch.Tensor
               ) -> torch.Tensor:
        rhos = torch.exp(log_rhos).clamp(max=1.0)
        nxt = torch.cat([values[1:], boot[None]], 0)
        deltas = rhos * (rewards + 0.9 * nxt - values)
        acc, out = torch.zeros_like(boot), []
        for t in range(T - 1, -1, -1):
            acc = deltas[t] + 0.9 * rhos[t] * acc
            out.insert(0, acc)
        return torch.stack(out) + values

    def step() -> torch.Tensor:
        out = net(obs)
        logits, baseline = out[:-1, :, :3], out[..., 3]
        lp = F.log_softmax(logits, -1).gather(2, actions[..., None]).squeeze(2)
        bl = F.log_softmax(behaviour, -1).gather(2, actions[..., None]).squeeze(2)
        if cut:
            with torch.no_grad():
                vs = vtrace(lp - bl, baseline[:-1], baseline[-1])
        else:
            vs = vtrace(lp - bl, baseline[:-1], baseline[-1])
        return 0.5 * ((vs - baseline[:-1]) ** 2).sum()

    return step, opt, {"net": net}


def _simsiam(seed: int, cut: bool, normalize: bool = False):
    """SimSiam's symmetric loss ``D(p1, z2) / 2 + D(p2, z1) / 2``; ``cut``: ``z.detach()``.
    ``normalize``: ``D`` written as a product of two ``F.normalize``."""
    torch.manual_seed(seed)
    enc = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 6))
    pred = nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 6))
    opt = torch.optim.SGD([*enc.parameters(), *pred.parameters()], lr=0.05)
    x1, x2 = torch.randn(3, 4), torch.randn(3, 4)

    def d(p: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        if normalize:
            return -(F.normalize(p, dim=1) * F.normalize(z, dim=1)).sum(1).mean()
        return -F.cosine_similarity(p, z, dim=1).mean()

    def step() -> torch.Tensor:
        z1, z2 = enc(x1), enc(x2)
        p1, p2 = pred(z1), pred(z2)
        if cut:
            z1, z2 = z1.detach(), z2.detach()
        return d(p1, z2) / 2 + d(p2, z1) / 2

    return step, opt, {"enc": enc, "pred": pred}


def _params(modules: dict[str, nn.Module]) -> dict[str, torch.Tensor]:
    return {f"{k}.{n}": p for k, m in modules.items() for n, p in m.named_parameters()}


@pytest.mark.parametrize(("build", "form", "through"), [
    (_gae, _BOOTSTRAP, "critic."), (_vtrace, _BOOTSTRAP, "net."),
    (_simsiam, _COSINE, "enc."), (lambda s, c: _simsiam(s, c, normalize=True), _COSINE, "enc.")])
def test_a_target_trained_through_itself_is_found_and_the_tensors_are_the_oracles(
        build: Callable, form: str, through: str, seed: int) -> None:
    step, opt, modules = build(seed, False)
    audit = audit_step(step, opt, modules=modules)
    assert not audit.ok and len(audit.targets) == 1, str(audit)
    found = audit.targets[0]
    assert found.form.startswith(form)
    # an edit is printed only when the edited step ran and trained what the target reaches
    # (cutting normalised views where they are made leaves the encoder no gradient at all)
    assert found.lines and (found.edits or "not verified" in found.fix), str(audit)
    # the oracle: the tensors whose gradient changes when the target is cut
    params = _params(modules)
    fixed_step, _, _ = build(seed, True)
    changed = _changed(_grads(step, params), _grads(fixed_step, _params(build(seed, True)[2])))
    assert set(found.parameters) <= changed
    assert all(p.startswith(through) for p in found.parameters)
    assert {p for p in changed if p.startswith(through)} == set(found.parameters)
    assert "allow_trained_target=True" in found.fix


@pytest.mark.parametrize("build", [_gae, _vtrace, _simsiam])
def test_the_step_written_with_its_cut_is_clean_and_allowing_the_target_accepts_it(
        build: Callable, seed: int) -> None:
    step, opt, modules = build(seed, True)
    assert audit_step(step, opt, modules=modules).ok
    step, opt, modules = build(seed, False)
    assert audit_step(step, opt, modules=modules, allow_trained_target=True).ok


@pytest.mark.parametrize("normalize", [False, True])
def test_both_terms_of_a_symmetric_loss_are_cut_where_the_similarity_reads_its_target(
        seed: int, normalize: bool) -> None:
    """SimSiam's published cut (Chen & He 2021, Algorithm 1: ``z.detach()`` inside ``D``): the
    one line both terms run. Not ``pred(z.detach())``, which leaves the encoder trained only
    through its targets, nor ``enc(x).detach()``, which leaves it untrained: each of those
    cuts a path by which the loss trains the encoder as it should."""
    step, opt, modules = _simsiam(seed, False, normalize)
    audit = audit_step(step, opt, modules=modules)
    (found,) = audit.targets
    assert found.terms == 2
    (edit,) = found.edits
    assert (edit.old, edit.new) == ("z", "z.detach()")
    assert [line.function for line in found.lines] == ["d"]
    assert "F.normalize(z, dim=1)" in found.lines[0].text if normalize else \
        "cosine_similarity(p, z" in found.lines[0].text
    assert "collapsing" in found.fix


def test_a_bootstrapped_target_fix_is_the_value_target_line(seed: int) -> None:
    step, opt, modules = _vtrace(seed, False)
    (found,) = audit_step(step, opt, modules=modules).targets
    # the line that makes v_s (inside the user's helper, which only this loss runs)
    assert [line.text for line in found.lines] == ["return torch.stack(out) + values"]
    assert "no_grad" in found.fix


def _look_alike(kind: str, seed: int):
    torch.manual_seed(seed)
    net = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 5))
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    x = torch.randn(7, 4)
    if kind == "byol_target_network":
        target = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 5))
        head = nn.Linear(5, 5)
        opt = torch.optim.SGD([*net.parameters(), *head.parameters()], lr=0.1)
        for p in target.parameters():
            p.requires_grad_(False)
        x2 = torch.randn(7, 4)
        return (lambda: 2 - 2 * F.cosine_similarity(head(net(x)), target(x2), dim=-1).mean()
                ), opt
    steps = {
        "centring_one_forward": lambda: (lambda y: ((y - y.mean(0)) ** 2).mean())(net(x)),
        "total_variation": lambda: (lambda y: (y[1:] - y[:-1]).abs().mean())(net(x)),
        "nt_xent": lambda: (lambda z: F.cross_entropy(
            z[:3] @ z[3:6].t() / 0.1, torch.arange(3)))(F.normalize(net(x), dim=1)),
    }
    return steps[kind], opt


@pytest.mark.parametrize("kind", ["centring_one_forward", "total_variation",
                                  "nt_xent", "byol_target_network"])
def test_look_alikes_that_train_no_target_stay_clean(kind: str, seed: int) -> None:
    step, opt = _look_alike(kind, seed)
    audit = audit_step(step, opt)
    assert not audit.targets, str(audit)
