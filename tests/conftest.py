"""Shared test settings: deterministic, quiet, and independent of the machine's thread count.

Seeds. Every test that draws random numbers takes its seeds from the ``seed`` fixture (or from
the global generator, seeded by ``_seed_everything``), never from a bare literal, so that the
whole suite can be rerun from other seeds: ``TOOLKIT_TEST_SEED=7 python -m pytest`` shifts every
base seed by 7. A test must pass for every shift: it asserts properties (bounds, orderings that
theory guarantees, agreement with a reference to a stated tolerance), not one trajectory.

Threads. ``TOOLKIT_TEST_THREADS`` sets torch's intra-op threads (default 1: tests use tiny
tensors, and one thread avoids oversubscription on a busy machine); the suite must pass with 1
and with 2.

Kernels. The tests listed in ``NUMERIC_TESTS`` are marked ``numerics``; ``.ci/run`` runs them
(``-m numerics``) a second time with other kernels, accumulation orders and threads, chosen by
environment variables, as another CPU would (see docs/getting-started.md, The tests).
"""

import os
from pathlib import Path

import matplotlib
import oracles
import pytest
import torch

matplotlib.use("Agg")
os.environ.setdefault("TQDM_DISABLE", "1")


def _int_env(name: str, default: int) -> int:
    value = os.environ.get(name, "")
    try:
        return int(value) if value.strip() else default
    except ValueError:
        raise pytest.UsageError(f"{name} must be an integer, got {value!r}") from None


#: The shift added to every base seed (``TOOLKIT_TEST_SEED``, default 0).
SEED_SHIFT = _int_env("TOOLKIT_TEST_SEED", 0)
torch.set_num_threads(_int_env("TOOLKIT_TEST_THREADS", 1))
# The processes the tests start (a script audited as a user runs it, a held-out script run to
# its end, a worker) take as many threads as this one, unless told otherwise: each of
# pytest-xdist's workers starting a process with a thread per core oversubscribes the cores.
os.environ.setdefault("OMP_NUM_THREADS", str(torch.get_num_threads()))


def pytest_report_header(config: pytest.Config) -> list[str]:
    vouched = [m for m in oracles.modules() if oracles.vouched(m)]
    return [f"toolkit tests: seed shift {SEED_SHIFT} (TOOLKIT_TEST_SEED), "
            f"{torch.get_num_threads()} torch thread(s) (TOOLKIT_TEST_THREADS)",
            f"oracles of held-out cases: not run in {len(vouched)} of {len(oracles.modules())} "
            f"modules, whose files tests/oracles.lock.json vouches for on torch {oracles.TORCH} "
            f"(TOOLKIT_ORACLES=run runs them)"]


#: The numerically sensitive tests (paths from the repository root, or words in a test's id):
#: every algorithm against its reference (closed forms, float64 gradcheck, scikit-learn, torch,
#: torchattacks), scikit-learn's own test files run on our estimators, the gradient tools, and
#: every float32 variant. One list: ``.ci/run`` selects them with ``-m numerics``.
NUMERIC_TESTS = ("tests/algorithms/", "tests/sklearn_suite/", "tests/lens/test_gradients.py",
                 "tests/lens/test_flow.py", "float32")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "numerics: numerically sensitive; .ci/run runs these a "
                            "second time under other kernels (NUMERIC_TESTS in tests/conftest.py)")
    config.addinivalue_line("markers", "oracle: checks a held-out case itself, not the toolkit; "
                            "not run where tests/oracles.lock.json vouches for its files")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    paths = tuple(p for p in NUMERIC_TESTS if p.startswith("tests/"))
    words = tuple(w for w in NUMERIC_TESTS if not w.startswith("tests/"))
    for item in items:
        where = Path(os.path.relpath(item.path, config.rootpath)).as_posix()
        if where.startswith(paths) or any(w in item.nodeid for w in words):
            item.add_marker(pytest.mark.numerics)
    # the oracles of cases whose files the lock vouches for, on this torch (tests/oracles.py)
    vouched: dict[Path, bool] = {}
    kept, left = [], []
    for item in items:
        if item.get_closest_marker("oracle") is not None:
            module = Path(item.path)
            if module not in vouched:
                vouched[module] = oracles.vouched(module)
            if vouched[module]:
                left.append(item)
                continue
        kept.append(item)
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = kept


@pytest.fixture(scope="session")
def seed() -> int:
    """The test's base seed: 0 plus ``TOOLKIT_TEST_SEED``. Use ``seed + k`` for more streams."""
    return SEED_SHIFT


@pytest.fixture(autouse=True)
def _seed_everything() -> None:
    torch.manual_seed(SEED_SHIFT)
