"""Every fix the audit prints over the corpus, applied by program and trained (issue 53).

For each bug case the audit's findings carry their fix as edits of the user's code
(:class:`toolkit.audit.fixes.edits.Edit`: the expression at the printed line, and what to write
instead). The harness writes every edit of every failure into a copy of the case's source file
(the real-code corpus here, and the ``audit_corpus`` experiment's reproductions),
loads the copy, and trains the edited step the way the audit ran it, twice, with real
``backward()`` on every call (each loss alone, gradients cleared in between). It checks:

- every failure the audit prints with a line has its edits, and the printed ``edit:`` lines
  are those edits;
- the edited step trains: no backward fails (a state carried into the next call would);
- on every call, every tensor each loss's optimizer steps gets the gradient the published
  fix (the bug's fixed twin, built from the unedited source) gives it;
- the audit of the edited step finds nothing: the finding is gone and no new one appears.
"""

from __future__ import annotations

import importlib.util
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from realcode_common import RealCase, named, stepped_by
from test_real_code import CASES, TWINS, _audited, _build, _failures

from experiments.audit_corpus import cases as experiment_cases
from experiments.audit_corpus.cases import BUGS as EXPERIMENT_BUGS
from toolkit import audit_step
from toolkit.audit.fixes.edits import apply_edits

#: end to end: each case's file is written with the printed edits, imported and trained (about
#: 20 s of the default suite's 90 on two cores); CI's ``-m slow`` step runs every case
pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
#: bugs whose twin is not this step fixed (BYOL's README usage against the library's default
#: layer): the reference is the bug's own step, whose tensors stepped in vain the fix leaves
#: out of the optimizer, every other gradient as it was
_SELF_REFERENCE = {"byol_readme"}


def _module_of(name: str) -> Path:
    """The corpus file that defines case ``name``."""
    for path in sorted(HERE.glob("realcode_*.py")):
        if path.name != "realcode_common.py" and f'"{name}"' in path.read_text("utf-8"):
            module = sys.modules.get(path.stem)
            if module is not None and name in getattr(module, "CASES", {}):
                return path
    raise LookupError(name)


def _edited(name: str, edits: list[Any], folder: Path) -> Any:
    """The case builder of ``name`` from a copy of its file with ``edits`` written in."""
    path = _module_of(name)
    files = {e.file for e in edits}
    assert files <= {path.name}, f"edits outside {path.name}: {sorted(files)}"
    target = folder / path.name
    target.write_text(apply_edits(path.read_text("utf-8"), edits), "utf-8")
    return _load(target, f"edited_{path.stem}_{name}").CASES[name]


