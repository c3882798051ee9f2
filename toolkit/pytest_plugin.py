"""pytest plugin of the toolkit: the ``clean_step`` fixture.

Registered through the ``pytest11`` entry point (``[project.entry-points.pytest11]`` in
``pyproject.toml``), so installing the package makes the fixture available in every test suite;
``pytest -p toolkit.pytest_plugin`` loads it explicitly. The fixture is
:func:`toolkit.assert_clean_step`: a one-line check that a training step has no gradient leak,
no dead parameter and no carried graph::

    def test_dqn_step_is_clean(clean_step):
        clean_step(agent.td_loss, agent.optimizer)

Importing this module imports neither torch nor the toolkit's core (pytest imports every
plugin at start-up); the fixture loads them when a test asks for it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest


@pytest.fixture
def clean_step() -> Callable[..., Any]:
    """:func:`toolkit.assert_clean_step`: ``clean_step(step, optimizers, **kwargs)`` raises
    ``GradientLeakError`` with the audit's report unless the step is clean."""
    from toolkit.audit import assert_clean_step

    return assert_clean_step
