"""The audit against the corpus of real bugs (``experiments/audit_corpus/cases.py``).

Each case is a minimal reproduction of a bug pattern from public reports (cited in the corpus:
pytorch/examples#116 for the GAN fake, philtabor/Deep-Q-Learning-Paper-To-Code#9 and #16 for the
DQN target, lhoyer/DAFormer#59 for the EMA teacher, haitongli/knowledge-distillation-pytorch#25
for the distillation teacher, astariul/encode-attend-navigate-pytorch#2 for the actor-critic
advantage, MorvanZhou/PyTorch-Tutorial#57 for the carried BPTT state, queenie88/A-GCN#4 for the
over-eager detach), written buggy and fixed. The buggy version must be flagged in its category
with exactly the flagged module's tensors; the fixed twin and the legitimate setups must pass.
"""

from __future__ import annotations

import pytest
import torch
from stop_gradient_experiments.audit_corpus.cases import BUGS, LEGIT, actor_critic, expected_names

from toolkit import audit_step


@pytest.mark.parametrize("name", sorted(BUGS))
def test_every_bug_is_caught_in_its_category_with_its_names(name: str) -> None:
    case = BUGS[name](False)
    audit = audit_step(case.step, case.optimizers)
    assert not audit.ok
    found = {"leak": sorted(x.parameter for x in audit.leaks),
             "dead": sorted(x.parameter for x in audit.dead)}
    if case.category == "carried":
        assert audit.carried and not audit.leaks and not audit.dead
        assert all(c.source.startswith(f"the output of {case.prefix}") for c in audit.carried)
    else:
        assert found[case.category] == expected_names(case), str(audit)
        assert not audit.carried
        assert all(not v for k, v in found.items() if k != case.category)
    assert case.reports and all(url.startswith("https://") for url in case.reports)


@pytest.mark.parametrize("name", sorted(BUGS))
def test_every_fixed_twin_is_clean(name: str) -> None:
    case = BUGS[name](True)
    audit = audit_step(case.step, case.optimizers)
    assert audit.ok, str(audit)
    assert str(audit).startswith("audit_step: clean")


@pytest.mark.parametrize("name", sorted(LEGIT))
def test_legitimate_setups_raise_no_alarm(name: str) -> None:
    case = LEGIT[name]()
    assert audit_step(case.step, case.optimizers).ok


def test_a_shared_optimizer_paired_with_several_losses_counts_what_any_of_them_reaches() -> None:
    # one optimizer over actor and critic, the losses returned apart: the critic is reached by
    # the critic's loss only, and that is no dead parameter of the shared optimizer
    case = actor_critic(True)
    opt = torch.optim.Adam([*case.modules["actor"].parameters(),
                            *case.modules["critic"].parameters()])
    assert audit_step(case.step, opt).ok
    assert audit_step(case.step, {"actor": opt, "critic": opt}).ok


@pytest.mark.parametrize("fixed", [False, True])
def test_param_groups_of_one_optimizer_tell_which_loss_trains_what(fixed: bool) -> None:
    case = actor_critic(fixed)
    actor, critic = case.modules["actor"], case.modules["critic"]
    opt = torch.optim.Adam([{"params": actor.parameters()},
                            {"params": critic.parameters(), "lr": 1e-2}])
    audit = audit_step(case.step, {"actor": opt.param_groups[0], "critic": opt.param_groups[1]})
    if fixed:
        assert audit.ok, str(audit)
    else:
        assert sorted(x.parameter for x in audit.leaks) == expected_names(case)
        assert {x.loss for x in audit.leaks} == {"actor"}


def test_what_each_report_says() -> None:
    def audit(name: str):
        case = BUGS[name](False, width=8, batch=4)
        return audit_step(case.step, case.optimizers)

    dqn = audit("dqn_target")
    assert "behind it: q_target" in dqn.leaks[0].fix
    assert dqn.leaks[0].path[0] == "SmoothL1Loss" and dqn.leaks[0].path[-1].startswith("q_target.")
    gan = audit("gan_fake")
    assert {x.cut_at for x in gan.leaks} == {"the output of generator (shape (4, 2))"}
    assert all("discriminator.0" in " ".join(x.path) for x in gan.leaks)
    assert sum(x.grad_bytes for x in gan.leaks) == 4 * sum(
        p.numel() for p in BUGS["gan_fake"](False, width=8).modules["generator"].parameters())
    ema = audit("ema_teacher")
    assert all(x.reason.endswith("updated twice") and "lerp" in x.reason for x in ema.leaks)
    critic = audit("actor_critic")
    assert {x.optimizer for x in critic.leaks} == {"actor"}
    (carried,) = audit("bptt_carried").carried
    assert carried.shape == (1, 4, 8) and carried.created == "in the first call"
    assert carried.entered == "the input of rnn" and carried.n_nodes > 0
    dead = audit("eager_detach").dead
    assert {x.cut for x in dead} == {".detach() of the output of encoder (shape (4, 8))"}
    assert {x.losses for x in dead} == {("loss",)}
