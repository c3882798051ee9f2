"""Training loops that update the weights by hand, with no ``torch.optim`` optimizer: the step is
the script's own code, reading each ``.grad`` and writing the weights under ``no_grad``.

- The word-level language model of pytorch/examples (``word_language_model/main.py``, ``train``:
  ``model.zero_grad()``, ``hidden = repackage_hidden(hidden)``, ``clip_grad_norm_``, then ``p.data
  .add_(p.grad, alpha=-lr)`` for each parameter), its bug twin without the repackaging (the error
  of a second backward through the old chunks silenced with ``retain_graph=True``): each
  backward runs through every earlier chunk of the epoch.
- Stochastic gradient Langevin dynamics (Welling and Teh 2011, ICML, eq. 4: a fresh minibatch
  gradient of the potential, half a step along it and Gaussian noise of the step's variance),
  its bug twin without ``model.zero_grad()``: each step moves along the sum of every gradient
  so far.
- Linear regression from scratch (Dive into Deep Learning, section 3.2, ``sgd(params, lr,
  batch_size)``: ``param -= lr * param.grad / batch_size`` then ``param.grad.zero_()``), its
  bug twin without the clear.
- Semi-gradient TD(0) (Sutton and Barto 2018, section 9.3: the target ``R + gamma v(S', w)`` is
  not differentiated), its bug twin computing the target with its graph: each update also
  moves the next state's value toward the current one's.
- A warm-up by hand, then the main loop with Adam (a script's two phases): the warm-up's bug
  twin reads an uncleared gradient, as the linear regression's does.

Each bug twin should exit 1 naming the line where the fix belongs and the tensors concerned,
with an edit that ``--apply`` writes, after which the script audits clean and trains as the
published one. The published scripts are the guards: each audits clean."""

from __future__ import annotations

import pytest
from script_audit import applied, assert_trains_as, audit, cli, failures, twins

HEAD = """\
import argparse
import math
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)
"""

WORD_LM = HEAD + """
ntokens, bptt, batch, lr, clip = 20, 5, 4, 2.0, 0.25
data = torch.randint(ntokens, (61, batch))


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp, nhid):
        super().__init__()
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.GRU(ninp, nhid)
        self.decoder = nn.Linear(nhid, ntoken)
        self.nhid = nhid

    def forward(self, input, hidden):
        output, hidden = self.rnn(self.encoder(input), hidden)
        return self.decoder(output).view(-1, self.decoder.out_features), hidden

    def init_hidden(self, bsz):
        return torch.zeros(1, bsz, self.nhid)


def repackage_hidden(h):
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


model = RNNModel(ntokens, 8, 16)
criterion = nn.NLLLoss()
for epoch in range(2):
    hidden = model.init_hidden(batch)
    for i in range(0, data.size(0) - 1, bptt):
        seq_len = min(bptt, data.size(0) - 1 - i)
        x, targets = data[i:i + seq_len], data[i + 1:i + 1 + seq_len].reshape(-1)
        model.zero_grad()
        hidden = repackage_hidden(hidden)
        output, hidden = model(x, hidden)
        loss = criterion(torch.log_softmax(output, -1), targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
if args.out:
    torch.save(model.state_dict(), args.out)
"""

SGLD = HEAD + """
n, batch = 64, 16
x = torch.randn(n, 3)
y = (x @ torch.tensor([1.0, -2.0, 0.5]) > 0).long()
model = nn.Linear(3, 2)
samples = []
for t in range(8):
    eps = 0.01 * (1 + t) ** -0.55
    idx = torch.randint(n, (batch,))
    model.zero_grad()
    U = F.cross_entropy(model(x[idx]), y[idx]) * n
    U = U + sum((p ** 2).sum() for p in model.parameters()) / 2
    U.backward()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(-0.5 * eps * p.grad + math.sqrt(eps) * torch.randn_like(p))
    samples.append([p.detach().clone() for p in model.parameters()])
if args.out:
    torch.save({"samples": samples}, args.out)
"""

FROM_SCRATCH = HEAD + """
true_w, true_b = torch.tensor([2.0, -3.4]), 4.2
features = torch.randn(200, 2)
labels = features @ true_w + true_b + 0.01 * torch.randn(200)


def linreg(X, w, b):
    return X @ w + b


def squared_loss(y_hat, y):
    return (y_hat - y) ** 2 / 2


def sgd(params, lr, batch_size):
    with torch.no_grad():
        for param in params:
            param -= lr * param.grad / batch_size
            param.grad.zero_()


w = torch.normal(0, 0.01, size=(2,), requires_grad=True)
b = torch.zeros(1, requires_grad=True)
lr, batch_size = 0.03, 10
for epoch in range(2):
    for i in range(0, 40, batch_size):
        X, y = features[i:i + batch_size], labels[i:i + batch_size]
        l = squared_loss(linreg(X, w, b), y)
        l.sum().backward()
        sgd([w, b], lr, batch_size)
if args.out:
    torch.save({"w": w.detach(), "b": b.detach()}, args.out)
"""

