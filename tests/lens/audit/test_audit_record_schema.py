"""``toolkit audit --record DIR`` writes ``report.json`` through one pydantic model
(:mod:`toolkit.audit.schema`): what is written is validated, a damaged file is refused naming
the field, and the reference page documents every field (issue 71)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

from toolkit.audit.cli import main
from toolkit.audit.edit import Edit as FileEdit
from toolkit.audit.fixes.script_edits import apply_to_text, edit_at
from toolkit.audit.kinds import Kind, Proof
from toolkit.audit.schema import VERSION, Edit, Finding, Options, Report, load_report

SCRIPTS = Path(__file__).parent / "scripts"
PAGE = Path(__file__).parents[3] / "docs" / "reference" / "audit_record.md"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> tuple[Path, Path]:
    """A real record: the DCGAN with a leak, audited for 3 iterations, edits not rerun."""
    folder = tmp_path_factory.mktemp("record")
    script = folder / "train.py"
    shutil.copy(SCRIPTS / "dcgan_leak.py", script)
    assert main(["--no-verify", "--record", str(folder / "rec"), str(script), "--niter", "3"]) == 1
    return folder / "rec", script


def test_a_real_report_is_valid_and_says_what_the_audit_did(recorded):
    folder, script = recorded
    report = load_report(folder)
    assert report.version == VERSION and report.script == "train.py" and report.status == 1
    assert report.args == ["--niter", "3"] and report.command[-3:] == [str(script), "--niter",
                                                                        "3"]
    assert report.options == Options(steps=2, follow=100, watch=None, seed=0, verify=False,
                                     apply=False, diff=False)
    assert report.audited == [0, 1] and report.iterations == 3 and report.steps == 6
    (leak,) = [f for f in report.findings if f.failure]
    assert leak.kind is Kind.LEAK and leak.proof is Proof.ADVICE and leak.verified is None
    # each edit carries the text it replaces, as the file holds it
    text = script.read_text(encoding="utf-8")
    for e in leak.edits:
        assert apply_to_text(text, [FileEdit("train.py", *e.start, *e.end, e.old, e.old)]) == text
    # the same model reads what it wrote, and writes it again unchanged
    raw = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    assert json.loads(report.to_json()) == raw


def test_an_edits_old_text_is_the_span_it_replaces(tmp_path):
    path = tmp_path / "step.py"
    path.write_text("x = 1\r\né = netD(fake)\n", encoding="utf-8")   # columns in UTF-8 bytes
    edit = edit_at(str(path), (2, 10), (2, 14), "fake.detach()")
    assert edit.old == "fake" and edit.to_dict()["old"] == "fake"
    assert str(edit) == "step.py:2: fake -> fake.detach()"


def _damaged(folder: Path, tmp_path: Path, change) -> Path:
    raw = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    change(raw)
    path = tmp_path / "report.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    return path


@pytest.mark.parametrize("change, field, words", [
    (lambda r: r.pop("version"), "version", "Field required"),
    (lambda r: r.update(version=2), "version", "Input should be 1"),
    (lambda r: r["findings"][0].update(kind="leaky"), "findings.0.kind", "Input should be"),
    (lambda r: r["findings"][0].update(kind="pass_through"), "findings.0.kind", "step audit"),
    (lambda r: r["findings"][0].update(failure=not r["findings"][0]["failure"]), "findings.0",
     "failure is"),
    (lambda r: r["findings"][0].update(proof="rerun"), "findings.0", "'rerun' means edits"),
    (lambda r: r["findings"][0].update(proof="graph"), "findings.0", "rerunning it"),
    (lambda r: r["findings"][0]["edits"][0].update(start=[0, 0]), "findings.0.edits.0.start.0",
     "greater than or equal to 1"),
    (lambda r: r["findings"][0]["edits"][0].pop("old"), "findings.0.edits.0.old",
     "Field required"),
    (lambda r: r.update(steps=-1), "steps", "greater than or equal to 0"),
    (lambda r: r.update(surprise=True), "surprise", "Extra inputs are not permitted"),
    (lambda r: r.update(findings={}), "findings", "valid array"),
    (lambda r: r.update(audited=[], not_checked=[]), "", "not_checked does not say so"),
])
def test_a_report_of_the_wrong_shape_is_refused_naming_the_field(recorded, tmp_path, change,
                                                                 field, words):
    path = _damaged(recorded[0], tmp_path, change)
    with pytest.raises(ValidationError) as err:
        load_report(path)
    message = str(err.value)
    assert words in message, message
    if field:
        assert re.search(rf"^{re.escape(field)}\b", message, re.MULTILINE), message


def test_a_script_that_never_calls_backward_records_that_nothing_was_checked(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import torch\nprint(torch.ones(2).sum())\n", encoding="utf-8")
    assert main(["--record", str(tmp_path / "rec"), str(script)]) == 2
    report = load_report(tmp_path / "rec" / "report.json")
    assert report.status == 2 and report.backwards == 0 and report.findings == []
    assert report.audited == []
    assert report.not_checked == ["everything: train.py never called backward()"]


def test_the_json_schema_is_generated_from_the_model():
    schema = Report.model_json_schema()
    assert schema["properties"]["version"]["const"] == VERSION
    kinds = schema["$defs"]["Kind"]["enum"]
    assert set(kinds) == {k.value for k in Kind}
    assert set(schema["$defs"]["Proof"]["enum"]) == {p.value for p in Proof}


@pytest.mark.parametrize("model", [Report, Options, Finding, Edit], ids=lambda m: m.__name__)
def test_the_reference_page_documents_every_field(model: type[BaseModel]):
    page = PAGE.read_text(encoding="utf-8")
    section = page.split(f"## {model.__name__}", 1)
    assert len(section) == 2, f"no section '## {model.__name__}' in {PAGE.name}"
    body = section[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
    rows = set(re.findall(r"^\| `(\w+)` \|", body, re.MULTILINE))
    assert rows == set(model.model_fields), sorted(rows ^ set(model.model_fields))
