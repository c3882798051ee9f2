"""The shared figure style: one colour per role, in every figure."""

from __future__ import annotations

import matplotlib.pyplot as plt

from toolkit.style import COLORS, EXTRA_COLORS, integer_ticks, variant_style


def test_roles_get_their_colours_and_unblocked_draws_on_top():
    b, u = variant_style("blocked"), variant_style("unblocked")
    assert b["color"] == COLORS["blocked"] and u["color"] == COLORS["unblocked"]
    assert u["zorder"] > b["zorder"] and u["linestyle"] == "--"
    assert variant_style("unblocked pcd")["color"] == COLORS["unblocked"]
    assert variant_style("blocked cd1")["color"] == COLORS["blocked"]
    for name in ("closed_form", "sklearn", "torch.softmax", "exact LL"):
        assert variant_style(name)["color"] == COLORS["reference"], name


def test_other_variants_get_distinct_colours_in_order():
    seen: list[str] = []
    a, b, a2 = (variant_style(n, seen) for n in ("sampled", "fgsm_rs", "sampled"))
    assert a["color"] == a2["color"] == EXTRA_COLORS[0] and b["color"] == EXTRA_COLORS[1]
    assert len(set(COLORS.values()) | set(EXTRA_COLORS)) == len(COLORS) + len(EXTRA_COLORS)


def test_integer_ticks():
    fig, ax = plt.subplots()
    ax.plot([1, 2], [0, 1])
    integer_ticks(ax)
    fig.canvas.draw()
    assert all(float(t).is_integer() for t in ax.get_xticks())
    plt.close(fig)
