"""A corpus of training-step bugs from public reports, each with its fixed twin.

Each builder returns a :class:`Case`: a ``step()`` that computes the losses of one training step
(no backward, no optimizer step), the optimizers that would step them, and what the audit must
say about the buggy version. The reproductions are minimal and our own, written from the
reports cited in each docstring; the fixed twin is the fix those threads converge on. Shared by
the ``audit_corpus`` experiment and the tests of :func:`toolkit.audit_step`
(``tests/lens/audit/``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from toolkit import as_constant, stop_gradient


@dataclass
class Case:
    """One reproduction: the step, its optimizers, and what the audit must flag when buggy.

    ``category``: ``"leak"``, ``"dead"``, ``"carried"`` or ``"legit"`` (no bug);
    ``modules``: the step's networks, by role; ``flagged``: the role of the module whose
    tensors the buggy version must name, and ``prefix`` the name the audit gives it; ``reset()``: start the step's own state over; ``retain``: a backward of
    the buggy version must retain its graph (the next step backpropagates through it again).
    """

    name: str
    bug: str
    category: str
    fixed: bool
    step: Callable[[], Any]
    optimizers: Any
    modules: dict[str, nn.Module]
    flagged: str = ""
    prefix: str = ""
    reports: tuple[str, ...] = ()
    reset: Callable[[], None] = field(default=lambda: None)
    retain: bool = False


def mlp(n_in: int, width: int, n_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(n_in, width), nn.Tanh(), nn.Linear(width, n_out))


def dqn_target(fixed: bool, width: int = 16, batch: int = 8) -> Case:
    """DQN's TD target computed with gradients: the target network receives gradient.

    ``L = smooth_l1(Q(s, a), r + γ (1 − done) max_a' Q_target(s', a'))`` treats the target as a
    label (Mnih et al. 2015); without ``no_grad``/``detach`` backward also runs through the
    target network and fills its ``.grad`` (a tenth more GPU memory in one report), and if the
    target network is in the optimizer it trains.

    Reports: https://github.com/philtabor/Deep-Q-Learning-Paper-To-Code/issues/9 ,
    https://github.com/philtabor/Deep-Q-Learning-Paper-To-Code/issues/16 ,
    https://github.com/boyu-ai/Hands-on-RL/issues/112 ,
    https://github.com/datawhalechina/easy-rl/pull/117
    """
    q = mlp(4, width, 2)
    q_target = copy.deepcopy(q)
    opt = torch.optim.Adam(q.parameters(), lr=1e-3)
    s, s2 = torch.randn(batch, 4), torch.randn(batch, 4)
    a, r = torch.randint(0, 2, (batch,)), torch.randn(batch)
    done = (torch.rand(batch) < 0.2).float()

    def step() -> torch.Tensor:
        q_sa = q(s).gather(1, a[:, None]).squeeze(1)
        if fixed:
            next_v = as_constant(lambda: q_target(s2).max(1).values, name="corpus.dqn.target")
        else:
            next_v = q_target(s2).max(1).values
        return F.smooth_l1_loss(q_sa, r + 0.99 * (1 - done) * next_v)

    return Case("dqn_target", "DQN target computed with gradients", "leak", fixed, step, opt,
                {"online": q, "target": q_target}, "target", "q_target",
                reports=("https://github.com/philtabor/Deep-Q-Learning-Paper-To-Code/issues/9",
                         "https://github.com/boyu-ai/Hands-on-RL/issues/112"))


def gan_fake(fixed: bool, width: int = 16, batch: int = 8) -> Case:
    """GAN discriminator step on a fake batch that is not detached: backward runs into G.

    ``L_D = −log D(x) − log(1 − D(G(z)))`` (Goodfellow et al. 2014) treats ``G(z)`` as data.
    Without ``fake.detach()`` the discriminator's backward also computes (and accumulates) the
    generator's gradients: "done for speed, not correctness" when G's grads are zeroed later.

    Reports: https://github.com/pytorch/examples/issues/116 ,
    https://github.com/heykeetae/Self-Attention-GAN/issues/48 ,
    https://github.com/yunjey/pytorch-tutorial/issues/56
    """
    generator = nn.Sequential(nn.Linear(8, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                              nn.Linear(width, 2))
    discriminator = nn.Sequential(nn.Linear(2, width), nn.LeakyReLU(0.2), nn.Linear(width, 1))
    opt_d = torch.optim.Adam(discriminator.parameters(), lr=2e-4)
    real, z = torch.randn(batch, 2), torch.randn(batch, 8)
    ones, zeros = torch.ones(batch, 1), torch.zeros(batch, 1)

    def step() -> torch.Tensor:
        fake = generator(z)
        if fixed:
            fake = fake.detach()
        return (F.binary_cross_entropy_with_logits(discriminator(real), ones)
                + F.binary_cross_entropy_with_logits(discriminator(fake), zeros))

    return Case("gan_fake", "GAN fake batch not detached in the D step", "leak", fixed, step,
                opt_d, {"discriminator": discriminator, "generator": generator}, "generator",
                "generator",
                reports=("https://github.com/pytorch/examples/issues/116",
                         "https://github.com/heykeetae/Self-Attention-GAN/issues/48"))


class MeanTeacher(nn.Module):
    """A student and its exponential-moving-average teacher in one module."""

    def __init__(self, student: nn.Module) -> None:
        super().__init__()
        self.student = student
        self.teacher = copy.deepcopy(student)


def ema_teacher(fixed: bool, width: int = 16, batch: int = 8, momentum: float = 0.99) -> Case:
    """Mean teacher trained by gradient *and* by averaging.

    The teacher's weights are an EMA of the student's, ``θ' ← m θ' + (1 − m) θ`` (Tarvainen &
    Valpola 2017; BYOL, MoCo, DINO alike); no gradient may flow into it. Here the optimizer runs
    over the whole module and the consistency target is not detached, so gradient steps the
    teacher too. The fix: teacher out of the optimizer, ``requires_grad_(False)``, targets under
    ``no_grad``.

    Reports: https://github.com/lhoyer/DAFormer/issues/59 ,
    https://github.com/lightly-ai/lightly/pull/501 ,
    https://github.com/CuriousAI/mean-teacher/issues/29
    """
    model = MeanTeacher(mlp(4, width, 3))
    if fixed:
        model.teacher.requires_grad_(False)
    opt = torch.optim.SGD((model.student if fixed else model).parameters(), lr=0.1)
    x, y, x_u = torch.randn(batch, 4), torch.randint(0, 3, (batch,)), torch.randn(batch, 4)

    def step() -> torch.Tensor:
        with torch.no_grad():  # the average (after the previous optimizer step)
            for t, s in zip(model.teacher.parameters(), model.student.parameters()):
                t.lerp_(s, 1 - momentum)
        noisy = x_u + 0.1 * torch.randn_like(x_u)
        with torch.set_grad_enabled(not fixed):
            target = F.softmax(model.teacher(x_u + 0.1 * torch.randn_like(x_u)), 1)
        consistency = F.mse_loss(F.softmax(model.student(noisy), 1), target)
        return F.cross_entropy(model.student(x), y) + consistency

    return Case("ema_teacher", "EMA teacher also trained by gradient", "leak", fixed, step, opt,
                {"student": model.student, "teacher": model.teacher}, "teacher", "model.teacher",
                reports=("https://github.com/lhoyer/DAFormer/issues/59",
                         "https://github.com/lightly-ai/lightly/pull/501"))


def distill_teacher(fixed: bool, width: int = 16, batch: int = 8, temperature: float = 4.0
                    ) -> Case:
    """Knowledge distillation whose teacher receives gradient (``eval()`` does not freeze it).

    ``L = T² KL(softmax(t/T) ‖ softmax(s/T)) + CE(s, y)`` (Hinton et al. 2015) uses the teacher's
    soft labels as constants. ``teacher.eval()`` only changes dropout and BatchNorm; the fix is
    ``requires_grad_(False)`` and the soft labels under ``no_grad``.

    Reports: https://github.com/haitongli/knowledge-distillation-pytorch/issues/25 ,
    https://github.com/lightly-ai/lightly-train/pull/434
    """
    teacher = mlp(4, 2 * width, 3).eval()
    student = mlp(4, width, 3)
    if fixed:
        teacher.requires_grad_(False)
    opt = torch.optim.Adam(student.parameters(), lr=1e-3)
    x, y = torch.randn(batch, 4), torch.randint(0, 3, (batch,))

    def step() -> torch.Tensor:
        with torch.set_grad_enabled(not fixed):
            soft = F.softmax(teacher(x) / temperature, 1)
        logits = student(x)
        kd = F.kl_div(F.log_softmax(logits / temperature, 1), soft, reduction="batchmean")
        return temperature**2 * kd + F.cross_entropy(logits, y)

    return Case("distill_teacher", "distillation teacher not frozen", "leak", fixed, step, opt,
                {"student": student, "teacher": teacher}, "teacher", "teacher",
                reports=("https://github.com/haitongli/knowledge-distillation-pytorch/issues/25",
                         "https://github.com/lightly-ai/lightly-train/pull/434"))


def _episode(batch: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return torch.randn(batch, 4), torch.randint(0, 2, (batch,)), torch.randn(batch)


def actor_critic(fixed: bool, width: int = 16, batch: int = 8) -> Case:
    """Actor-critic whose actor loss trains the critic through an undetached advantage.

    The policy gradient ``−log π(a|s) · A`` with ``A = G − V(s)`` treats ``A`` as a weight; without
    ``detach`` the actor's loss also pushes ``V`` (to make ``A`` large where ``log π`` is), on
    top of the critic's own regression.

    Reports: https://github.com/astariul/encode-attend-navigate-pytorch/issues/2 (fixed in
    https://github.com/astariul/encode-attend-navigate-pytorch/pull/3),
    https://github.com/nikhilbarhate99/PPO-PyTorch/issues/29
    """
    actor, critic = mlp(4, width, 2), mlp(4, width, 1)
    opts = {"actor": torch.optim.Adam(actor.parameters(), lr=1e-3),
            "critic": torch.optim.Adam(critic.parameters(), lr=1e-3)}
    s, a, returns = _episode(batch)

    def step() -> dict[str, torch.Tensor]:
        advantage = returns - critic(s).squeeze(1)
        log_pi = F.log_softmax(actor(s), 1).gather(1, a[:, None]).squeeze(1)
        weight = advantage.detach() if fixed else advantage
        return {"actor": -(log_pi * weight).mean(), "critic": advantage.pow(2).mean()}

    return Case("actor_critic", "advantage not detached in the actor loss", "leak", fixed, step,
                opts, {"actor": actor, "critic": critic}, "critic", "critic",
                reports=("https://github.com/astariul/encode-attend-navigate-pytorch/issues/2",))


def bptt_carried(fixed: bool, width: int = 16, batch: int = 4, window: int = 5) -> Case:
    """Truncated BPTT whose hidden state carries the previous window's graph.

    The state passed to the next window must be cut (``repackage_hidden``, ``h.detach()``):
    otherwise each backward runs through every earlier window (memory grows every step) or,
    once the earlier graph was freed, fails with "Trying to backward through the graph a second
    time".

    Reports: https://github.com/MorvanZhou/PyTorch-Tutorial/issues/57 ,
    https://github.com/yunjey/pytorch-tutorial/issues/90 ,
    https://discuss.pytorch.org/t/help-clarifying-repackage-hidden-in-word-language-model/226
    """
    rnn, head = nn.GRU(3, width, batch_first=True), nn.Linear(width, 3)
    opt = torch.optim.Adam([*rnn.parameters(), *head.parameters()], lr=1e-3)
    sequence = torch.randn(batch, 8 * window + 1, 3)
    state: dict[str, Any] = {"h": None, "t": 0}

    def step() -> torch.Tensor:
        t = state["t"]
        chunk = sequence[:, t:t + window + 1]
        out, h = rnn(chunk[:, :-1], state["h"])
        state["h"] = stop_gradient(h, name="corpus.bptt.state") if fixed else h
        state["t"] = (t + window) % (sequence.shape[1] - window - 1)
        return F.mse_loss(head(out), chunk[:, 1:])

    def reset() -> None:
        state.update(h=None, t=0)

    return Case("bptt_carried", "hidden state not detached between windows", "carried", fixed,
                step, opt, {"rnn": rnn, "head": head}, "rnn", "rnn",
                reports=("https://github.com/MorvanZhou/PyTorch-Tutorial/issues/57",
                         "https://discuss.pytorch.org/t/help-clarifying-repackage-hidden-in-"
                         "word-language-model/226"), reset=reset, retain=not fixed)


def eager_detach(fixed: bool, width: int = 16, batch: int = 8) -> Case:
    """An over-eager ``detach`` on the features: the encoder the optimizer steps learns nothing.

    Reports: https://github.com/queenie88/A-GCN/issues/4 ,
    https://github.com/yifita/deep_cage/issues/16 ; the ``no_grad`` variant:
    https://github.com/rll-research/cic/issues/5
    """
    encoder = nn.Sequential(nn.Linear(4, width), nn.ReLU(), nn.Linear(width, width))
    head = nn.Linear(width, 3)
    opt = torch.optim.Adam([*encoder.parameters(), *head.parameters()], lr=1e-3)
    x, y = torch.randn(batch, 4), torch.randint(0, 3, (batch,))

    def step() -> torch.Tensor:
        features = encoder(x)
        return F.cross_entropy(head(features if fixed else features.detach()), y)

    return Case("eager_detach", "features detached before the head", "dead", fixed, step, opt,
                {"encoder": encoder, "head": head}, "encoder", "encoder",
                reports=("https://github.com/queenie88/A-GCN/issues/4",
                         "https://github.com/yifita/deep_cage/issues/16"))


class ActorCritic(nn.Module):
    """A shared trunk with a policy head and a value head (A2C/PPO style)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(4, width), nn.Tanh())
        self.pi, self.v = nn.Linear(width, 2), nn.Linear(width, 1)


