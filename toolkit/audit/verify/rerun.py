"""Every edit is run before it is printed: the script's ``.py`` files are copied, the edit is made
in the copy, and the copy is audited again in a fresh process from the same seed for the same
iterations (files it reads are found from the same working folder). The edit holds when the
finding is gone, nothing new is found, every gradient of every step before the finding's is the
same (:func:`~toolkit.audit.verify.gradients.same_gradient`), and at that step the tensors it is not about keep their gradient
while those it is about get one. A step is an optimizer's, or an iteration that ends with no
optimizer stepped (the script updates the weights by hand): its gradients are those its last
``backward()`` left, keyed by the iteration."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from toolkit.audit.edit import Edit
from toolkit.audit.files import escaped
from toolkit.audit.findings import ScriptFinding
from toolkit.audit.fixes.script_edits import edited_texts
from toolkit.audit.kinds import SCRIPT_KINDS, Kind
from toolkit.audit.verify import fresh
from toolkit.audit.verify.gradients import same_gradient

__all__ = ["forget_baselines", "load_record", "together", "verify"]

_MAX_FILES = 500


#: how many groups of tensors a script may clip apart (``clip_grad_norm_`` over the encoder
#: and the head, then over the transition model: SPR's), each rescaled by a factor of its own
_CLIPPED_GROUPS = 3


def _differs(ours: list, theirs: list) -> int | None:
    """The index of the first gradient that differs, or ``None``. Positive factors are
    allowed, one per group of tensors a script clips together, up to
    :data:`_CLIPPED_GROUPS`: ``clip_grad_norm_`` rescales the gradients it is given by their
    total norm, which the tensors a fix is about change (a gradient changed in direction, or
    a fourth factor, differs)."""
    if all(same_gradient(a, b) for a, b in zip(ours, theirs)):
        return None
    factors: list[float] = []
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if same_gradient(a, b):
            continue
        if a is None or b is None or a.shape != b.shape:
            return i
        a64, b64 = a.double(), b.double()
        den = float((b64 * b64).sum())
        factor = float((a64 * b64).sum()) / den if den > 0 else 0.0
        if not (factor > 0 and same_gradient(a, b * factor)):
            return i
        if not any(abs(factor - f) <= 1e-5 * max(factor, f) for f in factors):
            factors.append(factor)
        if len(factors) > _CLIPPED_GROUPS:
            return i
    return None


def _aligned(ours: list[dict], theirs: list[dict]) -> tuple[list[dict], list[dict],
                                                               dict[str, str]]:
    """Both runs' gradients keyed by the tensors' names, where an edit moved tensors within
    an optimizer's list (a network copied where it was shared adds its tensors to
    ``model.parameters()``, so a key, ``opt0.0.12``, names another tensor in each run): with
    the map from the first run's keys to those names. Unchanged, with an empty map, where
    every key names one tensor in both runs, or a record gives no names or one name twice."""
    def names(steps: list[dict]) -> dict[str, str] | None:
        seen: dict[str, str] = {}
        for g in steps:
            given = g.get("names")
            if not isinstance(given, dict) or len(set(given.values())) != len(given):
                return None
            seen.update(given)
        return seen

    mine, other = names(ours), names(theirs)
    if mine is None or other is None:
        return ours, theirs, {}
    key_of = {n: k for k, n in other.items()}
    if all(key_of.get(n, k) == k and other.get(k, n) == n for k, n in mine.items()):
        return ours, theirs, {}

    def by_name(steps: list[dict]) -> list[dict]:
        return [{**g, "grads": {g["names"].get(k, k): v for k, v in g["grads"].items()},
                 "idle": [g["names"].get(k, k) for k in g.get("idle", ())]} for g in steps]

    return by_name(ours), by_name(theirs), mine


def load_record(folder: str) -> tuple[dict, list[dict]]:
    """A run's ``report.json`` and ``grads.pt`` as written by ``--record`` (read as hostile:
    plain JSON and tensors only)."""
    report = json.loads(Path(folder, "report.json").read_text(encoding="utf-8"))
    if not isinstance(report, dict) or not isinstance(report.get("findings"), list):
        raise ValueError(f"load_record: {folder!r} holds no report of findings")
    grads = torch.load(Path(folder, "grads.pt"), weights_only=True)
    if not isinstance(grads, list):
        raise ValueError(f"load_record: {folder!r} holds no list of steps")
    return report, grads


def _copy_sources(root: str, into: str) -> None:
    n = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".") and d not in (
            "__pycache__", "node_modules", "venv")]
        for name in filenames:
            if name.endswith(".py"):
                n += 1
                if n > _MAX_FILES:
                    return
                rel = os.path.relpath(os.path.join(dirpath, name), root)
                os.makedirs(os.path.dirname(os.path.join(into, rel)), exist_ok=True)
                shutil.copy2(os.path.join(dirpath, name), os.path.join(into, rel))


def rerun(script: str, args: list[str], edits: list[Edit], steps: int, cwd: str,
          timeout: float | None = None, follow: int = 0
          ) -> tuple[int, dict | None, list[dict], str]:
    """The script, with ``edits`` made in copies, audited for ``steps`` iterations in a fresh
    process (:func:`~toolkit.audit.verify.fresh.run`) in ``cwd`` with no standard input, then
    run on unaudited for ``follow`` iterations more (or to its end); returns its exit status,
    report, gradients and what it printed to stderr.

    The user's files are only read: the script's folder is copied (its ``.py`` files), an edit
    of a file in it is made in the copy, and an edited module that lives elsewhere (found on
    ``sys.path``) is written to a file of its own that the rerun imports in its place."""
    root = os.path.dirname(os.path.abspath(script))
    with tempfile.TemporaryDirectory(prefix="toolkit-audit-") as tmp:
        copy = os.path.join(tmp, "src")
        _copy_sources(root, copy)
        elsewhere: dict[str, str] = {}
        for n, (source, text) in enumerate(edited_texts(edits).items()):
            rel = os.path.relpath(source.path, root)
            if rel.startswith(os.pardir):
                target = os.path.join(tmp, "elsewhere", str(n), os.path.basename(source.path))
                elsewhere[source.path] = target
            else:
                target = os.path.join(copy, rel)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as fh:
                fh.write(source.encode(text))
        rec = os.path.join(tmp, "record")
        mapping = os.path.join(tmp, "elsewhere.json")
        Path(mapping).write_text(json.dumps(elsewhere), encoding="utf-8")
        argv = ["--steps", str(steps), "--follow", str(follow), "--no-verify", "--record", rec,
                "--edited-elsewhere", mapping,
                os.path.join(copy, os.path.relpath(os.path.abspath(script), root)), *args]
        done = fresh.run(fresh.run_module, ["toolkit.audit", argv], cwd=cwd, timeout=timeout)
        if not os.path.exists(os.path.join(rec, "report.json")):
            return done.returncode, None, [], done.stderr
        report, grads = load_record(rec)
        return done.returncode, report, grads, done.stderr


def _why_it_did_not_run(script: str, stderr: str) -> str:
    """The reason a rerun stopped short, from what it printed: stdin it could not read, a
    standard-library module the script's name shadows, else its last line."""
    stem = os.path.splitext(os.path.basename(script))[0]
    if stem in sys.stdlib_module_names:
        return (f"{escaped(os.path.basename(script))} shadows the standard library's {stem} "
                f"module (its folder comes first on sys.path): rename the script")
    if "EOFError" in stderr:
        return "the script reads standard input, which the rerun closes: give its input " \
               "as an argument or a file"
    last = [line for line in stderr.splitlines() if line.strip()][-1:]
    return escaped(last[0].strip()[:200]) if last else "it printed nothing"


