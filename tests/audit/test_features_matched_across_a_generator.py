"""Feature matching: one network's features of real data compared with its features of a
generated sample (Salimans et al. 2016, §3.1; GANomaly's adversarial loss ``l2(D(x)[1],
D(G(x))[1])``, Akcay et al. 2018, samet-akcay/ganomaly ``lib/model.py``, which cuts neither).
The generator trains through its side and the discriminator runs on both: no side is a target,
in either argument order. A side read from another network than the other's (a teacher's
features carrying its gradient) still is."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from toolkit.audit import audit_step

torch.manual_seed(0)
generator = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 6))
features = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 4))
teacher = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 4))
optimizers = [torch.optim.Adam(generator.parameters()), torch.optim.Adam(features.parameters()),
              torch.optim.Adam(teacher.parameters())]
X = torch.randn(16, 6)


def l2(input: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return torch.mean((input - target) ** 2)


@pytest.mark.parametrize("compare", [l2, F.mse_loss], ids=["written", "mse_loss"])
@pytest.mark.parametrize("real_first", [True, False], ids=["real-first", "fake-first"])
def test_features_of_real_and_generated_data_match_with_no_target(compare, real_first):
    def step() -> torch.Tensor:
        real, fake = features(X), features(generator(X))
        return compare(real, fake) if real_first else compare(fake, real)
    assert not audit_step(step, optimizers).targets


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
def test_a_teacher_s_features_of_the_data_are_still_a_target(bias):
    student, other = (nn.Sequential(nn.Linear(6, 8, bias=bias), nn.ReLU(),
                                    nn.Linear(8, 4, bias=bias)) for _ in range(2))
    opts = [*optimizers[:1], torch.optim.Adam(student.parameters()),
            torch.optim.Adam(other.parameters())]

    def step() -> torch.Tensor:
        return F.mse_loss(student(generator(X)), other(generator(X)))
    assert audit_step(step, opts).targets


def test_a_frozen_teacher_on_the_trained_features_is_still_a_target():
    """``head(h)`` against ``teacher(h)`` with ``h`` the trained features: the teacher's layer,
    frozen (no tensor of its own in the graph), is no data in the shared network's place."""
    frozen = nn.Linear(4, 4).requires_grad_(False)
    head = nn.Linear(4, 4)
    opt = torch.optim.SGD([*generator.parameters(), *head.parameters()], lr=0.1)

    def step() -> torch.Tensor:   # each side its own forward of the features
        return F.mse_loss(head(torch.tanh(generator(X))[:, :4]),
                          frozen(torch.tanh(generator(X))[:, :4]))
    assert audit_step(step, opt).targets
