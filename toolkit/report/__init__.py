"""Reports drawn from results files: figures, ``report.html``/``report.md``, ``compare``."""

from toolkit.report.figures import default_figures, metric_figure, metric_groups, summary_figure
from toolkit.report.render import write_report

__all__ = [
    "default_figures",
    "metric_figure",
    "metric_groups",
    "summary_figure",
    "write_report",
]
