"""A GRU encoder-decoder at a tiny size, written after the PyTorch tutorial "NLP From Scratch:
Translation with a Sequence to Sequence Network and Attention"
(https://github.com/pytorch/tutorials/blob/main/intermediate_source/seq2seq_translation_tutorial.py;
Sutskever et al. 2014, Cho et al. 2014): an encoder and a teacher-forced decoder, each with its
own optimizer, ``NLLLoss`` over the decoder's log-probabilities. Changed for the test: the
gradient is accumulated over ``accumulation_steps`` micro-batches, each loss divided by their
number, and the gradients are cleared by ``p.grad = None`` over both networks' parameters
after the two steps (the PyTorch performance tuning guide's alternative to ``zero_grad()``,
https://github.com/pytorch/tutorials/blob/main/recipes_source/recipes/tuning_guide.py). The task,
made in the script: reverse a sequence of five digits. Injected bug: the
``p.grad = None`` loop moved into the micro-batch loop, before each ``backward()``: each update
uses the last micro-batch's gradient only."""

import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--updates", type=int, default=3)
parser.add_argument("--accumulation-steps", type=int, default=3)
parser.add_argument("--batch-size", type=int, default=4)
parser.add_argument("--hidden", type=int, default=16)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)
SOS, VOCAB, LENGTH = 10, 11, 5


def pairs(n):
    source = torch.randint(0, 10, (n, LENGTH))
    return source, source.flip(1)


class EncoderRNN(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, hidden)
        self.gru = nn.GRU(hidden, hidden, batch_first=True)

    def forward(self, source):
        return self.gru(self.embedding(source))


class DecoderRNN(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, hidden)
        self.gru = nn.GRU(hidden, hidden, batch_first=True)
        self.out = nn.Linear(hidden, VOCAB)

    def forward(self, hidden, target):
        start = torch.full((target.size(0), 1), SOS)
        inputs = torch.cat([start, target[:, :-1]], dim=1)   # teacher forcing
        output, _ = self.gru(self.embedding(inputs), hidden)
        return torch.log_softmax(self.out(output), dim=-1)


encoder, decoder = EncoderRNN(args.hidden), DecoderRNN(args.hidden)
encoder_optimizer = torch.optim.SGD(encoder.parameters(), lr=0.5, momentum=0.9)
decoder_optimizer = torch.optim.SGD(decoder.parameters(), lr=0.5, momentum=0.9)
criterion = nn.NLLLoss()
parameters = [*encoder.parameters(), *decoder.parameters()]
for update in range(args.updates):
    for _micro in range(args.accumulation_steps):
        source, target = pairs(args.batch_size)
        for p in parameters:
            p.grad = None
        _, encoder_hidden = encoder(source)
        decoder_outputs = decoder(encoder_hidden, target)
        loss = criterion(decoder_outputs.reshape(-1, VOCAB), target.reshape(-1))
        (loss / args.accumulation_steps).backward()
    encoder_optimizer.step()
    decoder_optimizer.step()
    print(f"update {update}: loss {loss.item():.4f}")

if args.out:
    torch.save({"encoder": encoder.state_dict(), "decoder": decoder.state_dict()}, args.out)
