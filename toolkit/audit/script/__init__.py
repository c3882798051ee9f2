"""A training script run unchanged under hooks, for ``toolkit audit SCRIPT [ARGS...]``
(:mod:`toolkit.audit.cli`): the script's driver, as :mod:`toolkit.audit.step` is a step
function's.

:mod:`.runner` runs the script as ``__main__`` with its own arguments under the hooks of
:mod:`.hooks`; :mod:`.session`'s :class:`~toolkit.audit.script.session.Watch` records each
iteration as it happens, in the record stage's pieces (:mod:`toolkit.audit.record.frames`,
:mod:`~toolkit.audit.record.backward`, :mod:`~toolkit.audit.record.ledger`), and calls the rules
only a running script shows (:mod:`toolkit.audit.rules.running`) at each backward and step;
:mod:`.staged` judges each audited ``backward()`` as a recorded step, by the truth, rules and
fixes stages :func:`~toolkit.audit.audit_step` runs. Each finding's edit is proved by the verify
stage (:mod:`toolkit.audit.verify.rerun`: the edited script run again).
"""
