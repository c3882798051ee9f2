"""WaveNet trained with teacher forcing on a synthetic mu-law quantised signal.

van den Oord, Dieleman, Zen, Simonyan, Vinyals, Graves, Kalchbrenner, Senior, Kavukcuoglu,
"WaveNet: A Generative Model for Raw Audio", arXiv:1609.03499 (2016). Reference implementation:
GitHub vincentherrmann/pytorch-wavenet, wavenet_model.py (WaveNetModel.wavenet,
WaveNetModel.activation_unit, WaveNetModel.forward), wavenet_training.py (WavenetTrainer.train)
and audio_data.py (WavenetDataset.__getitem__, quantize_data, mu_law_encoding).

A long synthetic waveform (two drifting sinusoids plus noise) is mu-law companded and quantised
to 32 classes. Random windows of receptive_field + output_length samples are cut from it; the
network sees the first receptive_field + output_length - 1 samples, scaled back to [-1, 1], and
predicts a softmax over the class of each of the last output_length samples, so every target is
the sample that follows the window of true samples the prediction conditions on (teacher
forcing). The stack is a 1x1 start convolution, then two blocks of four dilated causal
convolutions (kernel 2, dilations 1, 2, 4, 8) with the gated unit tanh(W_f * x) * sigmoid(W_g * x),
a 1x1 residual convolution added to the cropped layer input and a 1x1 skip convolution summed
over layers, then ReLU, 1x1, ReLU, 1x1 to the class logits. Nothing is detached during
training: the residual shortcut and the skip sum both carry gradient to every layer. The loss is
the cross-entropy over all predicted positions; each step runs zero_grad, backward, gradient
norm clipping (the trainer's gradient_clipping option) and an Adam step over all parameters.
Bug: clip_grad_norm_ is called before loss.backward(), right after zero_grad, so it
clips nothing and the unclipped gradients of this step reach Adam.
"""
import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("--seed", type=int, default=0)
p.add_argument("--out", type=str, default=None)
p.add_argument("--steps", type=int, default=50)
p.add_argument("--batch_size", type=int, default=8)
p.add_argument("--lr", type=float, default=2e-3)
p.add_argument("--clip", type=float, default=0.5)
args = p.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)

CLASSES = 32


def mu_law_quantize(x, classes=CLASSES):
    mu = classes - 1
    mu_x = torch.sign(x) * torch.log1p(mu * x.abs()) / math.log1p(mu)
    return ((mu_x + 1) / 2 * mu + 0.5).long().clamp(0, mu)


class WaveNet(nn.Module):
    def __init__(self, layers=4, blocks=2, residual_channels=16, dilation_channels=16,
                 skip_channels=32, end_channels=32, classes=CLASSES, output_length=32,
                 kernel_size=2):
        super().__init__()
        self.output_length = output_length
        self.dilations = [2 ** i for _ in range(blocks) for i in range(layers)]
        self.receptive_field = 1 + (kernel_size - 1) * sum(self.dilations)
        self.start_conv = nn.Conv1d(1, residual_channels, 1, bias=False)
        self.filter_convs = nn.ModuleList()
        self.gate_convs = nn.ModuleList()
        self.residual_convs = nn.ModuleList()
        self.skip_convs = nn.ModuleList()
        for d in self.dilations:
            self.filter_convs.append(nn.Conv1d(residual_channels, dilation_channels,
                                               kernel_size, dilation=d, bias=False))
            self.gate_convs.append(nn.Conv1d(residual_channels, dilation_channels,
                                             kernel_size, dilation=d, bias=False))
            self.residual_convs.append(nn.Conv1d(dilation_channels, residual_channels, 1,
                                                 bias=False))
            self.skip_convs.append(nn.Conv1d(dilation_channels, skip_channels, 1, bias=False))
        self.end_conv_1 = nn.Conv1d(skip_channels, end_channels, 1)
        self.end_conv_2 = nn.Conv1d(end_channels, classes, 1)

    def forward(self, inp):
        inp = inp[:, :, -(self.receptive_field + self.output_length - 1):]
        x = self.start_conv(inp)
        skip = 0
        for i, d in enumerate(self.dilations):
            residual = x
            h = torch.tanh(self.filter_convs[i](x)) * torch.sigmoid(self.gate_convs[i](x))
            s = self.skip_convs[i](h[:, :, -self.output_length:])
            skip = s + skip
            x = self.residual_convs[i](h) + residual[:, :, d:]
        x = F.relu(skip)
        x = F.relu(self.end_conv_1(x))
        x = self.end_conv_2(x)
        n, c, l = x.shape
        return x.transpose(1, 2).reshape(n * l, c)


def make_waveform(n=6000):
    t = torch.arange(n, dtype=torch.float32)
    f1 = 0.031 + 0.004 * torch.sin(2 * math.pi * t / 1500.0)
    f2 = 0.077
    phase1 = 2 * math.pi * torch.cumsum(f1, 0)
    wave = 0.55 * torch.sin(phase1) + 0.3 * torch.sin(2 * math.pi * f2 * t + 0.4)
    wave = wave + 0.03 * torch.randn(n)
    return mu_law_quantize(wave.clamp(-1.0, 1.0))


def sample_batch(quantized, item_length, output_length, batch_size):
    starts = torch.randint(0, quantized.numel() - item_length - 1, (batch_size,))
    windows = torch.stack([quantized[s:s + item_length + 1] for s in starts.tolist()])
    example = 2.0 * windows[:, :item_length].float() / CLASSES - 1.0
    target = windows[:, -output_length:]
    return example.unsqueeze(1), target


quantized = make_waveform()
model = WaveNet()
item_length = model.receptive_field + model.output_length - 1
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

model.train()
for step in range(args.steps):
    x, target = sample_batch(quantized, item_length, model.output_length, args.batch_size)
    output = model(x)
    loss = F.cross_entropy(output, target.reshape(-1))
    optimizer.zero_grad()
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
    loss.backward()
    optimizer.step()

    if step % 20 == 0 or step == args.steps - 1:
        acc = (output.argmax(-1) == target.reshape(-1)).float().mean().item()
        print("step %d  loss %.4f  acc %.3f  grad_norm %.3f" % (
            step, loss.item(), acc, float(grad_norm)))

if args.out is not None:
    torch.save({"model": model.state_dict()}, args.out)
