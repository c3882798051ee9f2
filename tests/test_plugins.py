"""Experiments are plugins: the built-in ones and a user's own package, found through the
``toolkit.experiments`` entry-point group, and the installed distribution has no top-level
``experiments`` package to shadow a user's own."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
USER_PACKAGE = Path(__file__).parent / "fixtures" / "user_package"
BUILTIN = sorted(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
                 ["entry-points"]["toolkit.experiments"])


def _python(*args: str, path: Path | None = None, cwd: Path | None = None
            ) -> subprocess.CompletedProcess[str]:
    """Python as a user runs it: the installed toolkit (not the repository folder on the
    path, where the folder `experiments/` would be importable), plus ``path``."""
    env = dict(os.environ)
    env.pop("TOOLKIT_EXPERIMENTS_PATH", None)
    env["PYTHONPATH"] = str(path or "")
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                          cwd=cwd or REPO, timeout=300)


@pytest.fixture(scope="module")
def installed_user_package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The user's package, installed by pip (with its entry point) into a folder of its own."""
    target = tmp_path_factory.mktemp("site")
    build = tmp_path_factory.mktemp("src") / "user_package"
    import shutil

    shutil.copytree(USER_PACKAGE, build)
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                           "--no-build-isolation", "--no-index", "--target", str(target),
                           str(build)], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        pytest.skip(f"cannot build the user package here: {done.stderr.strip()[-300:]}")
    return target


def test_builtin_experiments_are_declared_and_experiments_is_not_a_package(tmp_path: Path
                                                                            ) -> None:
    code = ("import importlib.metadata as m, importlib.util as u, json\n"
            "names = sorted(e.name for e in m.entry_points(group='toolkit.experiments'))\n"
            "print(json.dumps([names, u.find_spec('experiments') is None]))\n")
    # from another folder, as a user's script runs: `experiments` is not importable
    done = _python("-c", code, cwd=tmp_path)
    import json

    names, missing = json.loads(done.stdout)
    assert set(BUILTIN) <= set(names) and missing, done.stderr
    assert "showcase" in BUILTIN  # an experiment like the others, composing them


def test_every_package_folder_is_listed_for_installation() -> None:
    tool = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = {".".join(p.parent.relative_to(REPO).parts)
             for p in (REPO / "toolkit").rglob("__init__.py")}
    experiment_packages = {p.parent.name for p in (REPO / "experiments").glob("*/__init__.py")}
    assert found | {"stop_gradient_experiments"} | {
        f"stop_gradient_experiments.{name}" for name in experiment_packages} == set(
        tool["packages"])
    assert tool["package-dir"] == {"stop_gradient_experiments": "experiments"}
    modules = {p.stem for p in (REPO / "experiments").glob("*.py")
               if not p.stem.startswith("_")}
    # every experiment, a module or a package, is declared, and nothing else
    assert modules | experiment_packages == set(BUILTIN)


@pytest.mark.slow
def test_a_user_package_adds_an_experiment(installed_user_package: Path,
                                           tmp_path: Path) -> None:
    listed = _python("-m", "toolkit", "list", path=installed_user_package)
    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[0] for line in listed.stdout.splitlines() if line.startswith("  ")}
    assert {"quadratic_target", *BUILTIN} <= rows
    config = tmp_path / "probe.toml"
    config.write_text('experiment = "quadratic_target"\ndtype = "float64"\n'
                      '[params]\nn_steps = 6\n')
    done = _python("-m", "toolkit", "run", str(config), "--out", str(tmp_path / "r"),
                   path=installed_user_package)
    assert done.returncode == 0, done.stderr
    (run_dir,) = (tmp_path / "r" / "quadratic_target").iterdir()
    import json

    findings = json.loads((run_dir / "findings.json").read_text())["findings"]
    (finding,) = findings["quadratic_target"]
    assert finding["verdict"] is True  # the closed form, from the user's own findings()
    assert (run_dir / "figures" / "w.png").is_file()  # the user's own figures()
    # the user's description and story, as the run wrote them into meta.json
    html = (run_dir / "report.html").read_text()
    assert "A value fitted toward a blocked target" in html and "quadratic.target" in html


def test_the_toolkit_never_imports_an_experiment_by_name() -> None:
    """The CLI composes and the runner receives: no module under toolkit/ names the built-in
    experiments' package (the registry finds them through their entry points)."""
    import ast

    for path in (REPO / "toolkit").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module":
                names += [a.value for a in node.args if isinstance(a, ast.Constant)]
            assert not [n for n in names if str(n).split(".")[0] in
                        ("experiments", "stop_gradient_experiments")], path


@pytest.mark.slow  # a subprocess per experiment
def test_every_experiment_runs_as_a_script(tmp_path: Path) -> None:
    for name in BUILTIN:
        module = REPO / "experiments" / f"{name}.py"
        if module.is_file():
            source = module.read_text(encoding="utf-8")
            assert 'if __name__ == "__main__":' in source and "run_module(__name__)" in source, name
        else:  # an experiment with modules of its own is a package; -m runs its __main__
            source = (REPO / "experiments" / name / "__main__.py").read_text(encoding="utf-8")
            assert f'run_module("stop_gradient_experiments.{name}")' in source, name
    done = _python("-m", "stop_gradient_experiments.dice", "--out", str(tmp_path),
                   "--no-report", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "complete" in done.stdout and "as predicted" in done.stdout
    (run_dir,) = (tmp_path / "dice").iterdir()
    assert (run_dir / "findings.json").is_file() and not (run_dir / "report.html").exists()
