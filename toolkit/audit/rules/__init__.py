"""The audit's rules: the recorded step read once (:mod:`.recorded`, :mod:`.graph`,
:mod:`.labels`), then one module per kind of finding, each a function of the recorded step that
returns typed findings: :mod:`.leaks`, :mod:`.targets`, :mod:`.dead`, :mod:`.carried`,
:mod:`.held`, :mod:`.shared`, :mod:`.replaced`; and :mod:`.notes` (information).
"""
