"""One side of a ranked pair cut: a loss that ranks two scores the trained network makes in the
same step reads their difference through a logistic or a hinge (a Bradley-Terry reward model's
``-logsigmoid(r_chosen - r_rejected)``, BPR's ``-logsigmoid(x_ui - x_uj)``, TransE's
``relu(margin + d_pos - d_neg)``), and one side is ``.detach()``-ed: the loss pushes one score
and never the other, where the published methods move both (Rendle et al. 2009, BPR; Bordes
et al. 2013, TransE; Stiennon et al. 2020 and Ouyang et al. 2022, the reward model's pairwise
loss, as in huggingface/trl's ``RewardTrainer.compute_loss``).

Guards, where a cut beside a difference belongs: the identity trick ``exp(logp -
logp.detach())`` (GRPO's ratio in trl's ``GRPOTrainer``, equal to one, whose gradient is the
log-probability's); a squared TD error with its target cut (a distance, not a ranking); PPO's
ratio to the log-probabilities of the rollout, an earlier call; a relativistic generator's step,
whose cut side is the discriminator's score on real data, which the generator's optimizer does
not step (Jolicoeur-Martineau 2018)."""

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

REWARD = HEAD + """

class RewardModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.EmbeddingBag(50, 16)
        self.head = nn.Sequential(nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 1))

    def forward(self, tokens):
        return self.head(self.embed(tokens)).squeeze(-1)


model = RewardModel()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
chosen = torch.randint(0, 25, (32, 6))
rejected = torch.randint(25, 50, (32, 6))
for step in range(5):
    r_chosen = model(chosen)
    r_rejected = model(rejected)REJECTED
    loss = -F.logsigmoid(r_chosen - r_rejected).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save(model.state_dict(), args.out)
"""

BPR = HEAD + """
n_users, n_items = 20, 30
user_emb = nn.Embedding(n_users, 8)
item_emb = nn.Embedding(n_items, 8)
nn.init.normal_(user_emb.weight, std=0.1)
nn.init.normal_(item_emb.weight, std=0.1)
optimizer = torch.optim.SGD([*user_emb.parameters(), *item_emb.parameters()], lr=0.5)
users = torch.randint(0, n_users, (64,))
positives = torch.randint(0, n_items, (64,))
negatives = torch.randint(0, n_items, (64,))
for step in range(5):
    u = user_emb(users)
    x_ui = (u * item_emb(positives)).sum(-1)
    x_uj = (u * item_emb(negatives)).sum(-1)NEGATIVE
    loss = -F.logsigmoid(x_ui - x_uj).mean() + 1e-4 * u.pow(2).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save({"user": user_emb.state_dict(), "item": item_emb.state_dict()}, args.out)
"""

TRANSE = HEAD + """

class TransE(nn.Module):
    def __init__(self, n_entities, n_relations, dim=8):
        super().__init__()
        self.entities = nn.Embedding(n_entities, dim)
        self.relations = nn.Embedding(n_relations, dim)

    def distance(self, h, r, t):
        return (self.entities(h) + self.relations(r) - self.entities(t)).norm(p=1, dim=-1)


model = TransE(40, 5)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
heads, rels, tails = (torch.randint(0, 40, (64,)), torch.randint(0, 5, (64,)),
                      torch.randint(0, 40, (64,)))
for step in range(5):
    corrupted = torch.randint(0, 40, (64,))
    d_pos = model.distance(heads, rels, tails)
    d_neg = model.distance(heads, rels, corrupted)NEGATIVE
    loss = F.relu(1.0 + d_pos - d_neg).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save(model.state_dict(), args.out)
"""

BUGS = {
    # the rejected response's reward cut, as a logging line would leave it
    "reward-model-rejected": (REWARD.replace("REJECTED", ""),
                              REWARD.replace("REJECTED", ".detach()")),
    # BPR's negative item scored, then cut
    "bpr-negative": (BPR.replace("NEGATIVE", ""), BPR.replace("NEGATIVE", ".detach()")),
    # TransE's corrupted triple cut from the margin loss
    "transe-corrupted": (TRANSE.replace("NEGATIVE", ""),
                         TRANSE.replace("NEGATIVE", ".detach()")),
}