_baselines: dict[tuple, tuple[list[dict], dict] | None] = {}


def forget_baselines() -> None:
    """Forget the unedited reruns :func:`verify` made: a new audit in this process may find the
    script at the same path with another text (``--apply`` wrote it)."""
    _baselines.clear()


def _baseline(script: str, args: list[str], steps: int, cwd: str
              ) -> tuple[list[dict], dict] | None:
    """The gradients and the report of the unedited script rerun for ``steps`` iterations,
    every one audited (one rerun per distinct ``steps`` in a process)."""
    key = (os.path.abspath(script), tuple(args), steps, cwd)
    if key not in _baselines:
        _, report, grads, _ = rerun(script, args, [], steps, cwd)
        _baselines[key] = (grads, report) if report is not None and not report.get("error") \
            else None
    return _baselines[key]


def _place(record: dict, i: int) -> tuple[str, int]:
    """Where the ``i``-th entry of a run's ``grads.pt`` stands among the run's steps: an
    optimizer's step by its number (``("step", n)``), an iteration updated by hand by the
    iteration's (``("hand", n)``)."""
    if record.get("hand"):
        return "hand", int(record["iteration"])
    return "step", int(record.get("event", i))


def _unseen_before(grads: list[dict], iteration: int) -> int:
    """The first of the iterations updated by hand, just before ``iteration`` and one after
    the other, whose loss the step audit's rules did not see (a loop updated by hand is
    recorded from its second iteration): a bug found at ``iteration`` may have been there
    already (a target never cut); ``iteration`` itself where there is none."""
    hand = {int(g["iteration"]): g for g in grads if g.get("hand")}
    first = iteration
    while first - 1 in hand and hand[first - 1].get("judged") is False:
        first -= 1
    return first


