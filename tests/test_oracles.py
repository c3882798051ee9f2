"""The lock that vouches for the oracles of held-out cases (``tests/oracles.py``): what its
digest covers, and that the lock on record names only modules with oracle tests."""

from __future__ import annotations

import json

import oracles
import pytest


@pytest.fixture
def tests_folder(tmp_path, monkeypatch):
    """A repository with a ``tests/`` of its own: a module of oracle tests naming a case's
    script, its harness, and a file it does not name."""
    tests = tmp_path / "tests"
    (tests / "cases").mkdir(parents=True)
    (tests / "harness.py").write_text("def run(name): ...\n")
    (tests / "test_case.py").write_text(
        "import pytest\nfrom harness import run\n\n\n@pytest.mark.oracle\n"
        "def test_it():\n    run('bug_twin.py')\n")
    (tests / "cases" / "bug_twin.py").write_text("x = 1\n")
    (tests / "cases" / "other.py").write_text("y = 1\n")
    monkeypatch.setattr(oracles, "TESTS", tests)
    monkeypatch.setattr(oracles, "ROOT", tmp_path)
    monkeypatch.setattr(oracles, "LOCK", tests / "oracles.lock.json")
    monkeypatch.delenv("TOOLKIT_ORACLES", raising=False)
    oracles._by_name.cache_clear()
    oracles._lock.cache_clear()
    yield tests
    oracles._by_name.cache_clear()
    oracles._lock.cache_clear()


@pytest.mark.parametrize(("edited", "changes"), [
    ("cases/bug_twin.py", True), ("harness.py", True), ("test_case.py", True),
    ("cases/other.py", False)])
def test_the_digest_covers_the_module_its_harness_and_the_scripts_it_names(
        tests_folder, edited, changes):
    module = tests_folder / "test_case.py"
    before = oracles.digest(module)
    path = tests_folder / edited
    path.write_text(path.read_text() + "# edited\n")
    oracles._by_name.cache_clear()
    assert (oracles.digest(module) != before) is changes


def test_a_module_is_vouched_for_only_as_locked_on_the_same_torch(tests_folder, monkeypatch):
    module = tests_folder / "test_case.py"
    assert oracles.modules() == [module]
    assert not oracles.vouched(module)   # no lock yet
    lock = {"torch": oracles.TORCH, "modules": {"tests/test_case.py": oracles.digest(module)}}
    oracles.LOCK.write_text(json.dumps(lock))
    assert oracles.vouched(module)
    monkeypatch.setenv("TOOLKIT_ORACLES", "run")
    assert not oracles.vouched(module)
    monkeypatch.delenv("TOOLKIT_ORACLES")
    oracles.LOCK.write_text(json.dumps({**lock, "torch": "0.0.1"}))
    oracles._lock.cache_clear()
    assert not oracles.vouched(module)
    oracles.LOCK.write_text(json.dumps(lock))
    oracles._lock.cache_clear()
    (tests_folder / "cases" / "bug_twin.py").write_text("x = 2\n")
    assert not oracles.vouched(module)


def test_an_unreadable_lock_is_named(tests_folder):
    oracles.LOCK.write_text("[1, 2")
    with pytest.raises(RuntimeError, match=r"oracles\.lock\.json could not be read as JSON"):
        oracles.vouched(tests_folder / "test_case.py")


def test_the_lock_on_record_names_only_modules_with_oracle_tests():
    lock = json.loads(oracles.LOCK.read_text(encoding="utf-8"))
    assert set(lock) == {"torch", "modules"} and lock["modules"]
    assert set(lock["modules"]) <= {oracles.key(m) for m in oracles.modules()}