SEMI_GRADIENT_TD = HEAD + """
n_states, gamma, alpha = 7, 0.9, 0.05
features = torch.eye(n_states)
v = nn.Sequential(nn.Linear(n_states, 8), nn.Tanh(), nn.Linear(8, 1))
state = 3
for t in range(12):
    step = 1 if torch.rand(()) < 0.5 else -1
    nxt = min(max(state + step, 0), n_states - 1)
    reward = 1.0 if nxt == n_states - 1 else 0.0
    done = nxt in (0, n_states - 1)
    with torch.no_grad():
        target = reward + (0.0 if done else gamma) * v(features[nxt])
    delta = target - v(features[state])
    v.zero_grad()
    (0.5 * delta.pow(2)).sum().backward()
    with torch.no_grad():
        for p in v.parameters():
            p -= alpha * p.grad
    state = 3 if done else nxt
if args.out:
    torch.save(v.state_dict(), args.out)
"""

WARM_UP_BY_HAND = HEAD + """
x = torch.randn(96, 6)
y = x @ torch.randn(6, 1) + 0.1 * torch.randn(96, 1)
net = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 1))
for i in range(0, 48, 16):   # warm-up: plain SGD written out
    loss = F.mse_loss(net(x[i:i + 16]), y[i:i + 16])
    loss.backward()
    with torch.no_grad():
        for p in net.parameters():
            p -= 0.05 * p.grad
            p.grad.zero_()
opt = torch.optim.Adam(net.parameters(), lr=1e-2)
for step in range(3):   # the main loop
    loss = F.mse_loss(net(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
if args.out:
    torch.save(net.state_dict(), args.out)
"""


def _without(text: str, line: str) -> str:
    assert text.count(line + "\n") == 1, line
    return text.replace(line + "\n", "")


#: case -> (as published, the bug twin, how the line where the fix belongs begins, the names
#: of the tensors concerned begin with)
BUGS = {
    "word-lm-hidden-not-repackaged": (
        WORD_LM,
        _without(WORD_LM, "        hidden = repackage_hidden(hidden)").replace(
            "        loss.backward()\n", "        loss.backward(retain_graph=True)\n"),
        "output, hidden = model(x, hidden)", "hidden"),
    "sgld-gradient-not-cleared": (
        SGLD, _without(SGLD, "    model.zero_grad()"), "U.backward()", "model."),
    "from-scratch-sgd-gradient-not-cleared": (
        FROM_SCRATCH, _without(FROM_SCRATCH, "            param.grad.zero_()"),
        "l.sum().backward()", "w"),
    "semi-gradient-td-target-trained": (
        SEMI_GRADIENT_TD,
        SEMI_GRADIENT_TD.replace("    with torch.no_grad():\n        target = reward",
                                 "    target = reward"),
        "target = reward", "v."),
    "warm-up-by-hand-gradient-not-cleared": (
        WARM_UP_BY_HAND, _without(WARM_UP_BY_HAND, "            p.grad.zero_()"),
        "loss.backward()", "net."),
}


@pytest.mark.parametrize("case", sorted(BUGS))
def test_a_bug_of_a_loop_updated_by_hand_is_named_and_its_edit_trains(tmp_path, case):
    published, buggy, fix_line, network = BUGS[case]
    assert published != buggy
    folder = twins(tmp_path, published, buggy)
    code, report = audit(tmp_path, folder / "train.py", "--watch", "1")
    found = failures(report)
    assert code == 1 and found, report["findings"]
    assert any(n.startswith(network) for f in found for n in f["names"]), found
    line = next(i for i, text in enumerate(buggy.splitlines(), 1)
                if text.strip().startswith(fix_line))
    assert any(at.startswith(f"train.py:{line}:") for f in found for at in f["at"]), found
    applied(folder, found[0]["kind"], "--watch", "1")
    assert cli("--watch", "1", "train.py", cwd=folder).returncode == 0
    assert_trains_as(folder)


@pytest.mark.parametrize("case", sorted(BUGS))
def test_a_loop_updated_by_hand_as_published_is_clean(tmp_path, case):
    script = tmp_path / "train.py"
    script.write_text(BUGS[case][0], encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    assert code == 0 and not failures(report), report["findings"]