@pytest.mark.parametrize("case", sorted(BUGS))
def test_a_ranked_side_cut_is_named_and_the_cut_removed(tmp_path, case):
    published, buggy = BUGS[case]
    folder = twins(tmp_path, published, buggy)
    assert audit(tmp_path, folder / "published.py", "--watch", "1")[0] == 0
    code, report = audit(tmp_path, folder / "train.py", "--watch", "1")
    found = failures(report)
    assert code == 1 and [f["kind"] for f in found] == ["cut_keys"], report["findings"]
    assert found[0]["edits"], found[0]
    applied(folder, "cut_keys", "--watch", "1")
    assert ".detach()" not in (folder / "train.py").read_text(encoding="utf-8")
    assert cli("--watch", "1", "train.py", cwd=folder).returncode == 0
    assert_trains_as(folder)


GRPO = HEAD + """
policy = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 3))
optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
states = torch.randn(32, 4)
for step in range(5):
    logits = policy(states)
    actions = torch.distributions.Categorical(logits=logits.detach()).sample()
    rewards = (actions == 1).float()
    advantages = (rewards - rewards.mean()) / (rewards.std() + 1e-4)
    logps = torch.log_softmax(logits, -1).gather(1, actions.unsqueeze(1)).squeeze(1)
    ratio = torch.exp(logps - logps.detach())
    loss = -(ratio * advantages).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""

TD = HEAD + """
q_net = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
optimizer = torch.optim.Adam(q_net.parameters(), lr=1e-3)
s, s_next = torch.randn(32, 4), torch.randn(32, 4)
a, r = torch.randint(0, 2, (32,)), torch.randn(32)
for step in range(5):
    q_all = q_net(torch.cat([s, s_next]))
    q = q_all[:32].gather(1, a.unsqueeze(1)).squeeze(1)
    target = r + 0.99 * q_all[32:].max(1).values.detach()
    loss = (q - target).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""

PPO = HEAD + """
policy = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 3))
optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
for update in range(3):
    states = torch.randn(32, 4)
    dist = torch.distributions.Categorical(logits=policy(states))
    actions = dist.sample()
    old_logps = dist.log_prob(actions).detach()
    advantages = torch.randn(32)
    for epoch in range(2):
        logps = torch.distributions.Categorical(logits=policy(states)).log_prob(actions)
        ratio = torch.exp(logps - old_logps)
        clipped = torch.clamp(ratio, 0.8, 1.2)
        loss = -torch.min(ratio * advantages, clipped * advantages).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""

RELATIVISTIC = HEAD + """
G = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
D = nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
opt_g = torch.optim.Adam(G.parameters(), lr=1e-3)
opt_d = torch.optim.Adam(D.parameters(), lr=1e-3)
real = torch.randn(32, 2) + 1
for step in range(5):
    fake = G(torch.randn(32, 4))
    d_loss = F.binary_cross_entropy_with_logits(D(real) - D(fake.detach()),
                                                torch.ones(32, 1))
    opt_d.zero_grad()
    d_loss.backward()
    opt_d.step()
    g_loss = F.binary_cross_entropy_with_logits(D(fake) - D(real).detach(),
                                                torch.ones(32, 1))
    opt_g.zero_grad()
    g_loss.backward()
    opt_g.step()
"""

GUARDS = {"grpo-identity-ratio": GRPO, "td-squared-error": TD, "ppo-rollout-ratio": PPO,
          "relativistic-generator": RELATIVISTIC,
          "reward-model-as-published": REWARD.replace("REJECTED", "")}


@pytest.mark.parametrize("case", sorted(GUARDS))
def test_a_cut_beside_a_difference_that_belongs_is_no_finding(tmp_path, case):
    script = tmp_path / "train.py"
    script.write_text(GUARDS[case], encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    assert code == 0 and not failures(report), report["findings"]