def a2c_shared(fixed: bool = True, width: int = 16, batch: int = 8) -> Case:
    """Legitimate: one optimizer over actor and critic, the advantage detached (A2C, PPO).

    ``L = −log π(a|s) · sg(G − V(s)) + ½ (G − V(s))² − 0.01 H(π)`` with a shared trunk: every
    parameter is stepped and reached, nothing leaks. (With the advantage *not* detached the
    audit cannot tell from one optimizer over everything; pair each loss with its param group.)

    Reference: https://github.com/nikhilbarhate99/PPO-PyTorch/issues/29
    """
    model = ActorCritic(width)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    s, a, returns = _episode(batch)

    def step() -> torch.Tensor:
        h = model.trunk(s)
        log_probs = F.log_softmax(model.pi(h), 1)
        values = model.v(h).squeeze(1)
        advantage = (returns - values).detach()
        entropy = -(log_probs.exp() * log_probs).sum(1).mean()
        policy = -(log_probs.gather(1, a[:, None]).squeeze(1) * advantage).mean()
        return policy + 0.5 * (returns - values).pow(2).mean() - 0.01 * entropy

    return Case("a2c_shared", "(legitimate) one optimizer, advantage detached", "legit", True,
                step, opt, {"model": model},
                reports=("https://github.com/nikhilbarhate99/PPO-PyTorch/issues/29",))


