"""The held-out steps the audit fails today, by name: ``test_held_out`` marks them
``xfail(strict=False)``.

This is the one file of this folder that may change after the folder was committed, and only by
removing names: when the audit comes to judge a step right (no false alarm on a correct step;
on a bug, its category and the real backward's tensor sets, and a printed edit that trains as
the bug's twin), its name is taken out of this list. No step, twin, oracle or scorer of the
folder is edited to make the audit pass.
"""

from __future__ import annotations

#: measured with ``score.py`` when the folder was committed (see README.md)
FAILING_TODAY: frozenset[str] = frozenset({
    "edge_popup_threshold",
    "switch_router_unscaled",
})
