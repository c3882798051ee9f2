"""The audit's first stage: the step run twice and recorded.

:mod:`.recording` (the :class:`~toolkit.audit.record.recording.Recording` the step runs
in: names, cuts, writes, module calls), :mod:`.calls` (every torch call, through a
torch-function mode), :mod:`.names` (tensors named by module path), :mod:`.sites` (the user's
lines), :mod:`.unregistered` (what the line that builds an optimizer steps, and where a tensor
it misses is kept); and, kept apart from the recording, :mod:`.state` (the module and
optimizer state saved before the two calls and put back after).

A running script (``toolkit audit SCRIPT``) is recorded as it runs, with four more:
:mod:`.frames` (which frame is the user's code, and the exact span of the call it is in),
:mod:`.backward` (the graph a ``backward()`` is about to run, read before it runs),
:mod:`.ledger` (which backward's gradient each ``.grad`` holds) and :mod:`.tensors` (the
tensors a value holds and where they live).
"""
