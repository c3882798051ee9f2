"""What the repository says about itself stays true: CONTRIBUTING's layout matches the tree,
every repository path the README, CONTRIBUTING, pyproject.toml and the docs name exists, and
the commit-msg hook refuses a subject line over 72 characters."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONTRIBUTING = ROOT / "CONTRIBUTING.md"
HOOK = ROOT / ".githooks" / "commit-msg"


# --- CONTRIBUTING's layout ------------------------------------------------------------------------


def layout() -> dict[str, int]:
    """The paths CONTRIBUTING's layout names, each with its line in CONTRIBUTING.md: the first
    word of every line of the ``text`` block under "## The layout" that does not start with a
    space (an indented line goes on with the description above it); folders end in ``/``."""
    lines = CONTRIBUTING.read_text(encoding="utf-8").splitlines()
    start = lines.index("## The layout")
    fence = next(i for i in range(start, len(lines)) if lines[i].startswith("```"))
    assert lines[fence] == "```text", f"CONTRIBUTING.md:{fence + 1}: the layout is a text block"
    paths = {}
    for number in range(fence + 1, len(lines)):
        line = lines[number]
        if line.startswith("```"):
            return paths
        if line and not line[0].isspace():
            paths[line.split()[0]] = number + 1
    raise AssertionError("CONTRIBUTING.md: the layout block is not closed")


def _tracked() -> list[str]:
    """The files git tracks (with ``git ls-files``), or a skip where there is no git checkout."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed: the tracked folders cannot be listed")
    done = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"not a git checkout: {done.stderr.strip()}")
    return [name for name in done.stdout.split("\0") if name]


def _line_for(folder: str, named: dict[str, int]) -> str:
    """Where a missing folder's line goes: after its parent's line, or at the end."""
    parent = folder.rstrip("/").rpartition("/")[0]
    if parent + "/" in named:
        return f"after the line of {parent}/ (CONTRIBUTING.md:{named[parent + '/']})"
    return f"at the end of the block (its last line is CONTRIBUTING.md:{max(named.values())})"


def test_the_layout_names_only_paths_that_exist() -> None:
    missing = [f"CONTRIBUTING.md:{line}: {path}" for path, line in layout().items()
               if not (ROOT / path).exists() or path.endswith("/") != (ROOT / path).is_dir()]
    assert not missing, ("CONTRIBUTING.md's layout names paths that do not exist (a folder ends "
                         "in '/'): fix or remove their lines\n  " + "\n  ".join(missing))


def test_the_layout_names_every_package_folder_and_top_level_folder() -> None:
    named = layout()
    packages = [f"{folder.relative_to(ROOT).as_posix()}/"
                for parent in ("toolkit", "toolkit/lab", "toolkit/lens")
                for folder in sorted((ROOT / parent).iterdir())
                if (folder / "__init__.py").is_file()]
    top = sorted({f"{name.split('/')[0]}/" for name in _tracked() if "/" in name})
    wanted = ["toolkit/", *packages,
              *(f for f in top if not f.startswith(".") and f != "results/")]
    missing = [folder for folder in wanted if folder not in named]
    assert not missing, "\n".join(
        f"CONTRIBUTING.md's layout (the text block under '## The layout') does not name "
        f"{folder}: add a line '{folder:<26}<what lives there>' {_line_for(folder, named)}"
        for folder in missing)


def test_the_layout_parser_reads_first_words_of_unindented_lines() -> None:
    named = layout()
    assert {"toolkit/", "toolkit/core/", "toolkit/audit/", "tests/"} <= set(named)
    assert all(" " not in path for path in named)
    lines = CONTRIBUTING.read_text(encoding="utf-8").splitlines()
    assert lines[named["toolkit/core/"] - 1].startswith("toolkit/core/ ")


# --- every path the documentation names -----------------------------------------------------------

TEXTS = [ROOT / "README.md", CONTRIBUTING, ROOT / "pyproject.toml",
         *sorted((ROOT / "docs").rglob("*.md"))]
# Paths that are named but not in the repository, each with why; the test fails when one of
# them is no longer named anywhere, so that this list cannot outlive its reason.
NOT_IN_THE_REPOSITORY = {
    "results/": "run outputs, written by a run and git-ignored (only results/README.md is "
                "tracked, and it is checked)",
}


