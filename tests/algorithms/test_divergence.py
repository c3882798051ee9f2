"""toolkit.algorithms.divergence: the finite check and the record every training loop shares."""

from __future__ import annotations

import pytest
import torch

from toolkit.algorithms.divergence import (
    Divergence,
    DivergenceWarning,
    check_finite,
    warn_divergence,
)


@pytest.mark.parametrize("bad", [float("inf"), float("-inf"), float("nan")])
def test_check_finite_names_the_first_non_finite_tensor(bad: float) -> None:
    ok = torch.ones(3)
    assert check_finite({"a": ok, "b": ok}) is None
    assert check_finite([]) is None
    assert check_finite({"a": ok, "b": torch.tensor([1.0, bad]), "c": torch.full((2,), bad)}) == "b"
    assert check_finite([("x", torch.tensor(bad))]) == "x"


def test_check_finite_sees_values_near_the_float_limit_as_finite() -> None:
    big = torch.full((4,), torch.finfo(torch.float64).max, dtype=torch.float64)
    assert check_finite({"w": big, "v": -big}) is None


def test_record_and_warning() -> None:
    div = Divergence("loop", "loss", 7)
    assert str(div) == ("loop: the loss became non-finite (inf or nan) at update 7; "
                        "training stopped there")
    assert div.as_dict() == {"where": "loop", "quantity": "loss", "step": 7, "epoch": None,
                             "applied": True}
    with pytest.warns(DivergenceWarning, match=r"at update 7; training stopped there\. Lower "
                                              r"the learning rate") as rec:
        warn_divergence(div)
    assert rec[0].filename == __file__
    assert issubclass(DivergenceWarning, RuntimeWarning)
