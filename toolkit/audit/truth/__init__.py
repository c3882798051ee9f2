"""The audit's truth: what each loss's gradient really reaches, and the graph read once.

:mod:`.truth` takes one real ``torch.autograd.grad`` per loss of the recorded call (nothing
stepped, no ``.grad`` written); :mod:`.graph` and :mod:`.labels` read the backward graph once
(paths, regions of computed weights, node names); :mod:`.recorded` joins them into the
:class:`~toolkit.audit.truth.recorded.RecordedStep` that every rule reads. :mod:`.proof` says
what a cut leaves reached on those graphs, and :mod:`.cuts` searches the cut a fix proposes.
"""
