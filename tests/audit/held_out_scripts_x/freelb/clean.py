"""FreeLB adversarial training of a tiny embedding + MLP text classifier on synthetic token
sequences, written after Zhu, Cheng, Gan, Sun, Goldstein and Liu, "FreeLB: Enhanced Adversarial
Training for Natural Language Understanding" (ICLR 2020, arXiv:1909.11764): an adversarial
perturbation delta is added to the word embeddings (not to the tokens) and improved by K steps
of normalised gradient ascent on the loss; at each of the K steps the loss on the perturbed
embeddings, divided by K, is backpropagated, so the parameter gradients of all K steps pile up
in .grad, and one optimizer step then descends the average over the ascent trajectory ("free"
large-batch training: K virtual batches for the price of one update). With the authors' code,
zhuchen03/FreeLB (https://github.com/zhuchen03/FreeLB, huggingface-transformers/examples/
run_glue_freelb.py, function train), whose steps this script follows: embeds_init is the word
embedding of the batch, with graph; delta starts uniform in [-1, 1] on the real tokens, scaled
by adv_init_mag / sqrt(length * dim) (norm_type "l2") and detached; in each ascent step delta
is made a leaf with requires_grad_(), inputs_embeds = delta + embeds_init goes through the
model, loss / adv_steps is backpropagated (into the parameters and into delta.grad); after the
last step the loop breaks, otherwise delta moves by adv_lr * delta.grad / ||delta.grad|| (the
norm per example), is projected back onto the adv_max_norm ball, detached, and embeds_init is
recomputed from the embedding layer (the backward freed its graph); the gradients are clipped,
the optimizer steps and the model's gradients are zeroed. Here the sentences are random tokens
of variable length, the label says whether there are more "positive" than "negative" tokens,
and the model pools a per-token MLP over the real tokens (no dropout, so the reference's fixed
dropout masks across the ascent steps are not needed).
As published: clean."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=80)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--adv-steps", type=int, default=3, help="K, the ascent steps")
parser.add_argument("--adv-lr", type=float, default=0.1)
parser.add_argument("--adv-init-mag", type=float, default=0.2)
parser.add_argument("--adv-max-norm", type=float, default=0.3)
parser.add_argument("--lr", type=float, default=1e-2)
parser.add_argument("--max-grad-norm", type=float, default=1.0)
parser.add_argument("--out", default=None, help="where to save the classifier")
args = parser.parse_args()
torch.manual_seed(args.seed)
torch.set_num_threads(1)

vocab, max_len, dim, hidden, n_classes = 40, 12, 16, 32, 2
pad = 0

# synthetic sentences: tokens 1-8 are "positive", 9-16 "negative", the rest neutral
n_sentences = 1000
lengths = torch.randint(4, max_len + 1, (n_sentences, 1))
mask_all = torch.arange(max_len) < lengths
tokens_all = torch.randint(1, vocab, (n_sentences, max_len)) * mask_all
positive = ((tokens_all >= 1) & (tokens_all <= 8)).sum(1)
negative = ((tokens_all >= 9) & (tokens_all <= 16)).sum(1)
labels_all = (positive > negative).long()


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, dim, padding_idx=pad)
        self.token_mlp = nn.Sequential(nn.Linear(dim, hidden), nn.Tanh())
        self.head = nn.Sequential(nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, n_classes))

    def forward(self, inputs_embeds, mask):
        h = self.token_mlp(inputs_embeds) * mask.unsqueeze(2)
        pooled = h.sum(1) / mask.sum(1, keepdim=True)
        return self.head(pooled)


model = Classifier()
optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
for step in range(args.steps):
    idx = torch.randint(0, n_sentences, (args.batch_size,))
    tokens, labels = tokens_all[idx], labels_all[idx]
    input_mask = mask_all[idx].float()
    optimizer.zero_grad()

    # initialise delta on the real tokens, l2 scheme
    embeds_init = model.word_embeddings(tokens)
    input_lengths = input_mask.sum(1)
    delta = torch.zeros_like(embeds_init).uniform_(-1, 1) * input_mask.unsqueeze(2)
    mag = args.adv_init_mag / torch.sqrt(input_lengths * dim)
    delta = (delta * mag.view(-1, 1, 1)).detach()

    total_loss = 0.0
    for astep in range(args.adv_steps):
        delta.requires_grad_()
        logits = model(delta + embeds_init, input_mask)
        loss = F.cross_entropy(logits, labels) / args.adv_steps
        total_loss += loss.item()
        loss.backward()
        if astep == args.adv_steps - 1:
            break

        # normalised ascent step on delta, then projection onto the adv_max_norm ball
        delta_grad = delta.grad.clone().detach()
        denorm = torch.norm(delta_grad.view(delta_grad.size(0), -1), dim=1).view(-1, 1, 1)
        denorm = torch.clamp(denorm, min=1e-8)
        delta = (delta + args.adv_lr * delta_grad / denorm).detach()
        delta_norm = torch.norm(delta.view(delta.size(0), -1), p=2, dim=1).detach()
        exceed_mask = (delta_norm > args.adv_max_norm).float()
        reweights = (args.adv_max_norm / delta_norm * exceed_mask + (1 - exceed_mask)).view(-1, 1, 1)
        delta = (delta * reweights).detach()
        embeds_init = model.word_embeddings(tokens)

    torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
    optimizer.step()
    if step % 20 == 0:
        print(f"step {step} adversarial loss {total_loss:.4f}")

if args.out:
    torch.save({"model": model.state_dict()}, args.out)
