"""A tiny DeepSpeech-style recurrent acoustic model with a learned filterbank, trained with CTC.

Papers: Alex Graves, Santiago Fernandez, Faustino Gomez and Juergen Schmidhuber, "Connectionist
Temporal Classification: Labelling Unsegmented Sequence Data with Recurrent Neural Networks",
ICML 2006; Dario Amodei et al., "Deep Speech 2: End-to-End Speech Recognition in English and
Mandarin", arXiv:1512.02595 (2015) (SortaGrad, batch-normalized bidirectional RNNs, CTC);
Tara N. Sainath, Brian Kingsbury, Abdel-rahman Mohamed and Bhuvana Ramabhadran, "Learning filter
banks within a deep neural network framework", ASRU 2013 (a filterbank trained by back-propagation
with its weights kept positive by an exponential); Daniel S. Park et al., "SpecAugment: A Simple
Data Augmentation Method for Automatic Speech Recognition", arXiv:1904.08779 (2019).
Reference implementation: SeanNaren/deepspeech.pytorch, deepspeech_pytorch/model.py (DeepSpeech:
MaskConv convolution front with BatchNorm and Hardtanh(0, 20) and padded frames zeroed; BatchRNN:
pack_padded_sequence, a bidirectional GRU whose two directions are summed; SequenceWise(BatchNorm1d
+ Linear without bias) as the classifier; training_step: log_softmax over the classes and
nn.CTCLoss(blank=0, reduction="sum", zero_infinity=True); on_after_backward: clip_grad_norm_;
configure_optimizers: learning-rate annealing per epoch), train.py (SGD with Nesterov momentum,
loss divided by the batch size, optimizer.zero_grad(), loss.backward(), clip_grad_norm_(max_norm),
optimizer.step(); the BucketingSampler's length-sorted batches in the first epoch, shuffled from
the second on; lr divided by learning_anneal after each epoch),
deepspeech_pytorch/loader/spec_augment.py (spec_augment: one frequency mask and one time mask set
to zero on the log-filterbank features).

The data are synthetic "utterances": each of five tokens has a random spectral prototype over 32
linear frequency bins, a label sequence of 2..4 tokens is rendered as 2..4 noisy frames per
token between silences, and utterances have different lengths. The model is a learned
filterbank front-end (12 filters, initialized triangular, weights exp(log_filters) so they stay
positive, log compression and per-utterance mean/variance normalization over the valid frames)
followed by the acoustic model (a Conv1d + BatchNorm + Hardtanh block with padded frames zeroed,
a bidirectional GRU with summed directions, BatchNorm + Linear to blank + 5 tokens). One SGD
optimizer with Nesterov momentum holds the front-end and the acoustic model. Phase 1 (SortaGrad
warm-up) takes one epoch of length-sorted batches without augmentation; phase 2 (the main loop)
shuffles the batches each epoch, applies SpecAugment-style frequency and time masks to the
front-end's output (the masks are data, the features keep their graph so the filterbank still
learns) and divides the learning rate by learning_anneal after each epoch. Both phases step as
zero_grad, CTC loss / batch, backward, gradient-norm clipping at 400, step. A greedy CTC decode
of held-out utterances under torch.no_grad() reports the token error rate.
As published: clean.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--n_train", type=int, default=128)
parser.add_argument("--n_eval", type=int, default=32)
parser.add_argument("--n_bins", type=int, default=32)
parser.add_argument("--n_filters", type=int, default=12)
parser.add_argument("--n_tokens", type=int, default=5)
parser.add_argument("--conv_channels", type=int, default=24)
parser.add_argument("--hidden", type=int, default=32)
parser.add_argument("--batch_size", type=int, default=8)
parser.add_argument("--main_epochs", type=int, default=3)
parser.add_argument("--lr", type=float, default=0.02)
parser.add_argument("--momentum", type=float, default=0.9)
parser.add_argument("--max_norm", type=float, default=400.0)
parser.add_argument("--learning_anneal", type=float, default=1.1)
parser.add_argument("--freq_mask", type=int, default=3)
parser.add_argument("--time_mask", type=int, default=4)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)

BLANK = 0


def make_utterances(n, prototypes):
    specs, labels = [], []
    for _ in range(n):
        n_lab = int(torch.randint(2, 5, (1,)))
        tokens = torch.randint(1, args.n_tokens + 1, (n_lab,))
        frames = [0] * int(torch.randint(1, 3, (1,)))
        for tok in tokens.tolist():
            frames += [tok] * int(torch.randint(2, 5, (1,)))
            frames += [0] * int(torch.randint(0, 2, (1,)))
        frames += [0] * int(torch.randint(1, 3, (1,)))
        base = prototypes[torch.tensor(frames)]
        noise = 1.0 + 0.3 * torch.randn(base.shape)
        specs.append((base * noise).clamp(min=0.0) + 0.05 * torch.rand(base.shape))
        labels.append(tokens)
    return specs, labels


def collate(specs, labels):
    lengths = torch.tensor([s.shape[0] for s in specs])
    batch = torch.zeros(len(specs), int(lengths.max()), specs[0].shape[1])
    for i, s in enumerate(specs):
        batch[i, :s.shape[0]] = s
    targets = torch.cat(labels)
    target_lengths = torch.tensor([len(lab) for lab in labels])
    return batch, lengths, targets, target_lengths


def frame_mask(lengths, t_max):
    return torch.arange(t_max).unsqueeze(0) < lengths.unsqueeze(1)


def triangular_filters(n_bins, n_filters):
    centers = torch.linspace(0, n_bins - 1, n_filters + 2)
    width = float(centers[1] - centers[0])
    bins = torch.arange(n_bins).float()
    return (1.0 - (bins.unsqueeze(0) - centers[1:-1].unsqueeze(1)).abs() / width).clamp(min=0.0)


class LearnableFilterbank(nn.Module):
    def __init__(self, n_bins, n_filters):
        super().__init__()
        self.log_filters = nn.Parameter(torch.log(triangular_filters(n_bins, n_filters) + 1e-2))

    def forward(self, spec, lengths):
        energies = spec @ self.log_filters.exp().t()
        feats = torch.log(energies + 1e-6)
        mask = frame_mask(lengths, spec.shape[1]).unsqueeze(-1).float()
        n = lengths.view(-1, 1, 1).float()
        mean = (feats * mask).sum(1, keepdim=True) / n
        var = (((feats - mean) * mask) ** 2).sum(1, keepdim=True) / n
        return (feats - mean) / (var + 1e-5).sqrt() * mask


class AcousticModel(nn.Module):
    def __init__(self, n_feats, conv_channels, hidden, n_classes):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv1d(n_feats, conv_channels, 5, padding=2),
                                  nn.BatchNorm1d(conv_channels), nn.Hardtanh(0, 20))
        self.rnn = nn.GRU(conv_channels, hidden, bidirectional=True)
        self.fc = nn.Sequential(nn.BatchNorm1d(hidden), nn.Linear(hidden, n_classes, bias=False))

    def forward(self, feats, lengths):
        b, t, _ = feats.shape
        x = self.conv(feats.transpose(1, 2))
        x = x.masked_fill(~frame_mask(lengths, t).unsqueeze(1), 0.0)
        x = x.permute(2, 0, 1)
        packed = pack_padded_sequence(x, lengths, enforce_sorted=False)
        out, _ = self.rnn(packed)
        out, _ = pad_packed_sequence(out, total_length=t)
        out = out.view(t, b, 2, -1).sum(2)
        return self.fc(out.reshape(t * b, -1)).view(t, b, -1)


class SpeechModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.frontend = LearnableFilterbank(args.n_bins, args.n_filters)
        self.acoustic = AcousticModel(args.n_filters, args.conv_channels, args.hidden,
                                      args.n_tokens + 1)

    def forward(self, spec, lengths):
        return self.acoustic(self.frontend(spec, lengths), lengths)


def spec_augment(feats, lengths):
    b, t, f = feats.shape
    mask = torch.zeros(b, t, f, dtype=torch.bool)
    for i in range(b):
        fw = int(torch.randint(0, args.freq_mask + 1, (1,)))
        f0 = int(torch.randint(0, f - fw + 1, (1,)))
        mask[i, :, f0:f0 + fw] = True
        tw = int(torch.randint(0, args.time_mask + 1, (1,)))
        t0 = int(torch.randint(0, max(int(lengths[i]) - tw, 0) + 1, (1,)))
        mask[i, t0:t0 + tw, :] = True
    return feats.masked_fill(mask, 0.0)


def greedy_token_error(log_probs, lengths, labels):
    best = log_probs.argmax(-1).t()
    errors, total = 0, 0
    for i, lab in enumerate(labels):
        seq, prev = [], BLANK
        for k in best[i, :int(lengths[i])].tolist():
            if k != prev and k != BLANK:
                seq.append(k)
            prev = k
        ref = lab.tolist()
        d = list(range(len(seq) + 1))
        for r in ref:
            nd = [d[0] + 1]
            for j, h in enumerate(seq):
                nd.append(min(d[j + 1] + 1, nd[j] + 1, d[j] + (r != h)))
            d = nd
        errors += d[-1]
        total += len(ref)
    return errors / total


prototypes = (torch.rand(args.n_tokens + 1, args.n_bins) ** 3) * 4.0
prototypes[0] = 0.1
train_specs, train_labels = make_utterances(args.n_train, prototypes)
eval_specs, eval_labels = make_utterances(args.n_eval, prototypes)
eval_batch = collate(eval_specs, eval_labels)

by_length = sorted(range(args.n_train), key=lambda i: (train_specs[i].shape[0], i))
batches = [by_length[i:i + args.batch_size] for i in range(0, args.n_train, args.batch_size)]

model = SpeechModel()
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum,
                            nesterov=True)
ctc_loss = nn.CTCLoss(blank=BLANK, reduction="sum", zero_infinity=True)


def get_batch(idx):
    return collate([train_specs[i] for i in idx], [train_labels[i] for i in idx])


def evaluate(tag):
    model.eval()
    with torch.no_grad():
        spec, lengths, _, _ = eval_batch
        log_probs = model(spec, lengths).log_softmax(-1)
        ter = greedy_token_error(log_probs, lengths, eval_labels)
    model.train()
    print(f"{tag} eval token error {ter:.3f}")


# Phase 1: SortaGrad warm-up, one epoch of length-sorted batches, no augmentation.
model.train()
for step, idx in enumerate(batches):
    spec, lengths, targets, target_lengths = get_batch(idx)
    log_probs = model(spec, lengths).log_softmax(-1)
    loss = ctc_loss(log_probs, targets, lengths, target_lengths) / spec.shape[0]
    optimizer.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), args.max_norm)
    optimizer.step()
    if step % 5 == 0:
        print(f"warm-up step {step:3d} ctc {loss.item():.4f}")
evaluate("after warm-up")

# Phase 2: main loop, shuffled batches, SpecAugment masks, learning-rate annealing.
for epoch in range(args.main_epochs):
    for b in torch.randperm(len(batches)).tolist():
        spec, lengths, targets, target_lengths = get_batch(batches[b])
        feats = model.frontend(spec, lengths)
        feats = spec_augment(feats, lengths)
        log_probs = model.acoustic(feats, lengths).log_softmax(-1)
        loss = ctc_loss(log_probs, targets, lengths, target_lengths) / spec.shape[0]
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), args.max_norm)
        optimizer.step()
    for group in optimizer.param_groups:
        group["lr"] = group["lr"] / args.learning_anneal
    print(f"main epoch {epoch} ctc {loss.item():.4f}")
    evaluate(f"main epoch {epoch}")

if args.out:
    torch.save({"acoustic": model.acoustic.state_dict(),
                "log_filters": model.frontend.log_filters.detach().clone()}, args.out)
