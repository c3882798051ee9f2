"""A student made from its teacher's weights by assignment, sharing them where the published code
copies them: ``student.blocks[i] = teacher.blocks[2 * i]`` (DistilBERT's student is made from
one layer in two of its teacher's: Sanh et al. 2019, arXiv:1910.01108; huggingface's
``extract_distilbert.py`` copies the weights into the student's state dict), or ``q.weight =
linear.weight`` (a low-precision student distilled from its full-precision teacher and started
from its weights: Mishra and Marr 2018, "Apprentice", arXiv:1711.05852). The teacher, read
under ``no_grad`` for the soft targets, is meant to stay as trained; sharing, its layers are the
student's, which the student's optimizer steps, so the targets move with every step. The fix is
the assignment, a copy.

Guards: both as published; a teacher's classifier reused frozen by the student (Chen et al.
2022, "Knowledge Distillation with the Reused Teacher Classifier", arXiv:2203.14001: shared and
never stepped); the output layer of a language model tied to its embedding (Press and Wolf
2017, arXiv:1608.05859: one network, no teacher); and a trunk shared by two networks that both
train with gradients (no target)."""

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

DISTIL = HEAD + """

class Net(nn.Module):
    def __init__(self, depth):
        super().__init__()
        self.embed = nn.Linear(8, 32)
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(32, 32), nn.GELU())
                                     for _ in range(depth)])
        self.head = nn.Linear(32, 4)

    def forward(self, x):
        h = self.embed(x)
        for block in self.blocks:
            h = h + block(h)
        return self.head(h)


x_all, y_all = torch.randn(96, 8), torch.randint(4, (96,))
teacher = Net(4)
teacher_opt = torch.optim.Adam(teacher.parameters(), lr=1e-2)
for step in range(4):   # the teacher
    loss = F.cross_entropy(teacher(x_all), y_all)
    teacher_opt.zero_grad()
    loss.backward()
    teacher_opt.step()

student = Net(2)   # one block in two of the teacher's
student.embed.load_state_dict(teacher.embed.state_dict())
student.head.load_state_dict(teacher.head.state_dict())
for i in range(2):
    student.blocks[i] = BLOCK
opt = torch.optim.Adam(student.parameters(), lr=5e-3)
for step in range(4):   # distillation
    idx = torch.randint(0, 96, (32,))
    with torch.no_grad():
        soft = F.softmax(teacher(x_all[idx]) / 2.0, -1)
    logits = student(x_all[idx])
    loss = (F.kl_div(F.log_softmax(logits / 2.0, -1), soft, reduction="batchmean") * 4.0
            + F.cross_entropy(logits, y_all[idx]))
    opt.zero_grad()
    loss.backward()
    opt.step()
if args.out:
    torch.save({"teacher": teacher.state_dict(), "student": student.state_dict()}, args.out)
"""

APPRENTICE = HEAD + """

class QuantLinear(nn.Linear):
    def forward(self, x):   # 4-bit weights, straight-through
        scale = self.weight.abs().max() / 7
        q = torch.round(self.weight / scale).clamp(-8, 7) * scale
        return F.linear(x, self.weight + (q - self.weight).detach(), self.bias)


def quantized(linear):
    q = QuantLinear(linear.in_features, linear.out_features)
    q.weight = WEIGHT
    q.bias = nn.Parameter(linear.bias.detach().clone())
    return q


x_all = torch.randn(128, 10)
y_all = (x_all[:, :4].sum(1) > 0).long() + (x_all[:, 4] > 1).long()
teacher = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))
teacher_opt = torch.optim.SGD(teacher.parameters(), lr=0.1, momentum=0.9)
for step in range(4):   # the full-precision teacher
    loss = F.cross_entropy(teacher(x_all), y_all)
    teacher_opt.zero_grad()
    loss.backward()
    teacher_opt.step()

student = nn.Sequential(quantized(teacher[0]), nn.ReLU(), quantized(teacher[2]))
opt = torch.optim.SGD(student.parameters(), lr=0.05, momentum=0.9)
for step in range(4):   # the low-precision student, from the teacher's weights
    idx = torch.randint(0, 128, (32,))
    with torch.no_grad():
        target = F.softmax(teacher(x_all[idx]), -1)
    logits = student(x_all[idx])
    loss = F.cross_entropy(logits, y_all[idx]) - (target * F.log_softmax(logits, -1)).sum(1).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
if args.out:
    torch.save({"teacher": teacher.state_dict(), "student": student.state_dict()}, args.out)
"""

