"""The docs' rule for numbers: at most 4 significant digits, unless it is a seed or a count.

``long_numbers(text)`` lists the numbers of ``text`` that break it. A number with a decimal
point (``0.9092``, ``1.76``, ``3.7e-16``) counts its significant digits, trailing zeros
included (``1.0000`` has 5); integers are seeds, counts, sizes and years and pass. Tokens that
are not quantities pass too: version strings (``2.13.0``), identifiers and run ids that mix
letters and digits (``float32``, ``e12657``, ``20261123T083747Z``), and web addresses (a DOI or
an arXiv id in a link). Used by the site's build
(gallery output) and by ``tests/test_docs.py`` (every page, the README and the showcase data).
"""

from __future__ import annotations

import re

MAX_DIGITS = 4

_URL = re.compile(r"<?https?://[^\s>)]+>?|\b(?:doi|arXiv):\S+")
_NUMBER = re.compile(r"(?<![\w.])(\d+\.\d+)(?:[eE][-+]?\d+)?(?!\.\d)")


def significant_digits(mantissa: str) -> int:
    """Significant digits of a decimal mantissa such as ``"0.0910"`` (3) or ``"12.50"`` (4)."""
    digits = mantissa.replace(".", "").lstrip("0")
    return len(digits) if digits else 1


def long_numbers(text: str, limit: int = MAX_DIGITS) -> list[str]:
    """The numbers in ``text`` with more than ``limit`` significant digits."""
    text = _URL.sub(" ", text)  # addresses (DOIs, arXiv ids) are names, not quantities
    return [m.group(0) for m in _NUMBER.finditer(text)
            if significant_digits(m.group(1)) > limit]
