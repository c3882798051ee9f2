"""A reference point of a network's weights kept as the live weights themselves where the
published code copies them: the starting point of L2-SP (Li, Grandvalet and Davoine 2018,
"Explicit Inductive Bias for Transfer Learning with Convolutional Networks", arXiv:1802.01483:
the fine-tuned weights are pulled toward the pre-trained ones), the means of elastic weight
consolidation (Kirkpatrick et al. 2017, PNAS, arXiv:1612.00796; moskomule/ewc.pytorch keeps
them from a ``deepcopy`` of the parameters) and the previous task's weights of synaptic
intelligence (Zenke, Poole and Ganguli 2017, arXiv:1703.04200; ganguli-lab/pathint keeps them
as a copy of the variables after each task). Bound to the parameters themselves (``list(
backbone.parameters())``, ``{n: p for n, p in ...}``, ``prev[n] = p``), the penalty's difference
is the weight less itself: zero at every step, with no pull toward anything, while the loss
sends gradient through what was meant as a constant. The fix is the binding, a copy cut from
the graph.

Guards: the three as published; a proximal term toward another network's weights, frozen
(FedProx's local training toward the global model: Li et al. 2020, arXiv:1812.06127); a
penalty on the live weights themselves (a weight decay written by hand, not toward a reference);
and the live weights listed as the start of a functional inner loop that the outer loss
trains through on purpose (MAML: Finn, Abbeel and Levine 2017, arXiv:1703.03400)."""

from __future__ import annotations

import pytest
from script_audit import applied, assert_trains_as, audit, cli, failures, twins

HEAD = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)
"""

L2SP = HEAD + """
x_src, y_src = torch.randn(96, 8), torch.randint(3, (96,))
backbone = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU())
head = nn.Linear(32, 3)
pre_opt = torch.optim.Adam([*backbone.parameters(), *head.parameters()], lr=1e-2)
for step in range(4):   # pre-training on the source task
    loss = F.cross_entropy(head(backbone(x_src)), y_src)
    pre_opt.zero_grad()
    loss.backward()
    pre_opt.step()

x, y = torch.randn(64, 8), torch.randint(5, (64,))
new_head = nn.Linear(32, 5)
start = ANCHOR
opt = torch.optim.SGD([*backbone.parameters(), *new_head.parameters()], lr=0.05, momentum=0.9)
alpha, beta = 0.1, 0.01
for step in range(4):   # fine-tuning, pulled toward the starting point
    logits = new_head(backbone(x))
    sp = sum(((p - p0) ** 2).sum() for p, p0 in zip(backbone.parameters(), start))
    l2 = sum((w ** 2).sum() for w in new_head.parameters())
    loss = F.cross_entropy(logits, y) + alpha / 2 * sp + beta / 2 * l2
    opt.zero_grad()
    loss.backward()
    opt.step()
if args.out:
    torch.save({"backbone": backbone.state_dict(), "head": new_head.state_dict()}, args.out)
