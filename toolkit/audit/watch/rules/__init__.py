"""The script audit's rules, each a function of the :class:`~toolkit.audit.watch.session.Watch`
that records the run: called by the watch at a backward, a step or the end of an iteration,
they add their findings to it."""
