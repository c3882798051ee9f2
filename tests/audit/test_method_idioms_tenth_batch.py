"""Published idioms the tenth held-out batch showed the audit taking for bugs, each beside the
bug it looks like, which the audit still finds:

- **a derivative's own formula** (IRMv1's penalty, Arjovsky et al. 2019: the squared gradient
  of a cross-entropy with respect to a dummy scale, taken with ``create_graph=True``, whose
  formula reads ``(sigmoid(x) - y) * x``) is no product with a surrogate gradient: the target
  rule reads the script's comparisons, not the nodes autograd made for a derivative;
- **a straight-through sum** ``c + (m - c).detach()`` (GECO's moving average of the
  constraint, Rezende & Viola 2018) is the live value's gradient at the average's value, no
  constant term; a term made only of a cut output still is one;
- **a reconstruction of its own cut input** (Soft-IntroVAE's encoder on ``rec.detach()``,
  Daniel & Tamar 2021, compared with that input through ``exp(-distance)``) compares each
  value with one other, not queries with several keys; a prototype distance broadcast over
  keys cut still is ``cut_keys``;
- **a closure's gradient** (L-BFGS, which calls the closure several times in one step and
  reads each gradient before the next): the closure's ``zero_grad()`` loses nothing; without
  it, the gradients pile up and the fix names the optimizer, not the closure.
"""

from __future__ import annotations

import pytest
from script_audit import audit, failures


def _failed(tmp_path, name: str, text: str) -> list[str]:
    """The kinds of the failures ``toolkit audit --watch 1`` finds in the script ``text``,
    written as ``name``; its exit status says whether there are any."""
    script = tmp_path / name
    script.write_text(text)
    code, report = audit(tmp_path, script, "--watch", "1")
    kinds = [f["kind"] for f in failures(report)]
    assert code == (1 if kinds else 0), report["findings"]
    return kinds

_IRM = """\
import torch
import torch.nn.functional as F
from torch import autograd, nn

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
x, y = torch.randn(32, 4), torch.rand(32, 1).round()
for _ in range(3):
    logits = net(x)
    scale = torch.tensor(1.0).requires_grad_()
    grad = autograd.grad(F.binary_cross_entropy_with_logits(logits * scale, y), [scale],
                         create_graph=True)[0]
    loss = F.binary_cross_entropy_with_logits(logits, y) + 10.0 * grad.pow(2)
    {extra}
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


@pytest.mark.parametrize(("extra", "found"), [
    ("", []),
    ("loss = loss + F.binary_cross_entropy_with_logits(logits, torch.sigmoid(net(x.flip(0))))",
     ["target"]),
], ids=["derivative_penalty", "guessed_label_as_target"])
def test_a_derivatives_formula_is_not_a_comparison_of_the_scripts(tmp_path, extra, found):
    assert _failed(tmp_path, "irm.py", _IRM.format(extra=extra)) == found


_GECO = """\
import torch
from torch import nn

torch.manual_seed(0)
encoder, decoder = nn.Linear(4, 2), nn.Linear(2, 4)
optimizer = torch.optim.Adam([*encoder.parameters(), *decoder.parameters()], lr=1e-2)
c_ma = None
for _ in range(3):
    x = torch.randn(16, 4)
    x_hat = decoder(encoder(x))
    c_step = (x - x_hat).pow(2).sum(1).mean() - 0.1
    c_ma = c_step.detach() if c_ma is None else 0.9 * c_ma + 0.1 * c_step.detach()
    constraint = {constraint}
    loss = 0.01 * x_hat.pow(2).mean() + 2.0 * constraint
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


@pytest.mark.parametrize(("constraint", "found"), [
    ("c_step + (c_ma - c_step).detach()", []),
    ("c_step.detach()", ["constant_term"]),
], ids=["straight_through_average", "cut_output_alone"])
def test_a_straight_through_difference_is_no_constant_term(tmp_path, constraint, found):
    assert _failed(tmp_path, "geco.py", _GECO.format(constraint=constraint)) == found


_INTRO = """\
import torch
from torch import nn

torch.manual_seed(0)
encoder, decoder = nn.Linear(4, 2), nn.Linear(2, 4)
optimizer = torch.optim.Adam(encoder.parameters(), lr=1e-2)
decoder.requires_grad_(False)
for _ in range(3):
    x = torch.randn(16, 4)
    rec = decoder(encoder(x))
    {compared}
    loss = (x - rec).pow(2).sum(1).mean() + torch.exp(-distance).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


@pytest.mark.parametrize(("compared", "found"), [
    ("distance = (rec.detach() - decoder(encoder(rec.detach()))).pow(2).sum(1)", []),
    ("distance = (encoder(x)[:, None] - encoder(rec)[None].detach()).pow(2).sum(-1)",
     ["cut_keys"]),
], ids=["own_input_reconstructed", "keys_cut_broadcast"])
def test_a_difference_to_ones_own_cut_input_compares_no_keys(tmp_path, compared, found):
    assert _failed(tmp_path, "intro.py", _INTRO.format(compared=compared)) == found


_LBFGS = """\
import torch
from torch import nn

torch.manual_seed(0)
value_net = nn.Linear(3, 1)
value_optimizer = torch.optim.LBFGS(value_net.parameters(), max_iter=5,
                                    line_search_fn="strong_wolfe")
for _ in range(3):
    states, returns = torch.randn(32, 3), torch.randn(32, 1)

    def closure():
        {clear}
        value_loss = (value_net(states) - returns).pow(2).mean()
        value_loss.backward()
        return value_loss

    value_optimizer.step(closure)
"""


@pytest.mark.parametrize(("clear", "found"), [
    ("value_optimizer.zero_grad()", []),
    ("pass", ["stale"]),
], ids=["cleared_in_the_closure", "never_cleared"])
def test_a_closures_gradient_is_read_by_its_step(tmp_path, clear, found):
    script = tmp_path / "trpo_value.py"
    script.write_text(_LBFGS.format(clear=clear))
    code, report = audit(tmp_path, script, "--watch", "1")
    got = failures(report)
    assert sorted({f["kind"] for f in got}) == found, got
    assert code == (1 if found else 0)
    assert all("closure.zero_grad" not in f["message"] + str(f.get("advice")) for f in got)
