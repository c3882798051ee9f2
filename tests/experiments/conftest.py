"""Shared checks of an experiment's figures: captions in words, no clashing text, and the
layout rules of ``tests/lab/report/layout.py`` (issue 24)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import matplotlib.pyplot as plt
import pytest

from tests.lab.report.figure_hits import text_problems
from tests.lab.report.layout import colour_problems, layout_problems

#: Backward-graph drawings come from ``draw_gradient_graph``, whose layout and colours are
#: checked with the graph drawing itself; every other figure obeys the layout rules.
GRAPHS = ("graph", "gan_leak")


def _check(experiment: str, figures: Mapping[str, Any]) -> None:
    drawn = {}
    for name, value in figures.items():
        fig, caption = value if isinstance(value, tuple) else (value, "")
        title = fig._suptitle.get_text() if fig._suptitle is not None else ""
        assert len(caption.split()) >= 10 and caption.rstrip(".") != title, (name, caption)
        assert text_problems(fig) == [], name
        if not name.startswith(GRAPHS):
            assert layout_problems(fig) == [], name
            drawn[f"{experiment}__{name}"] = fig
    assert colour_problems(drawn) == []
    for fig in drawn.values():
        plt.close(fig)


@pytest.fixture
def check_figures() -> Callable[[str, Mapping[str, Any]], None]:
    """``check_figures(experiment, figures)``: every figure has a caption of at least ten
    words that is not its title, no clashing text, no layout problem, and no colour means two
    things among them."""
    return _check
