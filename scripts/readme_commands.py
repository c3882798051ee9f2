"""Print the commands of README.md's first ``bash`` block, one per line: what ``.ci/run`` runs
first, exactly as a newcomer reads them (the install and showcase line, then the test line)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_commands(text: str) -> list[str]:
    """The non-empty, non-comment lines of the first fenced ``bash`` block of ``text``."""
    match = re.search(r"^```bash\n(.*?)^```", text, flags=re.M | re.S)
    if match is None:
        raise ValueError("README.md has no ```bash block")
    return [line.strip() for line in match.group(1).splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


if __name__ == "__main__":
    sys.stdout.write("".join(f"{c}\n" for c in readme_commands(README.read_text("utf-8"))))
