"""What each metric the audit_corpus experiment logs means (its ``METRICS``): none. It audits
a corpus of training steps and writes its verdicts to the summary, with nothing per step."""

from toolkit.lab.results.schema import MetricDoc

METRICS: tuple[MetricDoc, ...] = ()
