"""The corpus's tests in the order of their case: each test process audits a case once
(``test_real_code._audited``) and shares it with every test that reads it. pytest-xdist's
worksteal hands each process contiguous runs of tests, so the tests of one case, together,
land in one process instead of auditing the case again in the other."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = [i for i, item in enumerate(items) if item.path.name == "test_real_code.py"]
    ordered = sorted((items[i] for i in here), key=lambda item: str(getattr(
        getattr(item, "callspec", None), "params", {}).get("name", "")))
    for i, item in zip(here, ordered, strict=True):
        items[i] = item
