"""Held-out cases committed before the rule they judge: each test that failed on the code of its
commit is expected to fail (strict: once the rule makes it pass, its entry here must go). The
test files themselves stay as committed."""

from __future__ import annotations

import pytest

#: "file::test[id]" -> why it fails today (the rule it waits for)
#: why the blind cases of keys cut in a loss over keys fail at their commit
_KEYS = ("held out blind (73267da): keys cut from the network that makes the queries, in "
         "a softmax over several keys, have the form of a stop-gradient, which the audit takes "
         "as meant (a closing line names the cut)")

_NOT_YET: dict[str, str] = {
    "test_principle_rebound_name.py::test_the_failure_is_found_at_the_first_update_it_spoils"
    "[universal-perturbation-two-phase]":
        "held out (95240f5): named at the rebinding, but a new loop's first pass shares its "
        "iteration number with the last pass of the loop before it (20, not 21)",
    "test_principle_cut_iterations_blind.py::"
    "test_a_cut_iteration_or_one_trained_through_on_purpose_is_no_finding"
    "[spen-unrolled-inference]":
        "held out blind (6816d38): the energy's last bias is dead as published (a constant "
        "offset, and the unrolled inference reads only the energy's gradient): the dead "
        "finding is true of the script; whether to report it on a published script is open",
    "test_principle_peer_targets_blind.py::"
    "test_the_edit_is_verified_and_trains_as_the_published_script"
    "[dual-student-stabilization-target]":
        "held out blind (7e071a6): the cut is written inside the comparison helper `mse`, "
        "which the script calls at six places, not at the stabilization target's own line",
    "test_principle_cut_keys_blind.py::test_the_failure_names_the_cut_and_the_tensors"
    "[simclr-second-view-detached]":
        _KEYS,
    "test_principle_cut_keys_blind.py::test_the_failure_names_the_cut_and_the_tensors"
    "[cpc-futures-detached]":
        _KEYS,
    "test_principle_cut_keys_blind.py::test_the_failure_names_the_cut_and_the_tensors"
    "[protonet-prototypes-detached]":
        _KEYS,
    "test_principle_cut_keys_blind.py::test_the_failure_names_the_cut_and_the_tensors"
    "[protonet-helper-support-no-grad]":
        _KEYS,
    "test_principle_cut_keys_blind.py::test_the_failure_names_the_cut_and_the_tensors"
    "[supcon-contrast-side-helper]":
        _KEYS,
    "test_principle_cut_keys_blind.py::test_the_failure_names_the_cut_and_the_tensors"
    "[clip-text-tower-detached]":
        _KEYS,
    "test_principle_cut_keys_blind.py::test_the_failure_names_the_cut_and_the_tensors"
    "[meta-baseline-late]":
        _KEYS,
    "test_principle_cut_keys_blind.py::test_the_failure_is_found_at_the_first_iteration"
    "[simclr-second-view-detached]":
        _KEYS,
    "test_principle_cut_keys_blind.py::test_the_failure_is_found_at_the_first_iteration"
    "[cpc-futures-detached]":
        _KEYS,
    "test_principle_cut_keys_blind.py::test_the_failure_is_found_at_the_first_iteration"
    "[protonet-prototypes-detached]":
        _KEYS,
    "test_principle_cut_keys_blind.py::test_the_failure_is_found_at_the_first_iteration"
    "[protonet-helper-support-no-grad]":
        _KEYS,
    "test_principle_cut_keys_blind.py::test_the_failure_is_found_at_the_first_iteration"
    "[supcon-contrast-side-helper]":
        _KEYS,
    "test_principle_cut_keys_blind.py::test_the_failure_is_found_at_the_first_iteration"
    "[clip-text-tower-detached]":
        _KEYS,
    "test_principle_cut_keys_blind.py::test_the_failure_is_found_at_the_first_iteration"
    "[meta-baseline-late]":
        _KEYS,
    "test_principle_cut_keys_blind.py::test_the_edit_is_verified_and_trains_as_the_published_script"
    "[simclr-second-view-detached]":
        _KEYS,
    "test_principle_cut_keys_blind.py::test_the_edit_is_verified_and_trains_as_the_published_script"
    "[cpc-futures-detached]":
        _KEYS,
    "test_principle_cut_keys_blind.py::test_the_edit_is_verified_and_trains_as_the_published_script"
    "[protonet-prototypes-detached]":
        _KEYS,
    "test_principle_cut_keys_blind.py::test_the_edit_is_verified_and_trains_as_the_published_script"
    "[protonet-helper-support-no-grad]":
        _KEYS,
    "test_principle_cut_keys_blind.py::test_the_edit_is_verified_and_trains_as_the_published_script"
    "[supcon-contrast-side-helper]":
        _KEYS,
    "test_principle_cut_keys_blind.py::test_the_edit_is_verified_and_trains_as_the_published_script"
    "[clip-text-tower-detached]":
        _KEYS,
    "test_principle_cut_keys_blind.py::test_the_edit_is_verified_and_trains_as_the_published_script"
    "[meta-baseline-late]":
        _KEYS,
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        why = _NOT_YET.get(f"{item.path.name}::{item.name}")
        if why is not None:
            item.add_marker(pytest.mark.xfail(reason=why, strict=True))