def _roots() -> list[str]:
    """The top-level folders CONTRIBUTING's layout names (which the test above holds to every
    folder git tracks): a path in the text that starts with one of them is a repository path."""
    return sorted({path.split("/")[0] for path in layout() if path.endswith("/")})


def named_paths(text: str) -> list[tuple[int, str]]:
    """``(line, path)`` for every repository path in ``text``, code blocks included: a word that
    starts with a top-level folder and a ``/`` (``toolkit/lab/measure.py``, ``.ci/run``,
    ``configs/*.toml``, ``configs/<name>.toml``), not preceded by another path part."""
    roots = "|".join(re.escape(root) for root in _roots())
    pattern = re.compile(rf"(?<![\w/.-])(?:{roots})/(?:[\w.*/-]|<[^<>\n]*>)*")
    return [(number, match.rstrip(".")) for number, line in enumerate(text.splitlines(), 1)
            for match in pattern.findall(line)]


def exists(path: str) -> bool:
    """Whether ``path`` is in the repository: a ``*`` or a ``<placeholder>`` stands for any
    name, and at least one file or folder must match."""
    pattern = re.sub(r"<[^<>]*>", "*", path)
    if "*" in pattern:
        return next(ROOT.glob(pattern.rstrip("/")), None) is not None
    return (ROOT / pattern).exists()


def test_every_path_the_docs_name_exists() -> None:
    missing, excused = [], set()
    for text in TEXTS:
        for line, path in named_paths(text.read_text(encoding="utf-8")):
            reason = next((p for p in NOT_IN_THE_REPOSITORY if path.startswith(p)), None)
            if reason is not None and not exists(path):
                excused.add(reason)
            elif not exists(path):
                missing.append(f"{text.relative_to(ROOT)}:{line}: {path}")
    assert not missing, "these paths do not exist; fix the text (or the path):\n  " + (
        "\n  ".join(missing))
    assert excused == set(NOT_IN_THE_REPOSITORY), (
        f"NOT_IN_THE_REPOSITORY excuses paths no text names any more: "
        f"{sorted(set(NOT_IN_THE_REPOSITORY) - excused)}; remove them")


def test_named_paths_finds_repository_paths_and_nothing_else() -> None:
    text = ("see `toolkit/lab/measure.py`, .ci/run and configs/<name>.toml.\n"
            "python scripts/docs_showcase.py configs/*.toml # tests/test_plugins.py::test_x\n"
            "not ../reference/algorithms.md, sklearn/mixture/tests/test_x.py or https://x/docs/y")
    assert named_paths(text) == [(1, "toolkit/lab/measure.py"), (1, ".ci/run"),
                                 (1, "configs/<name>.toml"), (2, "scripts/docs_showcase.py"),
                                 (2, "configs/*.toml"), (2, "tests/test_plugins.py")]
    assert exists("configs/<name>.toml") and exists("examples/plot_<name>_<what>.py")
    assert not exists("configs/<name>.yaml") and not exists("tests/test_packaging.py")


# --- the commit-msg hook --------------------------------------------------------------------------


def commit_msg(tmp_path: Path, message: str) -> subprocess.CompletedProcess[str]:
    """The hook, run as git runs it: on a file holding the message."""
    path = tmp_path / "COMMIT_EDITMSG"
    path.write_text(message, encoding="utf-8")
    return subprocess.run([sys.executable, str(HOOK), str(path)], capture_output=True,
                          text=True, timeout=60)


def test_the_hook_is_an_executable_python_script() -> None:
    assert HOOK.read_text(encoding="utf-8").startswith("#!/usr/bin/env python3\n")
    assert HOOK.stat().st_mode & stat.S_IXUSR, f"{HOOK.relative_to(ROOT)}: chmod +x it"


