"""The step audit where people train: callbacks for the frameworks that run the training loop.

- :mod:`toolkit.integrations.lightning`: ``AuditCallback`` for a Lightning ``Trainer``
  (automatic and manual optimization); extra ``[lightning]``;
- :mod:`toolkit.integrations.transformers`: ``AuditCallback`` for the Hugging Face ``Trainer``
  (its ``compute_loss`` against its optimizer); extra ``[transformers]``.

Each audits the real training step on the batch the framework hands it, through
:func:`toolkit.audit_step` (twice, restoring the state), before the framework runs that step,
and raises :class:`~toolkit.GradientLeakError` on a finding (or warns with
:class:`AuditWarning`); training computes the same with and without it. DDP's "parameters
that were not used in producing loss" are explained by :func:`toolkit.explain_unused_parameters`
(a graph analysis, in :mod:`toolkit.lens`).

Importing this package imports neither framework: each module imports its own on use, and
says which extra to install when it is missing.
"""

from toolkit.integrations._common import AuditWarning

__all__ = ["AuditWarning"]
