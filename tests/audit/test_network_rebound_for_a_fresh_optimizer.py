"""A network the loop binds to a second name at each pass, for a fresh optimizer to train a copy:
``local_model = global_model`` where the published code has ``copy.deepcopy(global_model)``.
FedAvg (McMahan et al. 2017, "Communication-Efficient Learning of Deep Networks from
Decentralized Data", arXiv:1602.05629; shaoxiongji/federated-learning's ``main_fed.py`` hands
each client ``copy.deepcopy(net_glob)``), model soups (Wortsman et al. 2022, arXiv:2203.05482:
each ingredient fine-tuned from the same pre-trained weights, then averaged) and task arithmetic
(Ilharco et al. 2023, "Editing Models with Task Arithmetic", arXiv:2212.04089: a task vector is
the fine-tuned weights less the pre-trained ones) each train a fresh copy of one network per pass
of a loop. Bound by a plain assignment, the "copy" is the network itself: each pass's optimizer
trains the one network on, the clients or ingredients are one run in turn, and a difference of
the two names is zero. The fix is the binding, a deep copy.

Guards: the three as published; experts chosen from a list, one per pass (a network of its own
each time), each with a fresh optimizer; one network trained on by a fresh optimizer per task
(continual learning with its optimizer's state reset), with no second name."""

from __future__ import annotations

import pytest
from script_audit import applied, assert_trains_as, audit, cli, failures, twins

HEAD = """\
import argparse
import copy
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)
"""

FEDAVG = HEAD + """
clients = [(torch.randn(40, 6) + 0.5 * k, torch.randint(3, (40,))) for k in range(3)]
global_model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
for rnd in range(3):
    states = []
    for x, y in clients:
        local_model = LOCAL
        local_opt = torch.optim.SGD(local_model.parameters(), lr=0.1)
        for epoch in range(2):
            loss = F.cross_entropy(local_model(x), y)
            local_opt.zero_grad()
            loss.backward()
            local_opt.step()
        states.append(local_model.state_dict())
    averaged = {k: torch.stack([s[k] for s in states]).mean(0) for k in states[0]}
    global_model.load_state_dict(averaged)
if args.out:
    torch.save(global_model.state_dict(), args.out)
"""

SOUP = HEAD + """
x = torch.randn(64, 8)
y = (x[:, :3].sum(1) > 0).long()
pretrained = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 2))
pre_opt = torch.optim.Adam(pretrained.parameters(), lr=1e-2)
for step in range(4):   # pre-training
    loss = F.cross_entropy(pretrained(x), y)
    pre_opt.zero_grad()
    loss.backward()
    pre_opt.step()

ingredients = []
for lr in (0.05, 0.1, 0.2):   # one ingredient per learning rate, each from the same start
    finetuned = FINETUNED
    opt = torch.optim.SGD(finetuned.parameters(), lr=lr, momentum=0.9)
    for step in range(3):
        loss = F.cross_entropy(finetuned(x + 0.1 * torch.randn_like(x)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    ingredients.append({k: v.clone() for k, v in finetuned.state_dict().items()})
soup = copy.deepcopy(pretrained)
soup.load_state_dict({k: torch.stack([i[k] for i in ingredients]).mean(0)
                      for k in ingredients[0]})
if args.out:
    torch.save(soup.state_dict(), args.out)
"""

TASK_ARITHMETIC = HEAD + """
class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(10, 24), nn.GELU(), nn.Linear(24, 12))

    def forward(self, x):
        return self.body(x)


base = Encoder()
tasks = [(torch.randn(48, 10), torch.randint(4, (48,))) for _ in range(2)]
heads = [nn.Linear(12, 4) for _ in tasks]
vectors = []
for (x, y), head in zip(tasks, heads):
    model = MODEL
    opt = torch.optim.AdamW([*model.parameters(), *head.parameters()], lr=5e-3)
    for step in range(3):
        loss = F.cross_entropy(head(model(x)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        vectors.append([p - q for p, q in zip(model.parameters(), base.parameters())])
merged = copy.deepcopy(base)
with torch.no_grad():
    for p, *taus in zip(merged.parameters(), *vectors):
        p.add_(0.5 * sum(taus))
if args.out:
    torch.save({"merged": merged.state_dict(), "heads": [h.state_dict() for h in heads]},
               args.out)
"""

BUGS = {
    "fedavg-client": (FEDAVG.replace("LOCAL", "copy.deepcopy(global_model)"),
                      FEDAVG.replace("LOCAL", "global_model"), "local_model = ",
                      ("local_model.", "global_model.")),
    "model-soup-ingredient": (SOUP.replace("FINETUNED", "copy.deepcopy(pretrained)"),
                              SOUP.replace("FINETUNED", "pretrained"), "finetuned = ",
                              ("finetuned.", "pretrained.")),
    "task-vector": (TASK_ARITHMETIC.replace("MODEL", "copy.deepcopy(base)"),
                    TASK_ARITHMETIC.replace("MODEL", "base"), "model = ",
                    ("model.", "base.")),
}


@pytest.mark.parametrize("case", sorted(BUGS))
def test_a_network_rebound_for_a_fresh_optimizer_is_named_and_copied(tmp_path, case):
    published, buggy, binding, networks = BUGS[case]
    folder = twins(tmp_path, published, buggy)
    assert audit(tmp_path, folder / "published.py", "--watch", "1")[0] == 0
    code, report = audit(tmp_path, folder / "train.py", "--watch", "1")
    found = failures(report)
    assert code == 1 and found, report["findings"]
    assert any(n.startswith(networks) for f in found for n in f["names"]), found
    line = next(i for i, text in enumerate(buggy.splitlines(), 1)
                if text.strip().startswith(binding))
    assert any(at.startswith(f"train.py:{line}:") for f in found for at in f["at"]), found
    applied(folder, found[0]["kind"], "--watch", "1")
    assert cli("--watch", "1", "train.py", cwd=folder).returncode == 0
    assert_trains_as(folder)


EXPERTS = HEAD + """
experts = [nn.Sequential(nn.Linear(5, 12), nn.ReLU(), nn.Linear(12, 1)) for _ in range(3)]
for k in range(3):
    x = torch.randn(32, 5)
    y = x[:, k:k + 1] ** 2
    expert = experts[k]
    opt = torch.optim.Adam(expert.parameters(), lr=1e-2)
    for step in range(3):
        loss = F.mse_loss(expert(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
"""

CONTINUAL = HEAD + """
model = nn.Sequential(nn.Linear(7, 16), nn.ReLU(), nn.Linear(16, 3))
for task in range(3):
    x, y = torch.randn(40, 7) + task, torch.randint(3, (40,))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for step in range(3):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
"""

GUARDS = {"fedavg-as-published": BUGS["fedavg-client"][0],
          "model-soup-as-published": BUGS["model-soup-ingredient"][0],
          "task-arithmetic-as-published": BUGS["task-vector"][0],
          "experts-chosen-from-a-list": EXPERTS,
          "continual-with-a-fresh-optimizer": CONTINUAL}


@pytest.mark.parametrize("case", sorted(GUARDS))
def test_a_fresh_optimizer_over_a_network_of_its_own_is_no_failure(tmp_path, case):
    script = tmp_path / "train.py"
    script.write_text(GUARDS[case], encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    assert code == 0 and not failures(report), report["findings"]
