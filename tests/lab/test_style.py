"""The shared figure style: one colour per role, in every figure."""

from __future__ import annotations

import matplotlib.pyplot as plt

from toolkit.lab.style import COLORS, EXTRA_COLORS, integer_ticks, variant_style


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


def test_other_colours_never_look_like_blocked_or_unblocked():
    # orange meant "unblocked" and also Fast-FGSM: no colour of the other categories may share
    # a hue with the blocked or unblocked colour
    from tests.lab.report.figure_hits import same_hue

    for colour in EXTRA_COLORS:
        for role in ("blocked", "unblocked"):
            assert not same_hue(colour, COLORS[role]), (colour, role)
    assert same_hue("#E69F00", COLORS["unblocked"]) and same_hue("#56B4E9", COLORS["blocked"])
    assert not same_hue(COLORS["reference"], COLORS["blocked"])  # greys have no hue


def test_role_of_labels():
    from tests.lab.report.figure_hits import role_of

    assert role_of("PGD-AT (blocked)") == "blocked"
    assert role_of("unblocked: identical to blocked") == "difference"
    assert role_of("|blocked − unblocked|") == "difference"
    assert role_of("DiCE without the block (magic box = 1)") == "unblocked"
    assert role_of("no blocks") == "unblocked" and role_of("all blocks") == "blocked"
    assert role_of("unblocked_pcd") == "unblocked"
    assert role_of("without straight through") is None and role_of("sampled chain") is None
