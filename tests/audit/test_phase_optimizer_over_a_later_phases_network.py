"""A phase's optimizer built over the wrong network, where the network its loss trains is held by
an optimizer built up front for a later phase. SeqGAN (Yu et al. 2017, arXiv:1609.05473;
LantaoYu/SeqGAN's ``sequence_gan.py`` pre-trains the generator by maximum likelihood before the
adversarial epochs) and TimeGAN (Yoon et al. 2019; jsyoon0823/TimeGAN's ``timegan.py`` builds
every solver before its three phases) train one part in a first phase with an optimizer of its
own; a critic warmed up alone before the policy's updates (OpenRLHF's ``freezing_actor_steps``)
is the same shape. With the first phase's optimizer built over another network (a line copied
from the one below), its step moves nothing (no loss of the phase reaches what it holds), and
the network the phase's loss trains waits, untouched, for an optimizer that has not stepped yet.

Guards: both as published, and a pre-trained encoder whose gradient a later phase leaves unused
while a third phase's optimizer, built up front, holds it (an earlier phase trained it)."""

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

SEQGAN = HEAD + """
VOCAB = 12


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 16)
        self.rnn = nn.GRU(16, 16, batch_first=True)
        self.out = nn.Linear(16, VOCAB)

    def forward(self, tokens):
        h, _ = self.rnn(self.embed(tokens))
        return self.out(h)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 16)
        self.rnn = nn.GRU(16, 16, batch_first=True)
        self.out = nn.Linear(16, 1)

    def forward(self, tokens):
        h, _ = self.rnn(self.embed(tokens))
        return self.out(h[:, -1]).squeeze(-1)


gen, disc = Generator(), Discriminator()
pretrain_opt = torch.optim.Adam(PRETRAINED.parameters(), lr=1e-2)
gen_opt = torch.optim.Adam(gen.parameters(), lr=1e-3)
disc_opt = torch.optim.Adam(disc.parameters(), lr=1e-3)
real = torch.randint(VOCAB, (32, 8))

for epoch in range(4):   # maximum-likelihood pre-training of the generator
    logits = gen(real[:, :-1])
    mle = F.cross_entropy(logits.reshape(-1, VOCAB), real[:, 1:].reshape(-1))
    pretrain_opt.zero_grad()
    mle.backward()
    pretrain_opt.step()

for step in range(3):    # adversarial epochs: the discriminator, then the generator by REINFORCE
    with torch.no_grad():
        probs = F.softmax(gen(real[:, :-1]), -1)
        fake = torch.multinomial(probs.reshape(-1, VOCAB), 1).reshape(32, 7)
        fake = torch.cat([real[:, :1], fake], 1)
    d_loss = (F.binary_cross_entropy_with_logits(disc(real), torch.ones(32))
              + F.binary_cross_entropy_with_logits(disc(fake), torch.zeros(32)))
    disc_opt.zero_grad()
    d_loss.backward()
    disc_opt.step()
    logp = F.log_softmax(gen(fake[:, :-1]), -1).gather(-1, fake[:, 1:, None]).squeeze(-1)
    reward = torch.sigmoid(disc(fake)).detach()
    g_loss = -(logp.sum(1) * reward).mean()
    gen_opt.zero_grad()
    g_loss.backward()
    gen_opt.step()
if args.out:
    torch.save({"gen": gen.state_dict(), "disc": disc.state_dict()}, args.out)
"""

