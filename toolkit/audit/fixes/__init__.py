"""The audit's fixes: a proved cut written at its place in the user's code (:mod:`.location`),
the line that builds an optimizer (:mod:`.built`), and the fix as edits of that code
(:mod:`.edits`, :mod:`.optimizer_edits`).
"""
