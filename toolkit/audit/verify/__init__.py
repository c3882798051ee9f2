"""The audit's last stage: an edit is proved before it is printed.

Two ways, one judgement (:func:`~toolkit.audit.verify.gradients.same_gradient`): an edit
passes when the finding it fixes is gone, nothing new is found, and every gradient it is not
about stays the same.

- :mod:`.in_process` runs the edited step of :func:`~toolkit.audit.audit_step` in process, each
  edited function swapped in for the call (:attr:`~toolkit.audit.kinds.Proof.IN_PROCESS`);
- :mod:`.rerun` audits the edited script again, on copies, in a fresh process from the same
  seed (:attr:`~toolkit.audit.kinds.Proof.RERUN`), which :mod:`.fresh` forks from a server
  that imported torch once.
"""