"""

EWC = HEAD + """
model = nn.Sequential(nn.Linear(10, 24), nn.Tanh(), nn.Linear(24, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
xa, ya = torch.randn(80, 10), torch.randint(4, (80,))
for step in range(4):   # task A
    loss = F.cross_entropy(model(xa), ya)
    opt.zero_grad()
    loss.backward()
    opt.step()

# the diagonal Fisher information of task A, from the gradients of sampled log-likelihoods
fisher = {n: torch.zeros_like(p) for n, p in model.named_parameters()}
for i in range(8):
    log_p = F.log_softmax(model(xa[i:i + 1]), -1)
    label = torch.multinomial(log_p.exp().detach(), 1)[0]
    grads = torch.autograd.grad(F.nll_loss(log_p, label), list(model.parameters()))
    for (n, _), g in zip(model.named_parameters(), grads):
        fisher[n] += g ** 2 / 8
means = ANCHOR

xb, yb = torch.randn(80, 10), torch.randint(4, (80,))
lam = 50.0
for step in range(4):   # task B, consolidated
    penalty = sum((fisher[n] * (p - means[n]) ** 2).sum() for n, p in model.named_parameters())
    loss = F.cross_entropy(model(xb), yb) + lam / 2 * penalty
    opt.zero_grad()
    loss.backward()
    opt.step()
if args.out:
    torch.save({"model": model.state_dict()}, args.out)
"""

SI = HEAD + """
model = nn.Sequential(nn.Linear(6, 20), nn.ReLU(), nn.Linear(20, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
xa, ya = torch.randn(64, 6), torch.randint(2, (64,))
start = {n: p.detach().clone() for n, p in model.named_parameters()}
w = {n: torch.zeros_like(p) for n, p in model.named_parameters()}
for step in range(4):   # task A, each step's contribution to the loss's fall summed
    loss = F.cross_entropy(model(xa), ya)
    opt.zero_grad()
    loss.backward()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt.step()
    for n, p in model.named_parameters():
        w[n] -= p.grad.detach() * (p.detach() - before[n])
prev = {}
omega = {}
for n, p in model.named_parameters():
    omega[n] = w[n] / ((p.detach() - start[n]) ** 2 + 1e-3)
    prev[n] = ANCHOR

xb, yb = torch.randn(64, 6), torch.randint(2, (64,))
c = 0.5
for step in range(4):   # task B, with the surrogate loss
    surrogate = sum((omega[n] * (p - prev[n]) ** 2).sum() for n, p in model.named_parameters())
    loss = F.cross_entropy(model(xb), yb) + c * surrogate
    opt.zero_grad()
    loss.backward()
    opt.step()
if args.out:
    torch.save({"model": model.state_dict()}, args.out)
"""

#: case -> (as published, the bug twin, how the anchor's binding line begins, the network)
BUGS = {
    "l2sp-starting-point": (L2SP.replace("ANCHOR", "[p.detach().clone() for p in "
                                                   "backbone.parameters()]"),
                            L2SP.replace("ANCHOR", "list(backbone.parameters())"),
                            "start = ", "backbone."),
    "ewc-means": (EWC.replace("ANCHOR", "{n: p.detach().clone() for n, p in "
                                        "model.named_parameters()}"),
                  EWC.replace("ANCHOR", "{n: p for n, p in model.named_parameters()}"),
                  "means = ", "model."),
    "si-previous-task": (SI.replace("ANCHOR", "p.detach().clone()"), SI.replace("ANCHOR", "p"),
                         "prev[n] = ", "model."),
}


@pytest.mark.parametrize("case", sorted(BUGS))
def test_an_anchor_bound_to_the_live_weights_is_named_and_copied(tmp_path, case):
    published, buggy, binding, network = BUGS[case]
    folder = twins(tmp_path, published, buggy)
    assert audit(tmp_path, folder / "published.py", "--watch", "1")[0] == 0
    code, report = audit(tmp_path, folder / "train.py", "--watch", "1")
    found = failures(report)
    assert code == 1 and found, report["findings"]
    assert any(n.startswith(network) for f in found for n in f["names"]), found
    line = next(i for i, text in enumerate(buggy.splitlines(), 1)
                if text.strip().startswith(binding))
    assert any(at.startswith(f"train.py:{line}:") for f in found for at in f["at"]), found
    applied(folder, found[0]["kind"], "--watch", "1")
    assert cli("--watch", "1", "train.py", cwd=folder).returncode == 0
    assert_trains_as(folder)


FEDPROX = HEAD + """
global_model = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 2))
clients = [(torch.randn(40, 5), torch.randint(2, (40,))) for _ in range(2)]
mu = 0.1
for rnd in range(2):
    states = []
    global_model.requires_grad_(False)
    global_w = list(global_model.parameters())   # the proximal centre, frozen while clients train
    for x, y in clients:
        local = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 2))
        local.load_state_dict(global_model.state_dict())
        opt = torch.optim.SGD(local.parameters(), lr=0.1)
        for step in range(2):
            prox = sum(((w - w0) ** 2).sum() for w, w0 in zip(local.parameters(), global_w))
            loss = F.cross_entropy(local(x), y) + mu / 2 * prox
            opt.zero_grad()
            loss.backward()
            opt.step()
        states.append(local.state_dict())
    global_model.load_state_dict({k: sum(s[k] for s in states) / len(states) for k in states[0]})
"""

DECAY = HEAD + """
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
params = list(model.parameters())
opt = torch.optim.SGD(params, lr=0.1)
x, y = torch.randn(48, 8), torch.randint(3, (48,))
for step in range(4):
    decay = sum((p ** 2).sum() for p in params)
    loss = F.cross_entropy(model(x), y) + 1e-3 * decay
    opt.zero_grad()
    loss.backward()
    opt.step()
"""

MAML = HEAD + """
from torch.func import functional_call

net = nn.Sequential(nn.Linear(1, 32), nn.Tanh(), nn.Linear(32, 1))
names = [n for n, _ in net.named_parameters()]
meta_opt = torch.optim.Adam(net.parameters(), lr=1e-2)
for step in range(3):
    amp, phase = torch.rand(1) * 4 + 1, torch.rand(1) * 3
    xs, xq = torch.rand(10, 1) * 10 - 5, torch.rand(10, 1) * 10 - 5
    ys, yq = amp * torch.sin(xs + phase), amp * torch.sin(xq + phase)
    fast = list(net.parameters())   # the inner loop starts at the live weights
    for _ in range(2):
        inner = F.mse_loss(functional_call(net, dict(zip(names, fast)), (xs,)), ys)
        grads = torch.autograd.grad(inner, fast, create_graph=True)
        fast = [w - 0.01 * g for w, g in zip(fast, grads)]
    outer = F.mse_loss(functional_call(net, dict(zip(names, fast)), (xq,)), yq)
    meta_opt.zero_grad()
    outer.backward()
    meta_opt.step()
"""

GUARDS = {**{f"{case}-as-published": BUGS[case][0] for case in BUGS},
          "fedprox-toward-a-frozen-global-model": FEDPROX,
          "weight-decay-on-the-live-weights": DECAY,
          "maml-inner-loop-from-the-live-weights": MAML}


@pytest.mark.parametrize("case", sorted(GUARDS))
def test_live_weights_read_where_no_reference_was_meant_are_no_failure(tmp_path, case):
    script = tmp_path / "train.py"
    script.write_text(GUARDS[case], encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    assert code == 0 and not failures(report), report["findings"]