BUGS = {
    "distilbert-blocks": (DISTIL.replace("BLOCK", "copy.deepcopy(teacher.blocks[2 * i])"),
                          DISTIL.replace("BLOCK", "teacher.blocks[2 * i]"),
                          "student.blocks[i] = ", ("student.", "teacher.")),
    "apprentice-weights": (APPRENTICE.replace("WEIGHT",
                                              "nn.Parameter(linear.weight.detach().clone())"),
                           APPRENTICE.replace("WEIGHT", "linear.weight"), "q.weight = ",
                           ("student.", "teacher.")),
}


@pytest.mark.parametrize("case", sorted(BUGS))
def test_weights_a_student_shares_with_its_teacher_are_named_and_copied(tmp_path, case):
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


REUSED_CLASSIFIER = HEAD + """
x, y = torch.randn(64, 8), torch.randint(4, (64,))
teacher = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4))
teacher_opt = torch.optim.Adam(teacher.parameters(), lr=1e-2)
for step in range(3):
    loss = F.cross_entropy(teacher(x), y)
    teacher_opt.zero_grad()
    loss.backward()
    teacher_opt.step()
teacher.requires_grad_(False)

body = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 32))
student = nn.Sequential(body, teacher[2])   # the teacher's classifier, reused as it is
features = teacher[:2]
opt = torch.optim.Adam(body.parameters(), lr=1e-2)
for step in range(3):
    with torch.no_grad():
        target = features(x)
    loss = F.mse_loss(body(x), target) + F.cross_entropy(student(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""

TIED = HEAD + """

class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(20, 16)
        self.rnn = nn.GRU(16, 16, batch_first=True)
        self.out = nn.Linear(16, 20)
        self.out.weight = self.embed.weight   # tied

    def forward(self, tokens):
        h, _ = self.rnn(self.embed(tokens))
        return self.out(h)


lm = LM()
opt = torch.optim.Adam(lm.parameters(), lr=1e-2)
tokens = torch.randint(20, (8, 6))
for step in range(3):
    logits = lm(tokens[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, 20), tokens[:, 1:].reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
"""

SHARED_TRUNK = HEAD + """
trunk = nn.Sequential(nn.Linear(6, 24), nn.ReLU())
net_a = nn.Sequential(nn.Linear(24, 2))
net_b = nn.Sequential(nn.Linear(24, 3))
net_a.trunk = trunk
net_b.trunk = trunk
opt = torch.optim.Adam([*trunk.parameters(), *net_a[0].parameters(), *net_b[0].parameters()],
                       lr=1e-2)
x, ya, yb = torch.randn(32, 6), torch.randint(2, (32,)), torch.randint(3, (32,))
for step in range(3):
    loss = (F.cross_entropy(net_a[0](net_a.trunk(x)), ya)
            + F.cross_entropy(net_b[0](net_b.trunk(x)), yb))
    opt.zero_grad()
    loss.backward()
    opt.step()
"""

GUARDS = {"distilbert-as-published": BUGS["distilbert-blocks"][0],
          "apprentice-as-published": BUGS["apprentice-weights"][0],
          "teacher-classifier-reused-frozen": REUSED_CLASSIFIER,
          "embedding-tied-to-the-output": TIED,
          "trunk-shared-by-two-trained-networks": SHARED_TRUNK}


@pytest.mark.parametrize("case", sorted(GUARDS))
def test_weights_shared_where_no_target_moves_are_no_failure(tmp_path, case):
    script = tmp_path / "train.py"
    script.write_text(GUARDS[case], encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    assert code == 0 and not failures(report), report["findings"]
