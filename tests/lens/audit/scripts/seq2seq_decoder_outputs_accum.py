"""A GRU encoder-decoder trained with teacher forcing and gradient accumulation, its decoder's
outputs collected step by step in a list made for each batch, at a tiny size, written after the
PyTorch tutorial "NLP From Scratch: Translation with a Sequence to Sequence Network and
Attention" (pytorch/tutorials, intermediate_source/seq2seq_translation_tutorial.py:
``EncoderRNN`` an embedding and a GRU, ``DecoderRNN`` an embedding, a GRU and a linear output
run one step per target position from the start-of-sequence token with the target token fed
back in, each step's output appended to ``decoder_outputs``, the list concatenated along the
time axis and log-softmaxed for ``NLLLoss``) with gradient accumulation over 2 batches
(``loss / accum`` backpropagated for each batch, both optimizers stepped and cleared under
``if (i + 1) % accum == 0:``). The list is made inside the loop for each batch and read by that
batch's loss only. The data, in the script: batches of 8 random sequences of 5 tokens from 6,
the target the source reversed. 16 batches, 8 steps. ``--out PATH`` saves both state_dicts."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn, optim

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--batches", type=int, default=16)
parser.add_argument("--accum", type=int, default=2)
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--length", type=int, default=5)
parser.add_argument("--tokens", type=int, default=6)
parser.add_argument("--hidden", type=int, default=16)
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)
SOS_token = 0
vocab = args.tokens + 1


class EncoderRNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(vocab, args.hidden)
        self.gru = nn.GRU(args.hidden, args.hidden, batch_first=True)

    def forward(self, src):
        return self.gru(self.embedding(src))


class DecoderRNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(vocab, args.hidden)
        self.gru = nn.GRU(args.hidden, args.hidden, batch_first=True)
        self.out = nn.Linear(args.hidden, vocab)

    def forward_step(self, token, hidden):
        output, hidden = self.gru(F.relu(self.embedding(token)), hidden)
        return self.out(output), hidden


def get_batch():
    src = torch.randint(1, vocab, (args.batch_size, args.length))
    return src, src.flip(1)


encoder, decoder = EncoderRNN(), DecoderRNN()
encoder_optimizer = optim.Adam(encoder.parameters(), lr=args.lr)
decoder_optimizer = optim.Adam(decoder.parameters(), lr=args.lr)
criterion = nn.NLLLoss()

for i in range(args.batches):
    input_tensor, target_tensor = get_batch()
    _, decoder_hidden = encoder(input_tensor)
    decoder_input = torch.full((args.batch_size, 1), SOS_token, dtype=torch.long)
    decoder_outputs = []
    for di in range(args.length):
        decoder_output, decoder_hidden = decoder.forward_step(decoder_input, decoder_hidden)
        decoder_outputs.append(decoder_output)
        decoder_input = target_tensor[:, di].unsqueeze(1)  # teacher forcing
    decoder_outputs = F.log_softmax(torch.cat(decoder_outputs, dim=1), dim=-1)
    loss = criterion(decoder_outputs.view(-1, vocab), target_tensor.view(-1))
    (loss / args.accum).backward()
    if (i + 1) % args.accum == 0:
        encoder_optimizer.step()
        decoder_optimizer.step()
        encoder_optimizer.zero_grad()
        decoder_optimizer.zero_grad()
    print(f"batch {i}: loss {loss.item():.4f}")

if args.out:
    torch.save({"encoder": encoder.state_dict(), "decoder": decoder.state_dict()}, args.out)
