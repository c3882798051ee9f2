"""The latent-imagination case of ``test_truncated_through_a_frozen_model.py`` (held out, kept as
committed), checked as its own last check should have been: that case asks that no
``.detach()`` be left in the frozen block after the edit, which its published twin fails too
(the actor reads ``h.detach()`` there, as Dreamer's actor reads ``stop_gradient(feat)``). Here
the edited script must be the published one, character for character. Written after the rule
(the truncated rule over a network frozen for the policy's loss), so no held-out evidence."""

from __future__ import annotations

from script_audit import applied, assert_trains_as, audit, cli, failures, twins
from test_truncated_through_a_frozen_model import BUGS


def test_the_imagined_state_cut_is_named_and_the_edit_gives_the_published_script(tmp_path):
    published, buggy = BUGS["latent-imagination"]
    folder = twins(tmp_path, published, buggy)
    assert audit(tmp_path, folder / "published.py", "--watch", "1")[0] == 0
    code, report = audit(tmp_path, folder / "train.py", "--watch", "1")
    found = failures(report)
    assert code == 1 and [f["kind"] for f in found] == ["truncated"], report["findings"]
    assert any("actor" in n for n in found[0]["names"]), found[0]["names"]
    applied(folder, "truncated", "--watch", "1")
    assert (folder / "train.py").read_text(encoding="utf-8") == published
    assert cli("--watch", "1", "train.py", cwd=folder).returncode == 0
    assert_trains_as(folder)
