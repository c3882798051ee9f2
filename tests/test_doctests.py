"""The examples in the docstrings run and print what they say (every module of the toolkit)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import toolkit

MODULES = sorted(m.name for m in pkgutil.walk_packages(toolkit.__path__, "toolkit.")
                 if not m.name.endswith("__main__"))


#: modules that import an optional extra (``[lightning]``, ``[transformers]``)
EXTRAS = {"toolkit.integrations.lightning": "lightning",
          "toolkit.integrations.transformers": "transformers"}


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    if name in EXTRAS:
        pytest.importorskip(EXTRAS[name], reason=f"needs the [{EXTRAS[name]}] extra: "
                            f"pip install -e \".[{EXTRAS[name]}]\"")
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS,
                             verbose=False)
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} examples failed"
