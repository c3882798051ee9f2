"""Held-out cases committed before the rule they judge: each test that failed on the code of its
commit is expected to fail (strict: once the rule makes it pass, its entry here must go). The
test files themselves stay as committed."""

from __future__ import annotations

import pytest

#: "file::test[id]" -> why it fails today (the rule it waits for)
_NOT_YET = {
    f"test_principle_parameter_replaced.py::{test}[{case}]":
        "held out (4116d0c): a parameter replaced after its optimizer is not named at the "
        "replacing assignment yet, nor fixed there"
    for case in ("lottery-ticket-two-phase", "vq-dead-code-restart-in-loop")
    for test in ("test_the_failure_names_the_replacing_assignment_and_the_replaced_tensor",
                 "test_the_failure_is_found_at_the_first_update_it_spoils",
                 "test_the_optimizer_is_not_moved_where_it_steps_the_model_before_the_"
                 "replacement")
} | {
    f"test_principle_parameter_replaced.py::test_the_edit_is_verified_and_trains_as_the_"
    f"published_script[{case}]":
        "held out (4116d0c): no edit at the replacing assignment is written yet"
    for case in ("glow-actnorm-init", "lottery-ticket-two-phase", "vq-dead-code-restart-in-loop")
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        why = _NOT_YET.get(f"{item.path.name}::{item.name}")
        if why is not None:
            item.add_marker(pytest.mark.xfail(reason=why, strict=True))
