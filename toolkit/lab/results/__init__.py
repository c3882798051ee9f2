"""What runs leave behind: one schema for every results file (:mod:`.schema`), the findings and
their verdicts over seeds (:mod:`.findings`), reading and writing files as hostile input
(:mod:`.files`), runs and seed groups read back (:mod:`.view`), the records runs write
(:mod:`.records`) and ``toolkit check`` (:mod:`.check`). Nothing here imports torch."""

from toolkit.lab.results.findings import Finding, Story, TimeRatio, Verdict
from toolkit.lab.results.records import read_findings
from toolkit.lab.results.schema import BLOCKED, UNBLOCKED, VARIANTS, MetricDoc, RunConfig
from toolkit.lab.results.view import RunResults, SeedGroup, find_runs

__all__ = ["BLOCKED", "UNBLOCKED", "VARIANTS", "Finding", "MetricDoc", "RunConfig", "RunResults",
           "SeedGroup", "Story", "TimeRatio", "Verdict", "find_runs", "read_findings"]
