"""Shared test settings: deterministic, quiet, and independent of the machine's thread count.

Seeds. Every test that draws random numbers takes its seeds from the ``seed`` fixture (or from
the global generator, seeded by ``_seed_everything``), never from a bare literal, so that the
whole suite can be rerun from other seeds: ``TOOLKIT_TEST_SEED=7 python -m pytest`` shifts every
base seed by 7. A test must pass for every shift: it asserts properties (bounds, orderings that
theory guarantees, agreement with a reference to a stated tolerance), not one trajectory.

Threads. ``TOOLKIT_TEST_THREADS`` sets torch's intra-op threads (default 1: tests use tiny
tensors, and one thread avoids oversubscription on a busy machine); the suite must pass with 1
and with 2.
"""

import os

import matplotlib
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


def pytest_report_header(config: pytest.Config) -> str:
    return (f"toolkit tests: seed shift {SEED_SHIFT} (TOOLKIT_TEST_SEED), "
            f"{torch.get_num_threads()} torch thread(s) (TOOLKIT_TEST_THREADS)")


@pytest.fixture(scope="session")
def seed() -> int:
    """The test's base seed: 0 plus ``TOOLKIT_TEST_SEED``. Use ``seed + k`` for more streams."""
    return SEED_SHIFT


@pytest.fixture(autouse=True)
def _seed_everything() -> None:
    torch.manual_seed(SEED_SHIFT)
