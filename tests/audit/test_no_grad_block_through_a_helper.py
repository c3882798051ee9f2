"""A term computed under ``torch.no_grad()`` through a helper function: DeepAR (Salinas et al.
2020, arXiv:1704.04110; awslabs/gluonts, ``DeepARModel.unroll_lagged_rnn``) sums the likelihood
over the conditioning range and the prediction range, both unrolled by one function. A script
that unrolls the conditioning range under ``no_grad`` (as if it were an encoder's warm-up)
adds a constant to its loss. The network is called inside the helper, not in the block: the
place of the fix is the block's own statement that calls the helper, and the finding names what
that statement binds (the term and the state handed on), not the helper's locals."""

from __future__ import annotations

from script_audit import audit, failures

SCRIPT = """\
import torch
from torch import nn

torch.manual_seed(0)
cell = nn.GRUCell(1, 4)
head = nn.Linear(4, 1)
optimizer = torch.optim.SGD([*cell.parameters(), *head.parameters()], lr=0.05)
series = torch.randn(8, 12, 1)


def unroll(x, h):
    nll = 0.0
    for t in range(x.shape[1] - 1):
        h = cell(x[:, t], h)
        mu = head(h)
        nll = nll + (mu - x[:, t + 1]).pow(2).mean()
    return nll, h


for step in range(4):
    h = torch.zeros(8, 4)
    with torch.no_grad():
        nll_cond, h = unroll(series[:, :6], h)
    nll_pred, _ = unroll(series[:, 5:], h)
    loss = nll_cond + nll_pred
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_the_term_is_named_at_the_blocks_own_statement(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    code, report = audit(tmp_path, script)
    found = [f for f in failures(report) if f["kind"] == "constant_term"]
    assert code == 1 and found, [f["message"] for f in report["findings"]]
    assert {"nll_cond", "h"} <= set(found[0]["values"]), found[0]["values"]
    assert any(at.startswith("train.py:23:") for at in found[0]["at"]), found[0]["at"]
