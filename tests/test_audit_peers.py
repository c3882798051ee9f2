"""``benchmarks/audit_peers.py``: what DDP and anomaly mode say on three corpus cases.

A correct step (``morvan_rnn``) must leave both tools silent; its twin that keeps the RNN's
state without a cut (``morvan_rnn_no_repack``, carried) must fail the second iteration's
backward under both, anomaly mode naming the forward line; a step whose projection head no
loss reaches (``byol_readme``, dead) must make DDP's reducer list exactly the parameters the
audit reports dead. The DDP runs need two gloo processes on 127.0.0.1; without them the DDP
tests are skipped, saying why.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import audit_peers  # noqa: E402
import peers_ddp  # noqa: E402

CORRECT, CARRIED, DEAD = "morvan_rnn", "morvan_rnn_no_repack", "byol_readme"


@pytest.mark.slow  # a process group of DDP workers
def test_ddp_is_silent_on_the_correct_step_fails_the_carried_one_and_names_the_dead(
        seed: int) -> None:
    # one test, one pair of processes: under xdist every worker would start its own pair
    pair = peers_ddp.WorkerPair(timeout_s=60.0)
    try:
        pair.start()
    except RuntimeError as err:
        pytest.skip(f"gloo cannot start two processes on 127.0.0.1: {err}")
    try:
        correct, carried, dead = (peers_ddp.ddp_cell(name, seed, pair)
                                  for name in (CORRECT, CARRIED, DEAD))
    finally:
        pair.close()
    assert (correct.text, correct.flagged) == ("no error", False)
    assert carried.flagged and carried.text.startswith("in iteration 2, backward of 'loss'")
    assert "backward through the graph a second time" in carried.text
    assert dead.flagged and dead.text.startswith("in iteration 2, step(), DDP of learner")
    assert "Expected to have finished reduction in the prior iteration" in dead.text
    from toolkit import audit_step

    case = audit_peers.build(DEAD, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        audit = audit_step(case.step, case.optimizers, modules=case.modules)
    assert audit.dead and set(dead.names) == {d.parameter for d in audit.dead}


def test_anomaly_mode_sees_only_the_carried_state_and_names_its_forward_line(seed: int) -> None:
    assert audit_peers.anomaly_cell(CORRECT, seed).text == "nothing"
    assert audit_peers.anomaly_cell(DEAD, seed).text == "nothing"  # a dead head breaks nothing
    carried = audit_peers.anomaly_cell(CARRIED, seed)
    assert carried.flagged and "backward through the graph a second time" in carried.text
    assert "made at realcode_repr.py:" in carried.text  # the forward line anomaly mode blames


def test_the_audit_column_gives_the_verdict_and_the_first_located_fix(seed: int) -> None:
    assert audit_peers.audit_cell(CORRECT, seed).text == "ok"
    assert audit_peers.audit_cell(CARRIED, seed).text == "carried (1)"
    assert audit_peers.audit_cell(DEAD, seed).text == "dead (2)"
    # the fix line column: the user's line each fix names
    assert all(x.startswith("realcode_") for x in audit_peers.audit_cell(CARRIED, seed).names)


def test_the_table_counts_what_each_tool_flags() -> None:
    quiet, loud = audit_peers.Cell("ok", False, 0.01), audit_peers.Cell("dead (2): x", True, 0.02)
    located = audit_peers.Cell("dead (2): x", True, 0.02, ["step.py:12"])
    rows = [audit_peers.Row("a", "correct", quiet, quiet, quiet),
            audit_peers.Row("b", "dead", located, loud, quiet)]
    text = audit_peers.table(rows)
    assert ("| `b` | dead | dead (2): x | step.py:12 | dead (2): x | ok | 0.02 / 0.02 / 0.01 |"
            in text)
    assert "| `a` | correct | ok | — | ok | ok |" in text
    assert "| correct | 1 | 0 | 0 | 0 |" in text and "| dead | 1 | 1 | 1 | 0 |" in text


def test_update_docs_needs_both_markers(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(f"# t\n{audit_peers.START}\nold\n{audit_peers.END}\nafter\n")
    audit_peers.update_docs("new\n", page)
    assert page.read_text() == f"# t\n{audit_peers.START}\nnew\n{audit_peers.END}\nafter\n"
    page.write_text("# no markers\n")
    with pytest.raises(ValueError, match=r"audit_peers: .*page\.md must hold <!-- peers-table"):
        audit_peers.update_docs("new\n", page)
