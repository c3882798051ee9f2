"""Skip-gram with negative sampling (word2vec), then a fine-tuned linear probe on the vectors.

Paper: Tomas Mikolov, Ilya Sutskever, Kai Chen, Greg Corrado and Jeffrey Dean, "Distributed
Representations of Words and Phrases and their Compositionality", NeurIPS 2013,
arXiv:1310.4546. Reference implementations: tmikolov/word2vec, word2vec.c (InitUnigramTable:
negatives drawn from the unigram distribution raised to the power 3/4; InitNet: syn0 uniform in
+-0.5/dim and syn1neg zero; TrainModelThread, skip-gram branch with negative sampling and a
random shrink b of the window); Andras7/word2vec-pytorch, word2vec/model.py
(SkipGramModel.forward: u_embeddings for centre words, v_embeddings for context and negative
words, clamped scores and log-sigmoid loss) and word2vec/trainer.py (Word2VecTrainer.train:
sparse embeddings and one SparseAdam over the whole model, zero_grad / backward / step per
batch). Negatives are drawn here with torch.multinomial from the same 3/4-power distribution
instead of a precomputed table.

A synthetic corpus of 4000 tokens over 40 words is sampled from a random Markov chain whose
words fall into four topics: a word is mostly followed by a word of its own topic. Skip-gram
pairs (centre, context) are taken within a window of at most 2, shrunk at random per position
as in word2vec.c. Phase 1 trains the input table (the word vectors) and the separate output
(context) table with the negative-sampling objective, log sigma(u.v) plus the sum over five
negatives of log sigma(-u.v_neg), with one SparseAdam over both tables; the output table starts
at zero, so the input table only starts to move once the output table has. Phase 2 labels 24
of the 40 words with their topic and trains a linear probe on the input vectors while
fine-tuning those vectors (a SparseAdam for the table at a small learning rate and an Adam for
the probe); the topic of the other 16 words is then predicted under torch.no_grad(). Nothing
is cut in either phase: the loss of phase 2 reaches both the probe and the word vectors.
Bug: the phase-1 SparseAdam is built over model.in_embed.parameters() only, so the output
(context) table gets gradients but is never stepped; it stays at zero, and with it every
gradient reaching the word vectors is zero, so phase 1 trains nothing.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--dim", type=int, default=16)
parser.add_argument("--window", type=int, default=2)
parser.add_argument("--negatives", type=int, default=5)
parser.add_argument("--batch", type=int, default=256)
parser.add_argument("--sgns_steps", type=int, default=50)
parser.add_argument("--probe_steps", type=int, default=30)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)

VOCAB = 40
TOPICS = 4
CORPUS_LEN = 4000


def make_corpus():
    topic = torch.arange(VOCAB) // (VOCAB // TOPICS)
    same = (topic[:, None] == topic[None, :]).float()
    popularity = -0.08 * torch.arange(VOCAB).remainder(VOCAB // TOPICS).float()
    logits = torch.randn(VOCAB, VOCAB) + 3.0 * same + popularity[None, :]
    trans = F.softmax(logits, dim=1)
    tokens = torch.empty(CORPUS_LEN, dtype=torch.long)
    w = int(torch.randint(0, VOCAB, ()))
    for i in range(CORPUS_LEN):
        tokens[i] = w
        w = int(torch.multinomial(trans[w], 1))
    return tokens, topic


def skipgram_pairs(tokens, window):
    # word2vec.c: for every position a window b in 1..window, contexts at distance <= b
    n = tokens.numel()
    b = torch.randint(1, window + 1, (n,))
    centres, contexts = [], []
    for d in range(1, window + 1):
        pos = torch.arange(n)
        for j in (pos - d, pos + d):
            keep = (b >= d) & (j >= 0) & (j < n)
            centres.append(tokens[pos[keep]])
            contexts.append(tokens[j[keep]])
    return torch.cat(centres), torch.cat(contexts)


def noise_distribution(tokens, power=0.75):
    counts = torch.bincount(tokens, minlength=VOCAB).float()
    probs = counts.pow(power)
    return probs / probs.sum()


class SkipGram(nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.in_embed = nn.Embedding(vocab, dim, sparse=True)
        self.out_embed = nn.Embedding(vocab, dim, sparse=True)
        bound = 0.5 / dim
        nn.init.uniform_(self.in_embed.weight, -bound, bound)
        nn.init.zeros_(self.out_embed.weight)

    def forward(self, centre, context, negatives):
        u = self.in_embed(centre)                      # (B, D)
        v = self.out_embed(context)                    # (B, D)
        v_neg = self.out_embed(negatives)              # (B, K, D)
        pos = (u * v).sum(-1).clamp(-10, 10)
        neg = torch.bmm(v_neg, u.unsqueeze(-1)).squeeze(-1).clamp(-10, 10)
        return -(F.logsigmoid(pos) + F.logsigmoid(-neg).sum(-1)).mean()


tokens, topic = make_corpus()
centres, contexts = skipgram_pairs(tokens, args.window)
noise = noise_distribution(tokens)
print(f"{centres.numel()} skip-gram pairs from {CORPUS_LEN} tokens")

model = SkipGram(VOCAB, args.dim)

# phase 1: skip-gram with negative sampling
optimizer = torch.optim.SparseAdam(model.in_embed.parameters(), lr=0.02)
for step in range(args.sgns_steps):
    idx = torch.randint(0, centres.numel(), (args.batch,))
    negatives = torch.multinomial(noise, args.batch * args.negatives, replacement=True)
    negatives = negatives.view(args.batch, args.negatives)
    optimizer.zero_grad()
    loss = model(centres[idx], contexts[idx], negatives)
    loss.backward()
    optimizer.step()
    if step % 10 == 0 or step == args.sgns_steps - 1:
        print(f"sgns step {step:3d}  loss {loss.item():.4f}")

# phase 2: linear probe for the topic of a word, fine-tuning the word vectors
labelled = torch.arange(VOCAB).remainder(VOCAB // TOPICS) < 6
train_words = torch.arange(VOCAB)[labelled]
other_words = torch.arange(VOCAB)[~labelled]
probe = nn.Linear(args.dim, TOPICS)
embed_optimizer = torch.optim.SparseAdam(model.in_embed.parameters(), lr=0.005)
probe_optimizer = torch.optim.Adam(probe.parameters(), lr=0.05)
for step in range(args.probe_steps):
    words = train_words[torch.randint(0, train_words.numel(), (32,))]
    embed_optimizer.zero_grad()
    probe_optimizer.zero_grad()
    feats = model.in_embed(words)
    loss = F.cross_entropy(probe(feats), topic[words])
    loss.backward()
    embed_optimizer.step()
    probe_optimizer.step()
    if step % 10 == 0 or step == args.probe_steps - 1:
        print(f"probe step {step:3d}  loss {loss.item():.4f}")

with torch.no_grad():
    pred = probe(model.in_embed(other_words)).argmax(-1)
    acc = (pred == topic[other_words]).float().mean()
print(f"topic accuracy on unlabelled words {acc.item():.3f}")

if args.out:
    torch.save({"skipgram": model.state_dict(), "probe": probe.state_dict()}, args.out)
