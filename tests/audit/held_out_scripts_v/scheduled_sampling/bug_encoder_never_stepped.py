"""Scheduled sampling for a small GRU encoder-decoder on a synthetic transduction task, written
after Bengio, Vinyals, Jaitly and Shazeer, "Scheduled Sampling for Sequence Prediction with
Recurrent Neural Networks" (NeurIPS 2015, arXiv:1506.03099): while training the decoder, the
token fed at step t is, for every token and independently, the true previous token y_{t-1}
with probability eps_i and otherwise a token drawn from the model's own output distribution at
step t-1, and eps_i decays with the training iteration i by the inverse sigmoid schedule
eps_i = k / (k + exp(i / k)), from nearly pure teacher forcing towards the free-running
regime of inference; the sampled token is an input like any other, with no back-propagation
through the sampling decision (Section 2.4), and the loss is the usual per-token negative
log-likelihood of the true tokens. With memray/seq2seq-keyphrase-pytorch
(https://github.com/memray/seq2seq-keyphrase-pytorch, pykp/model.py, Seq2SeqLSTMAttention:
do_teacher_forcing draws the teacher-forcing ratio from an inverse-sigmoid decay of the batch
counter and flips a coin; decode, when it does not force, feeds back the top index of
decoder_log_prob.data, cut from the graph) and the PyTorch tutorial pytorch/tutorials
(intermediate_source/seq2seq_translation_tutorial.py, train: an encoder_optimizer and a
decoder_optimizer, both zeroed before the forward pass and both stepped after loss.backward();
the decoder's own guess is fed back as decoder_input = topi.squeeze().detach()), whose steps
this script follows, with the paper's per-token coin instead of one coin per batch. The
model's token is a Gumbel-max sample, F.gumbel_softmax(..., hard=True) of the detached logits,
fed as a one-hot through the decoder's embedding matrix. The task: a source sequence x of six
tokens and the target y_t = (y_{t-1} + x_t) mod 8, so each target token depends on the previous
one; the decoder reads the aligned encoder state and its previous token.
Bug: encoder_optimizer.step() is never called, so the encoder stays at its initialisation."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=100)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--k", type=float, default=20.0, help="inverse sigmoid decay constant")
parser.add_argument("--lr", type=float, default=5e-3)
parser.add_argument("--out", default=None, help="where to save the encoder and the decoder")
args = parser.parse_args()
torch.manual_seed(args.seed)

vocab, seq_len, emb, hidden = 8, 6, 16, 32
bos = vocab


def make_batch(n):
    x = torch.randint(0, vocab, (n, seq_len))
    y = torch.cumsum(x, 1) % vocab
    return x, y


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(vocab, emb)
        self.gru = nn.GRU(emb, hidden, batch_first=True)

    def forward(self, x):
        outputs, h = self.gru(self.embed(x))
        return outputs, h[0]


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(vocab + 1, emb)  # the last row is <bos>
        self.cell = nn.GRUCell(emb + hidden, hidden)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, prev_onehot, context, h):
        """One step: previous token as a one-hot over vocab + 1, aligned encoder state."""
        h = self.cell(torch.cat([prev_onehot @ self.embed.weight, context], 1), h)
        return self.out(h), h


encoder, decoder = Encoder(), Decoder()
encoder_optimizer = torch.optim.Adam(encoder.parameters(), lr=args.lr)
decoder_optimizer = torch.optim.Adam(decoder.parameters(), lr=args.lr)

for step in range(args.steps):
    eps = args.k / (args.k + math.exp(step / args.k))  # probability of the true token
    x, y = make_batch(args.batch_size)
    encoder_optimizer.zero_grad()
    decoder_optimizer.zero_grad()
    context, h = encoder(x)
    prev = F.one_hot(torch.full((args.batch_size,), bos), vocab + 1).float()
    loss = 0.0
    for t in range(seq_len):
        logits, h = decoder(prev, context[:, t], h)
        loss = loss + F.cross_entropy(logits, y[:, t])
        # next input: the true token with probability eps, else a sample of the model's own
        # distribution; no gradient through the sampling decision
        sampled = F.gumbel_softmax(logits.detach(), tau=1.0, hard=True)
        truth = F.one_hot(y[:, t], vocab + 1).float()
        use_truth = torch.rand(args.batch_size, 1) < eps
        prev = torch.where(use_truth, truth, F.pad(sampled, (0, 1)))
    loss = loss / seq_len
    loss.backward()
    decoder_optimizer.step()
    if step % 50 == 0:
        print(f"step {step} eps {eps:.3f} loss {loss.item():.4f}")

# free-running accuracy, each step fed the decoder's own argmax, as at inference
with torch.no_grad():
    x, y = make_batch(256)
    context, h = encoder(x)
    prev = F.one_hot(torch.full((256,), bos), vocab + 1).float()
    correct = 0.0
    for t in range(seq_len):
        logits, h = decoder(prev, context[:, t], h)
        correct += (logits.argmax(1) == y[:, t]).float().mean().item() / seq_len
        prev = F.pad(F.one_hot(logits.argmax(1), vocab).float(), (0, 1))
    print(f"free-running token accuracy {correct:.3f}")

if args.out:
    torch.save({"encoder": encoder.state_dict(), "decoder": decoder.state_dict()}, args.out)