def _shown(place: tuple[str, int]) -> str:
    """A step's place (:func:`_place`) in words."""
    kind, n = place
    return f"step {n}" if kind == "step" else f"the update by hand of iteration {n}"


def _steps_only(grads: list[dict]) -> list[dict]:
    """The entries of a run's gradients taken at an optimizer's step."""
    return [g for g in grads if not g.get("hand")]


def _first_step(finding: ScriptFinding, report: dict) -> int:
    """The first step at which ``report`` (an audit of every step) shows ``finding`` (the same
    kind, about the same tensors): where the bug began, watched by the first audit or not (a
    new loop's first pass shares an iteration with the last step before it, which a
    ``--steps`` audit does not watch); the finding's own step when it does not."""
    steps = [f.get("step") for f in report.get("findings", ()) if isinstance(f, dict)
             and f.get("kind") == str(finding.kind)
             and tuple(f.get("tensors", ())) == tuple(finding.tensors)]
    return min([finding.step, *(s for s in steps if isinstance(s, int) and s >= 0)])


def _fails(kind: object) -> bool:
    """Whether ``kind``, as a rerun's report gives it, names a failure of the script audit."""
    try:
        return Kind(str(kind)) in SCRIPT_KINDS and Kind(str(kind)).failure
    except ValueError:
        return False


def _edited_run(edits: list[Edit], script: str, args: list[str], steps: int,
                cwd: str, follow: int = 0) -> tuple[dict, list[dict]] | str:
    """The report and gradients of the script audited with ``edits`` made (:func:`rerun`), or
    why it could not be read: it could not be rerun, stopped short, or failed (in its audited
    iterations or in the ``follow`` after them)."""
    try:
        _, report, grads, stderr = rerun(script, args, edits, steps, cwd, follow=follow)
    except (subprocess.TimeoutExpired, OSError, ValueError, RuntimeError, SyntaxError) as err:
        return f"the edited script could not be rerun ({escaped(str(err))})"
    if report is None:
        return ("the edited script did not run to its audited iterations: "
                + _why_it_did_not_run(script, stderr))
    if report.get("error"):
        why = escaped(str(report["error"]))
        if "EOFError" in why:
            why += " (the rerun has no standard input)"
        return f"the edited script fails: {why}"
    return report, grads


