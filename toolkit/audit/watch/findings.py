"""Transitional: the script finding now lives in :mod:`toolkit.audit.findings`."""

from toolkit.audit.findings import ScriptFinding

__all__ = ["ScriptFinding"]
