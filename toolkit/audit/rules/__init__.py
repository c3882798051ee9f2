"""The audit's rules: one module per kind of finding, each a function of the recorded step
(:class:`~toolkit.audit.truth.recorded.RecordedStep`) that returns typed findings:
:mod:`.leaks`, :mod:`.targets`, :mod:`.dead`, :mod:`.carried`, :mod:`.held`, :mod:`.shared`,
:mod:`.replaced`; and :mod:`.notes` (information). The rules that only a running script
shows, judged at each of its steps, are :mod:`.running`'s.
"""