def _load(path: Path, name: str) -> Any:
    """The module of file ``path``, as ``name`` (known to ``sys.modules`` while it runs, as
    a dataclass in it needs)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[name]
    return module


def _train(case: RealCase, calls: int = 2) -> list[dict[str, dict[str, torch.Tensor | None]]]:
    """Each call's gradients, by loss and by the name of each tensor its optimizer steps,
    from real ``backward()`` on every call (the graph freed after each call's last loss)."""
    names = named(case)
    tensors = [t for m in case.modules.values() for t in m.parameters()]
    tensors += list(case.tensors.values())
    out = []
    for _ in range(calls):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            result = case.step()
        losses = dict(result) if isinstance(result, dict) else {"loss": result}
        grads: dict[str, dict[str, torch.Tensor | None]] = {}
        for i, (loss_name, loss) in enumerate(losses.items()):
            for t in tensors:
                t.grad = None
            if loss.requires_grad:
                loss.backward(retain_graph=i < len(losses) - 1)
            optimizer = (case.optimizers[loss_name] if isinstance(case.optimizers, dict)
                         else case.optimizers)
            grads[loss_name] = {names.get(id(p), f"<{i}>"): None if p.grad is None
                                else p.grad.detach().clone()
                                for i, p in enumerate(stepped_by(optimizer))}
        for t in tensors:
            t.grad = None
        out.append(grads)
    return out


def _same(found: list[dict[str, dict[str, Any]]], want: list[dict[str, dict[str, Any]]],
          dropped: frozenset[str] = frozenset()) -> list[str]:
    """What differs between two runs' gradients, in words; ``dropped``: tensors the reference
    steps and the fix no longer does."""
    wrong = []
    for call, (a, b) in enumerate(zip(found, want), 1):
        if set(a) != set(b):
            return [f"call {call}: losses {sorted(a)} != {sorted(b)}"]
        for loss in a:
            if set(a[loss]) != set(b[loss]) - dropped:
                wrong.append(f"call {call}, loss {loss}: stepped {sorted(set(a[loss]) ^ set(b[loss]))}")
                continue
            for tensor, g in a[loss].items():
                h = b[loss][tensor]
                if (g is None) != (h is None) or (
                        g is not None and not torch.allclose(g, h, rtol=1e-4, atol=1e-6)):
                    wrong.append(f"call {call}, loss {loss}: {tensor}")
    return wrong


@pytest.mark.parametrize("name", sorted(TWINS))
def test_every_printed_fix_applied_trains_as_the_published_fix(name: str, tmp_path: Path,
                                                               seed: int) -> None:
    _, audit = _audited(name, seed)
    failures = _failures(audit)
    missing = [type(f).__name__ for f in failures if f.lines and not f.edits]
    assert not missing, f"fixes with a line but no edit: {missing}\n{audit}"
    edits = list(dict.fromkeys(e for f in failures for e in f.edits))
    assert edits, str(audit)
    text = str(audit)
    assert all(f"edit: {e}" in text for e in edits)
    build = _edited(name, edits, tmp_path)
    try:  # each run from its builder's seed: the step's own random draws match
        found = _train(build(seed))
    except RuntimeError as err:
        pytest.fail(f"the edited step does not train: {err}\n{audit}")
    want = _train(_build(name if name in _SELF_REFERENCE else TWINS[name], seed))
    dropped = frozenset(d.parameter for d in audit.dead) if name in _SELF_REFERENCE else \
        frozenset()
    wrong = _same(found, want, dropped)
    assert not wrong, f"gradients that differ from the published fix: {wrong[:8]}\n{audit}"
    case = build(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        again = audit_step(case.step, case.optimizers, modules=case.modules)
    assert again.ok, f"the edited step still fails the audit:\n{again}"


def _experiment_case(build: Any, fixed: bool, seed: int) -> RealCase:
    """A case of the ``audit_corpus`` experiment as a :class:`RealCase` (its modules name the
    tensors), built from ``seed``."""
    torch.manual_seed(seed)
    case = build(fixed)
    return RealCase(case.name, "", "", "correct" if fixed else case.category, case.step,
                    case.optimizers, case.modules)


@pytest.mark.parametrize("name", sorted(EXPERIMENT_BUGS))
def test_every_printed_fix_of_the_experiments_corpus_trains_as_its_fixed_twin(
        name: str, tmp_path: Path, seed: int) -> None:
    bug = _experiment_case(EXPERIMENT_BUGS[name], False, seed)
    audit = audit_step(bug.step, bug.optimizers)
    failures = _failures(audit)
    assert failures and all(f.edits for f in failures), str(audit)
    edits = list(dict.fromkeys(e for f in failures for e in f.edits))
    assert {e.file for e in edits} == {"cases.py"}
    text = str(audit)
    assert all(f"edit: {e}" in text for e in edits)
    target = tmp_path / "cases.py"
    target.write_text(apply_edits(Path(experiment_cases.__file__).read_text("utf-8"), edits),
                      "utf-8")
    module = _load(target, f"edited_cases_{name}")
    try:
        found = _train(_experiment_case(module.BUGS[name], False, seed))
    except RuntimeError as err:
        pytest.fail(f"the edited step does not train: {err}\n{audit}")
    wrong = _same(found, _train(_experiment_case(EXPERIMENT_BUGS[name], True, seed)))
    assert not wrong, f"gradients that differ from the fixed twin: {wrong[:8]}\n{audit}"
    edited = _experiment_case(module.BUGS[name], False, seed)
    again = audit_step(edited.step, edited.optimizers)
    assert again.ok, f"the edited step still fails the audit:\n{again}"


def test_the_harness_covers_every_bug_of_the_corpus() -> None:
    bugs = {name for name in CASES if _build(name, 0).truth != "correct"}
    assert bugs == set(TWINS)


def _names_this_package(edit: Any) -> bool:
    """Whether ``edit`` writes this package into the user's file: its ``stop_gradient`` (one
    the user's line held already, kept as it was, aside) or an import of it."""
    return (edit.new.count("stop_gradient") > edit.old.count("stop_gradient")
            or any("toolkit" in i for i in edit.imports)
            or "import toolkit" in edit.new or "from toolkit" in edit.new)


@pytest.mark.parametrize("name", sorted(TWINS))
def test_no_printed_edit_writes_this_package_into_the_users_code(name: str, seed: int) -> None:
    # issue 71: edits in the user's idiom, plain PyTorch (.detach(), torch.no_grad(), ...)
    _, audit = _audited(name, seed)
    edits = [e for f in _failures(audit) for e in f.edits]
    assert not [str(e) for e in edits if _names_this_package(e)], str(audit)


@pytest.mark.parametrize("name", sorted(EXPERIMENT_BUGS))
def test_no_printed_edit_of_the_experiments_corpus_writes_this_package(name: str,
                                                                        seed: int) -> None:
    bug = _experiment_case(EXPERIMENT_BUGS[name], False, seed)
    audit = audit_step(bug.step, bug.optimizers)
    edits = [e for f in _failures(audit) for e in f.edits]
    assert not [str(e) for e in edits if _names_this_package(e)], str(audit)
