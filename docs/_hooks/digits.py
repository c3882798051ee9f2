"""The docs' rule for numbers: at most 4 significant digits, unless it is a seed or a count.

``long_numbers(text)`` lists the numbers of ``text`` that break it. A number with a decimal
point (``0.9092``, ``1.76``, ``3.7e-16``) counts its significant digits, trailing zeros
included (``1.0900`` has 5); integers are seeds, counts, sizes and years and pass, and so do
whole numbers written with a decimal point (``1000.0``, a literal in code). Tokens that
are not quantities pass too: version strings (``2.13.0``), identifiers and run ids that mix
letters and digits (``float32``, ``e12657``, ``20261123T083747Z``), and web addresses (a DOI or
an arXiv id in a link). Used by the site's build
(every built page, as a hook; gallery output) and by ``tests/test_docs.py`` (the Markdown of
every page, the README and the showcase data).
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
            if significant_digits(m.group(1)) > limit and m.group(1).split(".")[1].strip("0")]


_SKIP = re.compile(r"<(script|style)\b.*?</\1>|\b(?:href|src)=\"[^\"]*\"", re.S)


def page_text(html_page: str) -> str:
    """The words a reader sees on a built page: no scripts, styles, tags or link targets."""
    import html

    return html.unescape(re.sub(r"<[^>]+>", " ", _SKIP.sub(" ", html_page)))


def on_post_page(output: str, page, config) -> str:
    """A mkdocs hook: fail the build when a page shows a number longer than the rule allows."""
    if page.file.src_uri.startswith("source/"):  # a source file shown as it is (sources.py)
        return output
    long = long_numbers(page_text(output))
    if long:
        from mkdocs.exceptions import PluginError

        raise PluginError(f"{page.file.src_uri}: numbers with more than {MAX_DIGITS} significant "
                          f"digits: {', '.join(long)} (seeds and counts excepted)")
    return output
