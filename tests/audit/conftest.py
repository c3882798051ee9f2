"""Held-out cases committed before the rule they judge: each test that failed on the code of its
commit is expected to fail (strict: once the rule makes it pass, its entry here must go). The
test files themselves stay as committed."""

from __future__ import annotations

import pytest

#: "file::test[id]" -> why it fails today (the rule it waits for)
_NOT_YET: dict[str, str] = {
    "test_principle_rebound_name.py::test_the_failure_is_found_at_the_first_update_it_spoils"
    "[universal-perturbation-two-phase]":
        "held out (95240f5): named at the rebinding, but a new loop's first pass shares its "
        "iteration number with the last pass of the loop before it (20, not 21)",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        why = _NOT_YET.get(f"{item.path.name}::{item.name}")
        if why is not None:
            item.add_marker(pytest.mark.xfail(reason=why, strict=True))
