"""Character-level LSTM language model trained with truncated BPTT, then fine-tuned.

Method: the character-level recurrent language model of Andrej Karpathy's char-rnn
(karpathy/char-rnn, train.lua; described in "The Unreasonable Effectiveness of Recurrent Neural
Networks", 2015) trained with truncated backpropagation through time as in Zaremba, Sutskever &
Vinyals, "Recurrent Neural Network Regularization", arXiv:1409.2329, 2014.
Reference implementation: pytorch/examples, word_language_model/main.py (batchify, get_batch,
repackage_hidden, train: the hidden state is detached at the start of every chunk, then
model.zero_grad(), forward, loss.backward(), clip_grad_norm_, and a manual SGD update through
p.data) and word_language_model/model.py (RNNModel: encoder embedding, LSTM, linear decoder).

A synthetic corpus is generated in the script from a small template grammar; a second corpus
with other templates over the same characters serves for fine-tuning. Each text is cut into
BATCH parallel streams and read in consecutive chunks of BPTT characters. The LSTM state is
carried from one chunk to the next so the model conditions on the whole past, but it is
detached at every chunk boundary (repackage_hidden), so gradients flow back only through the
current chunk. Phase 1 pre-trains with the reference's plain SGD (gradient norm clipped after
backward, parameters updated through .data); phase 2 fine-tunes all parameters on the second
text with torch.optim.SGD with momentum, again clipping after backward and before the step.
As published: clean.
"""
import argparse

import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)

BATCH = 16
BPTT = 25
EMB = 16
HID = 64
CLIP = 0.25
LR = 2.0
FT_LR = 0.1
PRE_EPOCHS = 3
FT_EPOCHS = 4

ADJ = ["red", "small", "old", "quick", "lazy"]
NOUN = ["cat", "dog", "bird", "fox", "mat", "tree"]
VERB = ["sees", "likes", "chases", "finds"]


def pick(words):
    return words[torch.randint(0, len(words), (1,)).item()]


def corpus_a(n_chars):
    out = []
    while sum(map(len, out)) < n_chars:
        out.append(f"the {pick(ADJ)} {pick(NOUN)} {pick(VERB)} the {pick(NOUN)}. ")
    return "".join(out)


def corpus_b(n_chars):
    out = []
    while sum(map(len, out)) < n_chars:
        out.append(f"a {pick(NOUN)} {pick(VERB)} a {pick(ADJ)} {pick(NOUN)}, ")
    return "".join(out)


text_a = corpus_a(6000)
text_b = corpus_b(2000)
chars = sorted(set(text_a) | set(text_b))
stoi = {ch: i for i, ch in enumerate(chars)}
ntok = len(chars)


def batchify(text, bsz):
    data = torch.tensor([stoi[ch] for ch in text], dtype=torch.long)
    nbatch = data.size(0) // bsz
    return data[:nbatch * bsz].view(bsz, -1).t().contiguous()


def get_batch(source, i):
    seq_len = min(BPTT, len(source) - 1 - i)
    return source[i:i + seq_len], source[i + 1:i + 1 + seq_len].reshape(-1)


def repackage_hidden(h):
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


class CharLSTM(nn.Module):
    def __init__(self, ntok, emb, hid):
        super().__init__()
        self.encoder = nn.Embedding(ntok, emb)
        self.rnn = nn.LSTM(emb, hid)
        self.decoder = nn.Linear(hid, ntok)
        self.hid = hid

    def forward(self, x, hidden):
        out, hidden = self.rnn(self.encoder(x), hidden)
        return self.decoder(out).view(-1, self.decoder.out_features), hidden

    def init_hidden(self, bsz):
        return torch.zeros(1, bsz, self.hid), torch.zeros(1, bsz, self.hid)


model = CharLSTM(ntok, EMB, HID)
criterion = nn.CrossEntropyLoss()
train_a = batchify(text_a, BATCH)
train_b = batchify(text_b, BATCH)

# phase 1: pre-training with truncated BPTT and manual SGD
for epoch in range(PRE_EPOCHS):
    hidden = model.init_hidden(BATCH)
    total, n = 0.0, 0
    for i in range(0, train_a.size(0) - 1, BPTT):
        data, targets = get_batch(train_a, i)
        hidden = repackage_hidden(hidden)
        model.zero_grad()
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-LR)
        total, n = total + loss.item(), n + 1
    print(f"pretrain epoch {epoch} loss {total / n:.4f}")

# phase 2: fine-tuning on the second corpus
optimizer = torch.optim.SGD(model.parameters(), lr=FT_LR, momentum=0.9)
for epoch in range(FT_EPOCHS):
    hidden = model.init_hidden(BATCH)
    total, n = 0.0, 0
    for i in range(0, train_b.size(0) - 1, BPTT):
        data, targets = get_batch(train_b, i)
        hidden = repackage_hidden(hidden)
        optimizer.zero_grad()
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        optimizer.step()
        total, n = total + loss.item(), n + 1
    print(f"finetune epoch {epoch} loss {total / n:.4f}")

if args.out:
    torch.save({"model": model.state_dict()}, args.out)
