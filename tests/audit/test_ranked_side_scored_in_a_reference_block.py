"""One side of a ranked pair scored inside a ``torch.no_grad()`` block that holds values cut on
purpose: the block computes a reward model's scores or picks the hardest negative, and the
trained network's score of the rejected side was written into it. RRHF (Yuan et al. 2023,
arXiv:2304.05302: a hinge between the policy's length-normalised log-probabilities of the
responses the reward model ranks lower and the best one's) and BPR with dynamic negative
sampling (Rendle et al. 2009, arXiv:1205.2618; Zhang et al. 2013, "Optimizing Top-N
Collaborative Filtering via Dynamic Negative Item Sampling", SIGIR: the negative is the
highest-scoring of a few sampled items, picked without gradient) each push the two sides of a
pair apart; with one side computed under ``no_grad`` the loss pushes the other alone. The fix
is that statement taken out of the block, whose other statements stay cut; the finding names
it.

Guards: both as published (only the reward model's scores and the negative's choice in the
block)."""

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

RRHF = HEAD + """
V, T, K, B = 12, 5, 4, 16   # vocabulary, response length, responses per prompt, prompts


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 32), nn.Tanh())
        self.heads = nn.Linear(32, T * V)

    def forward(self, x):
        return self.heads(self.body(x)).view(-1, T, V)


def seq_logp(model, x, y):   # length-normalised log-probability of each response
    return F.log_softmax(model(x), -1).gather(-1, y.unsqueeze(-1)).squeeze(-1).mean(-1)


reward_model = nn.Sequential(nn.Linear(8 + T, 16), nn.ReLU(), nn.Linear(16, 1))
policy = Policy()
opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
prompts = torch.randn(B, 8)
for step in range(4):
    responses = torch.randint(V, (K, B, T))
    with torch.no_grad():
        rewards = torch.stack([reward_model(torch.cat([prompts, r.float()], -1)).squeeze(-1)
                               for r in responses])
        best = rewards.argmax(0)
IN_BLOCK
    chosen = seq_logp(policy, prompts, responses[best, torch.arange(B)])
AFTER_BLOCK
    loss = F.relu(scores - chosen.unsqueeze(0)).sum(0).mean() - chosen.mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
if args.out:
    torch.save(policy.state_dict(), args.out)
"""
RRHF_SCORES = "scores = torch.stack([seq_logp(policy, prompts, r) for r in responses])"

DNS = HEAD + """
n_users, n_items, dim, B = 30, 50, 8, 32
user_emb, item_emb = nn.Embedding(n_users, dim), nn.Embedding(n_items, dim)
opt = torch.optim.SGD([*user_emb.parameters(), *item_emb.parameters()], lr=0.1)
likes = torch.randint(n_items, (n_users,))
for step in range(4):
    u = torch.randint(n_users, (B,))
    pos = likes[u]
    with torch.no_grad():   # the hardest of 8 sampled items
        cand = torch.randint(n_items, (B, 8))
        cand_scores = (user_emb(u).unsqueeze(1) * item_emb(cand)).sum(-1)
        neg = cand[torch.arange(B), cand_scores.argmax(1)]
IN_BLOCK
    x_ui = (user_emb(u) * item_emb(pos)).sum(-1)
AFTER_BLOCK
    loss = -F.logsigmoid(x_ui - x_uj).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
if args.out:
    torch.save({"users": user_emb.state_dict(), "items": item_emb.state_dict()}, args.out)
"""
DNS_SCORE = "x_uj = (user_emb(u) * item_emb(neg)).sum(-1)"


def _placed(script: str, statement: str, in_block: bool) -> str:
    line = "        " + statement if in_block else "    " + statement
    return script.replace("IN_BLOCK", line if in_block else "").replace(
        "AFTER_BLOCK", "" if in_block else line).replace("\n\n    ", "\n    ")


BUGS = {
    "rrhf-rejected-scores": (_placed(RRHF, RRHF_SCORES, False), _placed(RRHF, RRHF_SCORES, True),
                             RRHF_SCORES, ("policy.",)),
    "dns-negative-score": (_placed(DNS, DNS_SCORE, False), _placed(DNS, DNS_SCORE, True),
                           DNS_SCORE, ("user_emb.", "item_emb.")),
}


@pytest.mark.parametrize("case", sorted(BUGS))
def test_a_ranked_side_scored_in_a_reference_block_is_named_and_moved_out(tmp_path, case):
    published, buggy, statement, networks = BUGS[case]
    folder = twins(tmp_path, published, buggy)
    assert audit(tmp_path, folder / "published.py", "--watch", "1")[0] == 0
    code, report = audit(tmp_path, folder / "train.py", "--watch", "1")
    found = failures(report)
    assert code == 1 and found, report["findings"]
    assert any(n.startswith(networks) for f in found for n in f["names"]), found
    line = next(i for i, text in enumerate(buggy.splitlines(), 1) if text.strip() == statement)
    assert any(at.startswith(f"train.py:{line}:") for f in found for at in f["at"]), found
    applied(folder, found[0]["kind"], "--watch", "1")
    assert cli("--watch", "1", "train.py", cwd=folder).returncode == 0
    assert_trains_as(folder)


GUARDS = {"rrhf-as-published": BUGS["rrhf-rejected-scores"][0],
          "dns-as-published": BUGS["dns-negative-score"][0]}


@pytest.mark.parametrize("case", sorted(GUARDS))
def test_a_block_of_reference_values_alone_is_no_failure(tmp_path, case):
    script = tmp_path / "train.py"
    script.write_text(GUARDS[case], encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    assert code == 0 and not failures(report), report["findings"]
