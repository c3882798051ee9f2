"""Reports drawn from results files: figures, ``report.html``/``report.md``, ``compare``.

Everything here reads only what a run wrote (``toolkit.lab.RunResults``), so reports can be
regenerated at any time (``toolkit report RUN_DIR``) and runs aggregated later
(``toolkit compare DIR``). An experiment's ``figures(run)`` declares its figures with the
pieces of :mod:`toolkit.lab.report.plots` (curves over seeds per variant, grouped bars, image
grids, one legend under the panels) and :mod:`toolkit.lab.report.figures`;
:mod:`toolkit.lab.report.compare` (pandas, imported on use) pools runs over seeds.
"""

from toolkit.lab.report.figures import (
    default_figures,
    metric_figure,
    metric_groups,
    summary_figure,
)
from toolkit.lab.report.render import draw_report, write_report

__all__ = [
    "default_figures",
    "draw_report",
    "metric_figure",
    "metric_groups",
    "summary_figure",
    "write_report",
]
