"""Reports drawn from a run's files: figures, ``report.html``/``report.md``
(:mod:`~toolkit.lab.report.render`) and ``toolkit compare`` (:mod:`~toolkit.lab.report.compare`).
An experiment's ``figures(run)`` is built from :mod:`~toolkit.lab.report.figures`."""

from toolkit.lab.report.figures import default_figures, metric_figure, metric_groups, summary_figure
from toolkit.lab.report.render import draw_report, write_report

__all__ = ["default_figures", "draw_report", "metric_figure", "metric_groups", "summary_figure",
           "write_report"]
