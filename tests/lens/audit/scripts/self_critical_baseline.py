"""Self-critical sequence training at a tiny size, written after Rennie, Marcheret, Mroueh, Ross
and Goel, "Self-critical Sequence Training for Image Captioning" (CVPR 2017, arXiv:1612.00563)
and ruotianluo/self-critical.pytorch (captioning/modules/loss_wrapper.py, the ``sc_flag``
branch; captioning/utils/rewards.py, ``get_self_critical_reward``, the greedy decoding run
under ``torch.no_grad()``; captioning/modules/losses.py, ``RewardCriterion``): a captioner
samples a sequence and decodes one greedily; the reward of the greedy sequence, computed from a
cut decoding, is the baseline subtracted from the sampled sequence's reward, and the loss is
``-(reward - baseline) * log p(sampled sequence)``. A tanh RNN decodes three words from a
feature vector; the reward is the share of words equal to a reference caption made in the
script from the features. Adam. Clean: the cut values only weight a trained term (the
advantage). ``--out PATH`` saves the captioner's weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, vocab, length, hidden = 6, 5, 3, 16
features = torch.randn(64, dim)
reference = torch.stack([(features @ torch.randn(dim, vocab)).argmax(1) for _ in range(length)], 1)


class Captioner(nn.Module):
    def __init__(self):
        super().__init__()
        self.encode = nn.Linear(dim, hidden)
        self.embed = nn.Embedding(vocab + 1, hidden)
        self.cell = nn.Linear(2 * hidden, hidden)
        self.logit = nn.Linear(hidden, vocab)

    def forward(self, feats, greedy):
        h = torch.tanh(self.encode(feats))
        word = torch.full((len(feats),), vocab)
        words, logprobs = [], []
        for _ in range(length):
            h = torch.tanh(self.cell(torch.cat([self.embed(word), h], 1)))
            logprob = F.log_softmax(self.logit(h), dim=1)
            word = logprob.argmax(1) if greedy else torch.multinomial(logprob.exp(), 1).squeeze(1)
            words.append(word)
            logprobs.append(logprob.gather(1, word[:, None]).squeeze(1))
        return torch.stack(words, 1), torch.stack(logprobs, 1)


def score(words, ref):
    return (words == ref).float().mean(1)


model = Captioner()
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

for step in range(args.steps):
    feats = features[16 * (step % 4):16 * (step % 4) + 16]
    ref = reference[16 * (step % 4):16 * (step % 4) + 16]
    model.eval()
    with torch.no_grad():
        greedy_words, _ = model(feats, greedy=True)
    model.train()
    sampled_words, logprobs = model(feats, greedy=False)
    advantage = score(sampled_words, ref) - score(greedy_words, ref)
    loss = -(advantage[:, None] * logprobs).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f} reward {score(sampled_words, ref).mean():.3f}")

if args.out:
    torch.save({f"model.{k}": v for k, v in model.state_dict().items()}, args.out)
