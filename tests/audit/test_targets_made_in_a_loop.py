"""A line that makes a target at each pass of a loop (SwAV's codes, one per crop assigned) is
one finding, named as the script holds the target (``q``), whichever pass's target the graph
search meets first: the order of the targets is autograd's, never the tensors' addresses, so
every run of the audit reports the same finding."""

from __future__ import annotations

import textwrap

from script_audit import audit, failures

SCRIPT = textwrap.dedent('''\
    import torch
    import torch.nn.functional as F
    from torch import nn

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 5))
    opt = torch.optim.SGD(net.parameters(), lr=0.1)


    def codes(scores):
        q = torch.exp(scores / 0.05)
        return q / q.sum(dim=1, keepdim=True)


    for step in range(4):
        x = torch.randn(2 * 16, 6)
        out = net(x)
        loss = 0
        for crop in (0, 1):
            q = codes(out[16 * crop:16 * (crop + 1)])
            p = out[16 * (1 - crop):16 * (2 - crop)]
            loss = loss - (q * F.log_softmax(p / 0.1, dim=1)).sum(1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    ''')


def test_one_finding_named_as_the_script_holds_the_target(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    reports = [audit(tmp_path / f"run{i}", script, "--steps", "2") for i in range(2)]
    for code, report in reports:
        assert code == 1
        (found,) = [f for f in failures(report) if f["kind"] == "target"]
        assert found["names"][0] == "q"
    assert [f["at"] for f in failures(reports[0][1])] == [f["at"] for f in failures(reports[1][1])]
