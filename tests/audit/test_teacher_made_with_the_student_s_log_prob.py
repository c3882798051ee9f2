"""A soft target made from the student's own log-probability and another network's output:
Distral's task policy ``softmax(alpha log pi_0 + beta Q_i)`` (Teh et al. 2017, eq. 3), the
teacher the shared policy ``pi_0`` is distilled from. It reaches ``log pi_0``, but the critic
beside it makes it no function of ``pi_0``'s own distribution (an entropy's weight): without
its cut the distillation also trains ``pi_0`` through the teacher, a ``target`` whose edit
cuts it. A tempered copy of the student's own distribution is still an entropy's weight."""

from __future__ import annotations

import torch
from torch import nn

from toolkit.audit import audit_step

torch.manual_seed(0)
student, critic = nn.Linear(4, 3), nn.Linear(4, 3)
optimizer = torch.optim.SGD(student.parameters(), lr=0.1)   # the critic trains elsewhere
OBS = torch.randn(8, 4)


def distral(cut: bool):
    def step() -> torch.Tensor:
        log_pi0 = student(OBS).log_softmax(-1)
        teacher = (0.5 * log_pi0 + 2.0 * critic(OBS)).softmax(-1)
        if cut:
            teacher = teacher.detach()
        return -(teacher * log_pi0).sum(-1).mean()
    return step


def tempered_entropy() -> torch.Tensor:
    log_pi = student(OBS).log_softmax(-1)
    return (log_pi * 2.0).softmax(-1).mul(log_pi).sum(-1).mean()


def test_a_teacher_made_with_another_network_beside_the_log_prob_carries_gradient():
    (found,) = audit_step(distral(cut=False), optimizer).targets
    assert found.edits


def test_the_teacher_cut_is_clean():
    assert audit_step(distral(cut=True), optimizer).ok


def test_a_tempered_copy_of_the_student_s_own_distribution_is_no_target():
    assert not audit_step(tempered_entropy, optimizer).targets