#: The bug patterns, in the order of the table; each builder takes ``fixed`` first.
BUGS: dict[str, Callable[..., Case]] = {
    "dqn_target": dqn_target, "gan_fake": gan_fake, "ema_teacher": ema_teacher,
    "distill_teacher": distill_teacher, "actor_critic": actor_critic,
    "bptt_carried": bptt_carried, "eager_detach": eager_detach}
#: Legitimate setups the audit must pass.
LEGIT: dict[str, Callable[..., Case]] = {"a2c_shared": a2c_shared}


def expected_names(case: Case) -> list[str]:
    """The names the audit must give the flagged module's parameters, sorted."""
    module = case.modules[case.flagged]
    return sorted(f"{case.prefix}.{name}" for name, _ in module.named_parameters())


def losses_of(out: Any) -> list[torch.Tensor]:
    """The loss tensors a step returned (one tensor or a dict of them)."""
    return list(out.values()) if isinstance(out, dict) else [out]


def train_steps(case: Case, n: int = 2) -> None:
    """``n`` forward+backward passes of ``case`` from its initial state, gradients dropped."""
    case.reset()
    for _ in range(n):
        torch.autograd.backward(losses_of(case.step()), retain_graph=case.retain)
    for module in case.modules.values():
        module.zero_grad(set_to_none=True)
