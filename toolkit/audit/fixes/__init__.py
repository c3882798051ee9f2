"""The audit's fixes: where a fix goes in the user's code (:mod:`.location`, :mod:`.built`),
the fix as edits of that code (:mod:`.edits`, :mod:`.optimizer_edits`), and its proof
(:mod:`.proof`).
"""