@pytest.mark.parametrize("message", [
    "Add the DiCE gallery script\n",
    "x" * 72 + "\n\n" + "a body line may be as long as it needs to be " * 5 + "\n",
    "ç" * 72 + "\n",  # characters, not bytes
    "# Please enter the commit message\n\nAdd a subject after comments\n# and a comment\n",
    "\n\n  Add a subject after blank lines  \n",
    "fixup! " + "x" * 72 + "\n",
    "squash! fixup! " + "x" * 72 + "\n",
    'Revert "' + "x" * 72 + '"\n',
    "Merge branch '" + "feature/" * 12 + "' into main\n",
    "Merge remote-tracking branch 'origin/" + "x" * 70 + "'\n",
    "Fix it\n# ------------------------ >8 ------------------------\n" + "y" * 100 + "\n",
], ids=["short", "72", "unicode", "comments", "blank-lines", "fixup", "squash-fixup", "revert",
        "merge", "merge-remote", "verbose-diff"])
def test_the_hook_accepts(tmp_path: Path, message: str) -> None:
    done = commit_msg(tmp_path, message)
    assert done.returncode == 0, done.stderr


TWO_LINES = ("Add a subject that goes on", "over a second line, which git joins to the first")
MERGE_BY_HAND = "Merge the two configs into one: not a subject git wrote, so it is checked"


@pytest.mark.parametrize(("message", "subject"), [
    ("x" * 73 + "\n", "x" * 73),
    ("\n".join(TWO_LINES) + "\n\nbody\n", " ".join(TWO_LINES)),
    ("fixup! " + "x" * 80 + "\n", "x" * 80),
    ('Revert "' + "x" * 73 + '"\n', "x" * 73),
    (MERGE_BY_HAND + "\n", MERGE_BY_HAND),
], ids=["73", "first-paragraph", "fixup", "revert", "merge-by-hand"])
def test_the_hook_refuses_a_long_subject_naming_limit_and_length(
        tmp_path: Path, message: str, subject: str) -> None:
    done = commit_msg(tmp_path, message)
    assert done.returncode == 1
    assert f"is {len(subject)} characters; the limit is 72" in done.stderr, done.stderr
    assert f"\n  {subject}\n" in done.stderr
    assert "CONTRIBUTING.md" in done.stderr and "COMMIT_EDITMSG" in done.stderr


@pytest.mark.parametrize("message", ["", "\n\n", "# only a comment\n", "   \n# git's help\n"],
                         ids=["empty", "blank", "comment", "blank-and-comment"])
def test_the_hook_refuses_an_empty_subject(tmp_path: Path, message: str) -> None:
    done = commit_msg(tmp_path, message)
    assert done.returncode == 1
    assert "the subject line is empty" in done.stderr, done.stderr


def test_the_documented_command_installs_the_hook(tmp_path: Path) -> None:
    """`git config core.hooksPath .githooks`, as CONTRIBUTING says, in a fresh repository that
    holds the hook: git then refuses a long subject and takes a short one."""
    command = "git config core.hooksPath .githooks"
    assert f"```bash\n{command}\n```" in CONTRIBUTING.read_text(encoding="utf-8")
    if shutil.which("git") is None or shutil.which("python3") is None:
        pytest.skip("git and python3 are needed to run the hook as git does")
    repo = tmp_path / "repo"
    (repo / ".githooks").mkdir(parents=True)
    shutil.copy2(HOOK, repo / ".githooks" / "commit-msg")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_NOSYSTEM="1", HOME=str(tmp_path), GIT_AUTHOR_NAME="t",
               GIT_AUTHOR_EMAIL="t@example.org", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@example.org")

    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True,
                              timeout=60)

    assert git("init", "-q").returncode == 0
    assert git(*command.split()[1:]).returncode == 0
    long = git("commit", "-q", "--allow-empty", "-m", "y" * 80)
    assert long.returncode != 0 and "is 80 characters; the limit is 72" in long.stderr
    short = git("commit", "-q", "--allow-empty", "-m", "Add a short subject", "-m", "Why.")
    assert short.returncode == 0, short.stderr


# --- no code run from text ----------------------------------------------------------------------


def test_the_toolkit_calls_no_eval_or_exec() -> None:
    """The audit reads users' code and writes edits of it: what it runs is the user's code as
    compiled functions, never text handed to ``eval`` or ``exec`` (nor a method named so: the
    same search a reviewer runs, ``git grep -nE "\\b(eval|exec)\\("``)."""
    call = re.compile(r"\b(eval|exec)\(")
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
             for path in sorted((ROOT / "toolkit").rglob("*.py"))
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if call.search(line)]
    assert not found, "\n".join(found)
