"""The audit's last stage: an edit is proved before it is printed.

:mod:`.in_process` runs the edited step of :func:`~toolkit.audit.audit_step` in process, each
edited function swapped in for the call, and keeps only the edits whose run shows the finding
gone, nothing new, and the other stepped tensors' gradients unchanged
(:attr:`~toolkit.audit.kinds.Proof.IN_PROCESS`). A script's edits are proved by rerunning the
edited script on copies from the same seed (:mod:`toolkit.audit.watch.verify`,
:attr:`~toolkit.audit.kinds.Proof.RERUN`).
"""
