"""Base model of experiment parameters."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["ExperimentParams"]


class ExperimentParams(BaseModel):
    """Base class of an experiment's ``Params``: a pydantic model, unknown keys rejected, frozen.

    Declare each field with ``Field(default, description="...")`` and constraints (``ge``,
    ``gt``, ``le``...); the runner validates ``[params]`` of a config against it and reports a
    mistake as one line naming the file, the key path and the fix.

    >>> from pydantic import Field
    >>> class Params(ExperimentParams):
    ...     n_steps: int = Field(100, ge=1, description="number of steps")
    >>> Params(n_steps=5).n_steps
    5
    """

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)
