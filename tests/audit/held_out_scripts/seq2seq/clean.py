"""A sequence-to-sequence forecaster with scheduled sampling at a tiny size, written after
Bengio et al., "Scheduled Sampling for Sequence Prediction with Recurrent Neural Networks"
(arXiv:1506.03099) and the PyTorch seq2seq tutorial (pytorch/tutorials
intermediate_source/seq2seq_translation_tutorial.py: an ``EncoderRNN`` and a ``DecoderRNN``
of GRUs, teacher forcing, and without it the decoder's own output fed back as its next input,
"detach from history as input"). Here the tokens are points of noisy sine waves, the decoder
regresses the next point, and teacher forcing is used for the first ``--forcing-iters``
iterations only; after that the decoder reads its own detached predictions. As published:
clean."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iters", type=int, default=30)
parser.add_argument("--forcing-iters", type=int, default=20)
parser.add_argument("--hidden-size", type=int, default=16)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

SRC_LEN, TGT_LEN, BATCH = 8, 6, 16


def make_batch():
    phase = torch.rand(BATCH, 1) * 6.28
    freq = 0.5 + torch.rand(BATCH, 1)
    t = torch.arange(SRC_LEN + TGT_LEN).float()[None]
    wave = torch.sin(freq * t + phase) + 0.05 * torch.randn(BATCH, SRC_LEN + TGT_LEN)
    return wave[:, :SRC_LEN, None], wave[:, SRC_LEN:, None]


class EncoderRNN(nn.Module):
    def __init__(self, hidden_size):
        super().__init__()
        self.embedding = nn.Linear(1, hidden_size)
        self.gru = nn.GRU(hidden_size, hidden_size, batch_first=True)

    def forward(self, input):
        return self.gru(torch.tanh(self.embedding(input)))


class DecoderRNN(nn.Module):
    def __init__(self, hidden_size):
        super().__init__()
        self.embedding = nn.Linear(1, hidden_size)
        self.gru = nn.GRU(hidden_size, hidden_size, batch_first=True)
        self.out = nn.Linear(hidden_size, 1)

    def forward_step(self, input, hidden):
        output, hidden = self.gru(torch.tanh(self.embedding(input)), hidden)
        return self.out(output), hidden

    def forward(self, encoder_hidden, last_source, target_tensor, teacher_forcing):
        decoder_input = last_source
        decoder_hidden = encoder_hidden
        decoder_outputs = []
        for i in range(TGT_LEN):
            decoder_output, decoder_hidden = self.forward_step(decoder_input, decoder_hidden)
            decoder_outputs.append(decoder_output)
            if teacher_forcing:
                decoder_input = target_tensor[:, i].unsqueeze(1)
            else:
                decoder_input = decoder_output.detach()
        return torch.cat(decoder_outputs, dim=1)


encoder = EncoderRNN(args.hidden_size)
decoder = DecoderRNN(args.hidden_size)
encoder_optimizer = torch.optim.Adam(encoder.parameters(), lr=1e-2)
decoder_optimizer = torch.optim.Adam(decoder.parameters(), lr=1e-2)

for iteration in range(args.iters):
    input_tensor, target_tensor = make_batch()
    teacher_forcing = iteration < args.forcing_iters
    encoder_optimizer.zero_grad()
    decoder_optimizer.zero_grad()
    _, encoder_hidden = encoder(input_tensor)
    decoder_outputs = decoder(encoder_hidden, input_tensor[:, -1:], target_tensor,
                              teacher_forcing)
    loss = F.mse_loss(decoder_outputs, target_tensor)
    loss.backward()
    encoder_optimizer.step()
    decoder_optimizer.step()
    if iteration % 5 == 0:
        print(f"iteration {iteration} forcing {teacher_forcing} loss {loss.item():.4f}")

if args.out:
    torch.save({"encoder": encoder.state_dict(), "decoder": decoder.state_dict()}, args.out)
