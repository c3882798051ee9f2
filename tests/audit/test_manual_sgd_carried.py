"""A loop that updates by hand, with no optimizer: the word language model of
pytorch/examples (word_language_model/main.py, ``train``) steps its parameters itself,
``p.data.add_(p.grad, alpha=-lr)``, and cuts the LSTM's state between chunks with
``repackage_hidden``, so that truncated BPTT stops at each chunk. Left out, with the error of
the second backward silenced by ``retain_graph=True``, each chunk's backward runs through every
earlier chunk. No optimizer's construction or step marks where an iteration ends there: its
backward does, and the step audit's carried rule judges the next iteration's loss, naming the
state where it enters the network. Cut between chunks, it is clean."""

from __future__ import annotations

import pytest
from script_audit import audit, failures

SCRIPT = """\
import torch
import torch.nn.functional as F
from torch import nn


class CharLSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(6, 4)
        self.rnn = nn.LSTM(4, 8)
        self.out = nn.Linear(8, 6)

    def forward(self, x, hidden):
        y, hidden = self.rnn(self.embed(x), hidden)
        return self.out(y).view(-1, 6), hidden


def repackage(h):
    return tuple(v.detach() for v in h)


torch.manual_seed(0)
model = CharLSTM()
text = torch.randint(0, 6, (41, 2))
hidden = (torch.zeros(1, 2, 8), torch.zeros(1, 2, 8))
for i in range(0, 40, 5):
    data, targets = text[i:i + 5], text[i + 1:i + 6].reshape(-1)
    REPACKAGE
    model.zero_grad()
    output, hidden = model(data, hidden)
    loss = F.cross_entropy(output, targets)
    loss.backward(retain_graph=True)
    for p in model.parameters():
        p.data.add_(p.grad, alpha=-0.1)
"""


@pytest.mark.parametrize("watch", [(), ("--watch", "1")], ids=["steps", "watch"])
def test_a_state_carried_across_chunks_of_a_manual_sgd_is_named_where_it_enters(
        tmp_path, watch):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.replace("REPACKAGE", "pass"))
    code, report = audit(tmp_path, script, *watch)
    carried = [f for f in failures(report) if f["kind"] == "carried"]
    assert code == 1 and carried, [f["message"] for f in report["findings"]]
    assert "hidden" in carried[0]["names"]
    assert any(at.startswith("train.py:30:") for at in carried[0]["at"]), carried[0]["at"]


def test_the_state_cut_between_chunks_is_clean(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.replace("REPACKAGE", "hidden = repackage(hidden)"))
    code, report = audit(tmp_path, script, "--watch", "1")
    assert code == 0 and not failures(report), [f["message"] for f in failures(report)]
