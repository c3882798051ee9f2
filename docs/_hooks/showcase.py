"""The showcase's verdicts and figures on the algorithm pages.

``<!-- showcase: EXPERIMENT -->`` in a page becomes what the showcase found for that experiment:
the run it came from (its commit and the machine that made it), each finding with its verdict
over the seeds ("held in 3 of 3 seeds", "seed-independent") and basis, then the headline figures,
the others folded. The data are
``docs/showcase/EXPERIMENT.json`` and ``docs/showcase/figures/``, copied from a real showcase
run by ``python scripts/docs_showcase.py``; nothing here is typed by hand.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

from mkdocs.exceptions import PluginError

SHOWCASE = Path(__file__).resolve().parents[1] / "showcase"
_MARKER = re.compile(r"<!--\s*showcase:\s*([A-Za-z0-9_]+)\s*-->")
_MARK = {"as predicted": "✓", "not as predicted": "✗", "measured": "·"}


def load(experiment: str) -> dict:
    """The snapshot of one experiment (``docs/showcase/<experiment>.json``)."""
    path = SHOWCASE / f"{experiment}.json"
    if not path.exists():
        raise PluginError(f"showcase: no {path.name} in docs/showcase/ (run "
                          f"`python scripts/docs_showcase.py`)")
    return json.loads(path.read_text(encoding="utf-8"))


def machine_words(machine: dict | None) -> str:
    """``", on an AMD EPYC (2 cores, Linux x86_64)"``: the machine that made the run, as the
    snapshot recorded it (``scripts/docs_showcase.py``); empty when it did not."""
    if not machine:
        return ""
    if machine.get("cpu"):
        cores = f"{machine['cores']} cores, " if machine.get("cores") else ""
        return f", on {_escape(machine['cpu'])} ({cores}{_escape(machine.get('system') or '')})"
    return f", on {_escape(machine['system'])}" if machine.get("system") else ""


def _escape(text: str) -> str:
    """Text as Markdown that shows it verbatim (no emphasis from ``*`` or ``_``)."""
    return html.escape(text, quote=False).replace("*", r"\*").replace("_", r"\_")


def render(record: dict, prefix: str) -> str:
    """Markdown for one experiment's findings and figures; ``prefix`` leads to ``docs/``."""
    run = record["run"]
    seeds = ", ".join(str(s) for s in run["seeds"])
    commit = f", commit `{run['commit']}`" if run.get("commit") else ""
    lines = [
        f"From the showcase run `{run['group']}` (`toolkit run {run['config']}`: the "
        f"QUICK params of each experiment, seeds {seeds}, {run['device']}, {run['dtype']}, torch "
        f"{run['versions']['torch']}{commit}){machine_words(run.get('machine'))}. Numbers "
        f"are the mean [range] over the seeds; the verdict says in how many seeds the "
        f"prediction held.", ""]
    for f in record["findings"]:
        mark = _MARK.get(f["label"], "·")
        basis = f" <br>*Basis:* {_escape(f['basis'])}" if f.get("basis") else ""
        lines.append(f"- {mark} **{f['label']}** ({f['seeds_note']}): {_escape(f['text'])}"
                     f"{basis}")
    lines.append("")
    figures = record["figures"]
    headline = [f for f in figures if f["headline"]] or figures[:2]
    rest = [f for f in figures if f not in headline]
    for fig in headline:
        lines += _figure(fig, prefix)
    if rest:
        lines += [f'??? note "More figures from this run ({len(rest)})"', ""]
        lines += ["    " + line if line else "" for fig in rest for line in _figure(fig, prefix)]
    return "\n".join(lines)


def _figure(fig: dict, prefix: str) -> list[str]:
    alt = _escape(fig["caption"].split(":")[0].split(".")[0])
    return [f"![{alt}]({prefix}showcase/figures/{fig['file']})", "",
            f"*{_escape(fig['caption'])}*", ""]


def on_page_markdown(markdown: str, page, config, files) -> str:
    """Replace each ``<!-- showcase: EXPERIMENT -->`` marker with its findings and figures."""
    prefix = "../" * page.file.src_uri.count("/")
    return _MARKER.sub(lambda m: render(load(m.group(1)), prefix), markdown)
