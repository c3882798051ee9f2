"""The rules only a running script shows (``toolkit audit SCRIPT``): what sits in ``.grad`` at
each ``optimizer.step()`` (:mod:`.at_step`), gradient cleared before a step (:mod:`.lost`),
stepped tensors no loss reached (:mod:`.dead`), a loss reaching tensors no optimizer steps
(:mod:`.unstepped`; learned tensors torch does not register as parameters:
:mod:`.not_parameters`), parameters or modules replaced after their optimizer
(:mod:`.replaced`), copies of a network (:mod:`.copies`), targets moved toward a stepped
network (:mod:`.targets`), predictions fed back (:mod:`.carried`, :mod:`.recycled`), hard
values (:mod:`.hard`), exact-zero gradients (:mod:`.zero_gradient`), freezes never ended
(:mod:`.never_trained`), samples drawn without their path (:mod:`.drawn`), cuts nothing reads
(:mod:`.unread_cut`), a recurrent state cut inside the unroll a loss reads (:mod:`.truncated`)
and the cuts taken as meant (:mod:`.meant`).

Each is a function of :class:`~toolkit.audit.rules.running.state.WatchState`, the state the
script's recorder keeps (:mod:`toolkit.audit.script.session`), called at a backward, a step or
the end of an iteration, and adds typed findings to it. What they read of a run is found by
:mod:`.feedback`, :mod:`.recycling`, :mod:`.hard_values`, :mod:`.kept_in_sync` and
:mod:`.zeroed`. Each audited ``backward()`` is also judged by the rules of the recorded step
(the modules above this one), through :mod:`toolkit.audit.script.staged`.
"""
