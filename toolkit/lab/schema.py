"""The results format in one place: the two variants every experiment compares, and the grammar
of the metric keys a run logs.

Every experiment runs its algorithm twice from the same random state: with its blocks
(:data:`BLOCKED`, the method as published) and inside ``disable_blocks`` (:data:`UNBLOCKED`).
Results, summaries, metrics, tables and figures name the two by these strings, and by nothing
else: writers, readers and the report import them from here.

A metric key is ``"<variant>/<group>/<name>"`` (``"blocked/train/loss"``), or
``"<group>/<name>"`` for a quantity of neither variant (``"reference/loss"``); :func:`metric_key`
builds one and :func:`split_metric_key` reads one back.
"""

from __future__ import annotations

from typing import Final

__all__ = ["BLOCKED", "UNBLOCKED", "VARIANTS", "metric_key", "split_metric_key"]

#: with the blocks: the method as published
BLOCKED: Final = "blocked"
#: the same code inside ``disable_blocks``: the gradient flows where the blocks cut it
UNBLOCKED: Final = "unblocked"
#: both, in the order every table and figure shows them
VARIANTS: Final = (BLOCKED, UNBLOCKED)


def metric_key(*parts: str) -> str:
    """``"blocked/train/loss"`` from ``(BLOCKED, "train", "loss")``; every part non-empty and
    free of ``/``.

    >>> metric_key(BLOCKED, "chain_grad", "norm")
    'blocked/chain_grad/norm'
    """
    if not parts or any(not p or "/" in p for p in parts):
        raise ValueError(f"metric_key: parts must be non-empty and without '/', got {parts!r}")
    return "/".join(parts)


def split_metric_key(key: str) -> tuple[str | None, str]:
    """``(variant, rest)`` of a metric key: the variant when the key starts with one, else
    ``None`` and the whole key.

    >>> split_metric_key("unblocked/train/loss"), split_metric_key("reference/loss")
    (('unblocked', 'train/loss'), (None, 'reference/loss'))
    """
    head, _, rest = key.partition("/")
    return (head, rest) if head in VARIANTS and rest else (None, key)


# ---------------------------------------------------------------------------------------------
# The metrics glossary: what each logged metric means
# ---------------------------------------------------------------------------------------------
# An experiment declares, next to what it logs, what each metric key means (its ``METRICS``
# hook, a tuple of :class:`MetricDoc`). The docs' glossary page is rendered from these
# declarations and a test checks them against the keys a quick run logs, so neither can drift.

import re  # noqa: E402  (this section stands on its own)

from pydantic import BaseModel, ConfigDict, Field, field_validator  # noqa: E402

__all__ += ["MetricDoc", "metric_doc_for"]

_PLACEHOLDER = re.compile(r"\{(\w+)(?::([^{}]+))?\}")


class MetricDoc(BaseModel):
    """What the metric keys matching one pattern mean.

    ``key`` is a metric key (:func:`metric_key`) in which ``{name}`` stands for any text
    within one part of the key, ``{name:a|b}`` for one of the listed words, and ``{variant}``
    for either variant (``blocked`` or ``unblocked``).

    >>> doc = MetricDoc(key="{variant}/train/loss", meaning="training loss", unit="nats")
    >>> doc.matches("unblocked/train/loss"), doc.matches("reference/train/loss")
    (True, False)
    >>> MetricDoc(key="{variant}/grad_{case:random|tied}/err", meaning="error").matches(
    ...     "blocked/grad_tied/err")
    True
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str = Field(description="the key pattern: `{variant}/train/loss`, "
                                 "`sklearn/{split:train|iris}/loglik`")
    meaning: str = Field(min_length=1, description="what the number is, in one sentence")
    unit: str = Field("", description="its unit in words (`nats per sample`, `seconds`); "
                                      "empty for a pure number (a ratio, a cosine, a count)")

    @field_validator("key")
    @classmethod
    def _key_is_a_pattern(cls, key: str) -> str:
        parts = key.split("/")
        if len(parts) < 2 or any(not p for p in parts):
            raise ValueError(f"a metric key pattern has non-empty parts joined by '/' "
                             f"('{{variant}}/train/loss'), got {key!r}")
        if _PLACEHOLDER.sub("", key).count("{") or _PLACEHOLDER.sub("", key).count("}"):
            raise ValueError(f"braces in {key!r} must read {{name}} or {{name:a|b}}")
        return key

    @property
    def pattern(self) -> re.Pattern[str]:
        """The regular expression of :attr:`key` (a whole key must match)."""
        out, at = [], 0
        for m in _PLACEHOLDER.finditer(self.key):
            out.append(re.escape(self.key[at:m.start()]))
            name, choices = m.group(1), m.group(2)
            if choices is None and name == "variant":
                choices = "|".join(VARIANTS)
            out.append("(?:" + "|".join(map(re.escape, choices.split("|"))) + ")" if choices
                       else "[^/]+?")
            at = m.end()
        out.append(re.escape(self.key[at:]))
        return re.compile("".join(out))

    def matches(self, key: str) -> bool:
        """Whether the logged metric ``key`` is one this declaration describes."""
        return self.pattern.fullmatch(key) is not None


def metric_doc_for(key: str, docs: tuple[MetricDoc, ...] | list[MetricDoc]) -> MetricDoc | None:
    """The declaration among ``docs`` that describes ``key`` (the first that matches), or
    ``None``.

    >>> docs = (MetricDoc(key="{variant}/train/loss", meaning="training loss"),)
    >>> metric_doc_for("blocked/train/loss", docs).meaning, metric_doc_for("x/y", docs)
    ('training loss', None)
    """
    return next((doc for doc in docs if doc.matches(key)), None)