def verify(finding: ScriptFinding, others: list[ScriptFinding], script: str, args: list[str],
           grads: list[dict], steps: int, cwd: str, ran_to: int | None = None, *,
           again: bool = False) -> tuple[bool, str]:
    """Whether ``finding.edits`` fix it, by :func:`rerun` (see the module's docstring). Where
    the first audit saw the script run to its end after ``ran_to`` iterations, the edited one
    runs on as far, unaudited: an edit that keeps a graph across iterations (a pool of
    samples no longer cut) fails there, not in the iterations audited again. ``again``: this
    is the rerun that audits as many iterations as the finding's step number."""
    need = max(steps, finding.iteration + 1)
    follow = max(0, ran_to - need) if ran_to is not None else 0
    ran = _edited_run(list(finding.edits), script, args, need, cwd, follow=follow)
    if isinstance(ran, str):
        return False, ran
    report, theirs = ran
    if any(int(g.get("event", i)) != i for i, g in enumerate(_steps_only(grads))):
        # the first audit watched some steps only: steps it did not watch may differ in the
        # edited run (an edit of a later loop changes its first, unwatched, steps), so the
        # comparison is against the unedited script rerun the same way
        try:
            base = _baseline(script, args, need, cwd)
        except (subprocess.TimeoutExpired, OSError, ValueError, RuntimeError) as err:
            return False, f"the script could not be rerun unedited ({escaped(str(err))})"
        if base is None:
            return False, "the script, rerun unedited, did not run to its audited iterations"
        grads, every = base
        began = _first_step(finding, every)
    else:
        began = finding.step
    mine = {(f.kind, tuple(f.tensors)) for f in others if f.failure}
    # by the tensors' names too: an edit that adds a tensor to an optimizer's list moves the
    # keys of those after it (``opt4.0.3``), and another failure keeps its names (CURL's
    # encoder stepped twice, once a plain tensor of CURL's is made a parameter)
    named = {(f.kind, tuple(sorted(f.names))) for f in others if f.failure and f.names}
    for f in report["findings"]:
        if not isinstance(f, dict) or not _fails(f.get("kind")):
            continue
        key = (f["kind"], tuple(f.get("tensors", ())))
        if key == (finding.kind, finding.tensors):
            return False, "the finding is still there in the edited script"
        names = f.get("names")
        if key not in mine and not (isinstance(names, list) and names and (
                f["kind"], tuple(sorted(map(str, names)))) in named):
            return False, f"the edited script shows a new {f['kind']}: {f.get('message')}"
    # steps are matched by their place among all the script's steps (the first audit may
    # have watched only some of them; the rerun watches every one up to the finding's); a
    # finding of an iteration the script updated by hand is checked at that iteration
    s = began
    start: tuple[str, int] = ("step", s)
    if any(g.get("hand") and int(g["iteration"]) == finding.iteration for g in grads):
        start = ("hand", _unseen_before(grads, finding.iteration))
    concerned = set(finding.concerned)
    revived = concerned | {k for f in others if f.kind == "dead" for k in f.tensors}
    grads, theirs, renamed = _aligned(grads, theirs)
    if renamed:
        concerned = {renamed.get(k, k) for k in concerned}
        revived = {renamed.get(k, k) for k in revived}
    theirs_at = {_place(g, i): g["grads"] for i, g in enumerate(theirs)}
    # the tensors whose module ran no forward since their last step, in the edited run (a
    # block stochastic depth dropped at that step): no gradient is their due there
    idle_at = {_place(g, i): set(g.get("idle", ())) for i, g in enumerate(theirs)}
    if start not in theirs_at and start[0] == "step" and s >= need and not again:
        # the first run counted fewer iterations than it took steps (a loop whose iterations
        # it could not tell apart): the edited run audits as many iterations as there were
        # steps up to the finding's, which each iteration takes one of at least
        return verify(finding, others, script, args, grads, s + 1, cwd, ran_to, again=True)
    if start not in theirs_at:
        return False, "the edited script stops before the step the finding is about"
    # a tensor with no gradient before the edit may gain one at any step: one the finding is
    # about (from the first step the bug was there, watched or not), or one another dead
    # finding is about (one cut starved both)
    def dead(x: torch.Tensor | None) -> bool:
        return x is None or not bool(x.any())

    # the first step at which the edit gives a tensor with no gradient one (the fix at work,
    # from the bug's first step, watched or not): after it the runs may part, so the steps
    # are compared up to it, and at it every tensor the edit is not about keeps its gradient
    at = start
    order = {_place(g, i): i for i, g in enumerate(grads)}
    for i, g in enumerate(grads):
        e = _place(g, i)
        # past the step the comparison ends at: by its place in this run's list, or, where
        # this run did not record it, by the step's number (an update by hand ends it)
        past = i > order[at] if at in order else \
            at[0] == "hand" or e[0] == "hand" or e[1] > at[1]
        if past:
            break
        ours, other = g["grads"], theirs_at.get(e)
        if other is None:
            return False, f"the edited script does not reach {_shown(e)}"
        gained = [k for k in ours if k in revived and dead(ours[k]) and not dead(other.get(k))]
        # or a tensor the edit hands to an optimizer (a parameter group added) steps now
        gained += [k for k in other if k not in ours and not dead(other[k])]
        # or, for an edit that cuts a path that trained them, a tensor it is about loses its
        # gradient (the cut at work from the bug's first step, watched or not)
        if finding.extra.get("loses"):
            gained += [k for k in ours if k in concerned and not dead(ours[k])
                       and dead(other.get(k))]
        if gained or ("*" in concerned and e == start):
            at = e
        keys = [k for k in ours if not (e == at and (k in concerned or "*" in concerned))
                and not (k in revived and dead(ours[k]))]
        bad = _differs([ours[k] for k in keys], [other.get(k) for k in keys])
        if bad is not None:
            return False, f"the edit changes the gradient of {keys[bad]} at {_shown(e)}"
    # an edit that cuts a path that trained them ("loses") is proved by the finding gone:
    # they may still train from another path (the prediction's, for the model that guessed a
    # label); any other edit must reach each tensor it is about now, unless its module did not
    # run (a gradient of exact zeros is one: a bias under a difference of means), and move one
    # of them, at least
    if "*" not in concerned and not finding.extra.get("loses"):
        got = {key: theirs_at[at].get(key) for key in concerned if key in theirs_at[at]}
        for key, g in got.items():
            if g is None and key not in idle_at[at]:
                return False, f"{key} still gets no gradient in the edited script"
        if got and not any(bool(g.any()) for g in got.values() if g is not None):
            return False, ("the tensors it is about get no gradient, or one of zeros, in the "
                           "edited script")
    return True, ""


