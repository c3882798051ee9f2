"""What runs leave behind: the schema of every results file (:mod:`.schema`), findings and
verdicts (:mod:`.findings`), files read as hostile input (:mod:`.files`), runs read back and
checked (:mod:`.view`), the records runs write (:mod:`.records`). Nothing here imports torch."""

from toolkit.lab.results.findings import Finding, Story, TimeRatio, Verdict
from toolkit.lab.results.records import read_findings
from toolkit.lab.results.schema import BLOCKED, UNBLOCKED, VARIANTS, MetricDoc, RunConfig
from toolkit.lab.results.view import RunResults, SeedGroup, find_runs

__all__ = ["BLOCKED", "UNBLOCKED", "VARIANTS", "Finding", "MetricDoc", "RunConfig", "RunResults",
           "SeedGroup", "Story", "TimeRatio", "Verdict", "find_runs", "read_findings"]
