"""An encoder-decoder trained with teacher forcing, its decoder's outputs collected step by step,
at a tiny size, written after the PyTorch tutorial "NLP From Scratch: Translation with a
Sequence to Sequence Network and Attention" (pytorch/tutorials,
intermediate_source/seq2seq_translation_tutorial.py: the decoder runs one step per target
position from the start-of-sequence token, feeds the target token back in (teacher forcing),
appends each step's output to ``decoder_outputs``, and ``train_epoch`` takes the negative
log-likelihood of the log-softmaxed outputs against the targets, backpropagates, and steps the
encoder's and the decoder's optimizers). Here the training loop collects the decoder's outputs
and the targets in two lists made anew for each batch and pairs them by ``zip``; the lists are
also made before the loop, so that the last batch's predictions can be printed after it. The
backward keeps its graph (``retain_graph=True``). The networks are embedding tables in the
vocabulary's size: the encoder's context is the mean of its table's rows for the source, the
decoder's state, read as the logits, is ``tanh(decay * state + table[token])`` started at the
context. The data, in the script: batches of 16 random sequences of 5 tokens from 7, the target
the source reversed. 12 batches. ``--out PATH`` saves both state_dicts."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn, optim

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--batches", type=int, default=12)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--length", type=int, default=5)
parser.add_argument("--tokens", type=int, default=7)
parser.add_argument("--decay", type=float, default=0.5)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)
SOS_token = 0
vocab = args.tokens + 1


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(vocab, vocab)

    def forward(self, src):
        return self.embedding(src).mean(dim=1)


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(vocab, vocab)

    def forward(self, token, hidden):
        return torch.tanh(args.decay * hidden + self.embedding(token))


def get_batch():
    src = torch.randint(1, vocab, (args.batch_size, args.length))
    return src, src.flip(1)


encoder, decoder = Encoder(), Decoder()
encoder_optimizer = optim.Adam(encoder.parameters(), lr=args.lr)
decoder_optimizer = optim.Adam(decoder.parameters(), lr=args.lr)
criterion = nn.NLLLoss()
decoder_outputs, targets = [], []

for i in range(args.batches):
    input_tensor, target_tensor = get_batch()
    decoder_outputs, targets = [], []
    encoder_optimizer.zero_grad()
    decoder_optimizer.zero_grad()

    decoder_hidden = torch.tanh(encoder(input_tensor))
    decoder_input = torch.full((args.batch_size,), SOS_token, dtype=torch.long)
    for di in range(args.length):
        decoder_hidden = decoder(decoder_input, decoder_hidden)
        decoder_outputs.append(F.log_softmax(decoder_hidden, dim=-1))
        targets.append(target_tensor[:, di])
        decoder_input = target_tensor[:, di]  # teacher forcing

    loss = sum(criterion(out, tgt) for out, tgt in zip(decoder_outputs, targets)) / args.length
    loss.backward(retain_graph=True)
    encoder_optimizer.step()
    decoder_optimizer.step()
    print(f"batch {i}: loss {loss.item():.4f}")

predicted = torch.stack(decoder_outputs[-args.length:], dim=1).argmax(-1)
print("last batch, first prediction:", predicted[0].tolist())

if args.out:
    torch.save({"encoder": encoder.state_dict(), "decoder": decoder.state_dict()}, args.out)