def _clean_with(edits: list[Edit], script: str, args: list[str], steps: int,
                cwd: str) -> str | None:
    """Why the script, with ``edits`` made, is not clean when audited for ``steps`` iterations
    (:func:`rerun`), or ``None`` when it is."""
    ran = _edited_run(edits, script, args, steps, cwd)
    if isinstance(ran, str):
        return ran
    shown = [f for f in ran[0]["findings"] if isinstance(f, dict) and _fails(f.get("kind"))]
    if shown:
        return f"the edited script shows a {shown[0]['kind']}: {shown[0].get('message')}"
    return None


def together(findings: list[ScriptFinding], script: str, args: list[str], steps: int,
             cwd: str) -> tuple[list[ScriptFinding], str]:
    """The findings whose verified edits ``--apply`` may write at once. Each edit was verified
    alone; two fixes of one bug (a clear moved after the step, and a clear added before the
    backward for the stale gradient the same misplaced clear left) can undo each other. With
    more than one finding, the script is rerun with every edit made: when it is clean, all of
    them; else the first finding whose edits alone leave it clean; else the first finding
    alone. Returns them and, when some were left out, why."""
    if len(findings) < 2:
        return findings, ""
    need = max(steps, *(f.iteration + 1 for f in findings))
    why = _clean_with([e for f in findings for e in f.edits], script, args, need, cwd)
    if why is None:
        return findings, ""
    for f in findings:
        if _clean_with(list(f.edits), script, args, need, cwd) is None:
            return [f], (f"with every edit made at once {why}; the edits of the {f.kind} "
                         f"finding alone leave it clean")
    return findings[:1], (f"with every edit made at once {why}; a second audit after this "
                          f"one finds what is left")
