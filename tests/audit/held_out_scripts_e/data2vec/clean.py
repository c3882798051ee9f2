"""data2vec (text) at a tiny size, written after Baevski, Hsu, Xu, Babu, Gu and Auli, "data2vec: A
General Framework for Self-supervised Learning in Speech, Vision and Language" (ICML 2022,
arXiv:2202.03555), section 3, with the text model of facebookresearch/fairseq
(https://github.com/facebookresearch/fairseq, examples/data2vec/models/data2vec_text.py) and its EMA
teacher (fairseq/modules/ema_module.py): the teacher is a deep copy of the student's Transformer
layers, run under torch.no_grad() on the unmasked sequence (embedded by the student's embedding, as
with ``ema_transformer_layers_only``) and updated after every step as an exponential moving average
of the student's layers, its decay annealed linearly; the targets are the average of the teacher's
top ``K`` layer outputs, each instance-normalised; the student sees the masked sequence and
regresses the targets at the masked positions through a linear head. Token sequences of a random
Markov chain made in the script. As published: clean."""

import argparse
import copy
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--top-k", type=int, default=2)
parser.add_argument("--ema-decay", type=float, default=0.9)
parser.add_argument("--ema-end-decay", type=float, default=0.99)
parser.add_argument("--mask-prob", type=float, default=0.3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

vocab, seq_len, d_model, n_layers = 12, 10, 16, 3
mask_index = vocab  # the embedding's extra row
transitions = F.softmax(2.0 * torch.randn(vocab, vocab), dim=1)


def batch(n):
    tokens = [torch.randint(0, vocab, (n,))]
    for _ in range(seq_len - 1):
        tokens.append(torch.multinomial(transitions[tokens[-1]], 1).squeeze(1))
    return torch.stack(tokens, 1)


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(vocab + 1, d_model)
        self.pos = nn.Parameter(0.02 * torch.randn(seq_len, d_model))
        self.layers = nn.ModuleList([
            nn.TransformerEncoderLayer(d_model, 2, 2 * d_model, dropout=0.0, batch_first=True)
            for _ in range(n_layers)])

    def embed_tokens(self, tokens):
        return self.embed(tokens) + self.pos


def run_layers(layers, x):
    outputs = []
    for layer in layers:
        x = layer(x)
        outputs.append(x)
    return outputs


@torch.no_grad()
def ema_step(teacher, student, decay):
    for ema_param, param in zip(teacher.parameters(), student.parameters()):
        ema_param.mul_(decay)
        ema_param.add_(param, alpha=1 - decay)


student = Encoder()
regression_head = nn.Linear(d_model, d_model)
teacher_layers = copy.deepcopy(student.layers)
optimizer = torch.optim.AdamW([*student.parameters(), *regression_head.parameters()], lr=3e-3,
                              weight_decay=0.01)
for step in range(args.steps):
    tokens = batch(args.batch_size)
    mask = torch.rand(tokens.shape) < args.mask_prob
    mask[:, 0] |= ~mask.any(1)
    with torch.no_grad():
        layer_outputs = run_layers(teacher_layers, student.embed_tokens(tokens))
        top = [F.instance_norm(out.transpose(1, 2)).transpose(1, 2)
               for out in layer_outputs[-args.top_k:]]
        targets = sum(top) / len(top)
    x = run_layers(student.layers, student.embed_tokens(tokens.masked_fill(mask, mask_index)))[-1]
    prediction = regression_head(x[mask])
    loss = F.mse_loss(prediction, targets[mask], reduction="none").sum(-1).mean()
    loss = loss / math.sqrt(d_model)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    decay = args.ema_decay + (args.ema_end_decay - args.ema_decay) * step / (args.steps - 1)
    ema_step(teacher_layers, student.layers, decay)
    print(f"step {step} regression loss {loss.item():.4f} ema decay {decay:.3f}")

if args.out:
    torch.save({"student": student.state_dict(), "head": regression_head.state_dict(),
                "teacher": teacher_layers.state_dict()}, args.out)