WARMUP = HEAD + """
from torch.distributions import Normal

actor = nn.Sequential(nn.Linear(6, 32), nn.Tanh(), nn.Linear(32, 2))
critic = nn.Sequential(nn.Linear(6, 32), nn.Tanh(), nn.Linear(32, 1))
warmup_opt = torch.optim.Adam(WARMED.parameters(), lr=1e-2)
actor_opt = torch.optim.Adam(actor.parameters(), lr=1e-3)
critic_opt = torch.optim.Adam(critic.parameters(), lr=1e-3)
states = torch.randn(64, 6)
returns = states[:, :2].sum(-1) + 0.1 * torch.randn(64)

for step in range(4):    # the critic warmed up alone, the actor frozen in place
    v_loss = F.mse_loss(critic(states).squeeze(-1), returns)
    warmup_opt.zero_grad()
    v_loss.backward()
    warmup_opt.step()

for step in range(3):
    dist = Normal(actor(states), 1.0)
    action = dist.sample()
    advantage = (returns - critic(states).squeeze(-1)).detach()
    pi_loss = -(dist.log_prob(action).sum(-1) * advantage).mean()
    actor_opt.zero_grad()
    pi_loss.backward()
    actor_opt.step()
    v_loss = F.mse_loss(critic(states).squeeze(-1), returns)
    critic_opt.zero_grad()
    v_loss.backward()
    critic_opt.step()
if args.out:
    torch.save({"actor": actor.state_dict(), "critic": critic.state_dict()}, args.out)
"""

BUGS = {
    "seqgan-pretraining": (SEQGAN.replace("PRETRAINED", "gen"),
                           SEQGAN.replace("PRETRAINED", "disc"), "gen."),
    "critic-warmup": (WARMUP.replace("WARMED", "critic"), WARMUP.replace("WARMED", "actor"),
                      "critic."),
}


@pytest.mark.parametrize("case", sorted(BUGS))
def test_a_phase_optimizer_over_the_wrong_network_is_named_and_rebuilt(tmp_path, case):
    published, buggy, network = BUGS[case]
    folder = twins(tmp_path, published, buggy)
    assert audit(tmp_path, folder / "published.py", "--watch", "1")[0] == 0
    code, report = audit(tmp_path, folder / "train.py", "--watch", "1")
    found = failures(report)
    assert code == 1 and found, report["findings"]
    assert any(n.startswith(network) for f in found for n in f["names"]), found
    line = next(i for i, text in enumerate(buggy.splitlines(), 1) if "_opt = " in text)
    assert any(at.startswith(f"train.py:{line}:") for f in found for at in f["at"]), found
    applied(folder, found[0]["kind"], "--watch", "1")
    assert cli("--watch", "1", "train.py", cwd=folder).returncode == 0
    assert_trains_as(folder)


PRETRAINED_ENCODER = HEAD + """
encoder = nn.Sequential(nn.Linear(8, 16), nn.ReLU())
decoder = nn.Linear(16, 8)
head = nn.Linear(16, 3)
ae_opt = torch.optim.Adam([*encoder.parameters(), *decoder.parameters()], lr=1e-2)
head_opt = torch.optim.Adam(head.parameters(), lr=1e-2)
finetune_opt = torch.optim.Adam([*encoder.parameters(), *head.parameters()], lr=1e-3)
x, y = torch.randn(32, 8), torch.randint(3, (32,))

for step in range(3):    # the autoencoder
    loss = F.mse_loss(decoder(encoder(x)), x)
    ae_opt.zero_grad()
    loss.backward()
    ae_opt.step()
for step in range(3):    # a probe on the pre-trained features, the encoder's gradient unused
    loss = F.cross_entropy(head(encoder(x)), y)
    head_opt.zero_grad()
    loss.backward()
    head_opt.step()
for step in range(3):    # fine-tuning the whole
    loss = F.cross_entropy(head(encoder(x)), y)
    finetune_opt.zero_grad()
    loss.backward()
    finetune_opt.step()
"""

GUARDS = {"seqgan-as-published": BUGS["seqgan-pretraining"][0],
          "critic-warmup-as-published": BUGS["critic-warmup"][0],
          "pretrained-encoder-left-for-a-later-phase": PRETRAINED_ENCODER}


@pytest.mark.parametrize("case", sorted(GUARDS))
def test_a_phase_whose_step_moves_what_its_loss_trains_is_no_failure(tmp_path, case):
    script = tmp_path / "train.py"
    script.write_text(GUARDS[case], encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    assert code == 0 and not failures(report), report["findings"]
