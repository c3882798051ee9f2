"""Soft prompt tuning of a frozen encoder at a tiny size, written after Lester, Al-Rfou and
Constant, "The Power of Scale for Parameter-Efficient Prompt Tuning" (EMNLP 2021,
arXiv:2104.08691), sections 2 and 3.2, with huggingface/peft (https://github.com/huggingface/peft,
src/peft/tuners/prompt_tuning/model.py PromptEmbedding: an nn.Embedding of num_virtual_tokens
rows whose weight, for the TEXT initialisation, is set to nn.Parameter of the frozen word
embeddings of the init tokens taken with .detach().clone(); src/peft/peft_model.py
PeftModelForSequenceClassification.forward, which concatenates the prompt's embeddings before the
input embeddings and runs the frozen base model on inputs_embeds; PeftModel._setup_prompt_encoder,
which sets requires_grad = False on every base-model parameter) and google-research/prompt-tuning
(https://github.com/google-research/prompt-tuning, prompt_tuning/train/prompts.py, the prompt
initialised from sampled vocabulary embeddings and prepended to the embedded input, with every
other variable of the model frozen). Two phases: a tiny transformer encoder (token embeddings, one
encoder layer, a mean-pooled classifier head) is first trained in full on task 1, standing in for
the pretrained model; then the whole model is frozen and a soft prompt of four vectors,
initialised from the embeddings of the four most frequent tokens (the vocabulary is sorted by
frequency), is prepended to the embedded inputs and trained alone by Adam on task 2, whose labels
follow a different rule over the same token sequences; the frozen head reads the pooled input
positions as a verbaliser would. Zipf-distributed token sequences made in the script.
Injected bug: the prompt is made as nn.Parameter(model.embed.weight[:n_prompt].detach()), without
the .clone() of PEFT's PromptEmbedding, and a Parameter made from a slice shares its storage, so
the soft prompt is an alias of the first four rows of the frozen embedding table: each Adam step
on the prompt also rewrites the embeddings of the four most frequent tokens, which the frozen
model reads in every input sequence; second phase of a two-phase script."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--pretrain-steps", type=int, default=30)
parser.add_argument("--steps", type=int, default=25)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--n-prompt", type=int, default=4)
parser.add_argument("--pretrain-lr", type=float, default=3e-3)
parser.add_argument("--lr", type=float, default=3e-2)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

vocab, seq_len, d_model, n_classes = 12, 10, 32, 2
token_probs = 1.0 / torch.arange(1, vocab + 1).float()
tokens = torch.multinomial(token_probs, 512 * seq_len, replacement=True).view(512, seq_len)
labels_1 = ((tokens == 0).sum(1) > (tokens == 1).sum(1)).long()  # task 1: more 0s than 1s
labels_2 = ((tokens == 1).sum(1) < 2).long()  # task 2: at most one 1


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.layer = nn.TransformerEncoderLayer(d_model, nhead=4, dim_feedforward=64,
                                                dropout=0.0, batch_first=True)
        self.head = nn.Linear(d_model, n_classes)

    def forward_embeds(self, embeds, n_skip=0):
        """The encoder run on embedded inputs; the head pools the positions after n_skip."""
        hidden = self.layer(embeds)
        return self.head(hidden[:, n_skip:].mean(1))

    def forward(self, token_ids):
        return self.forward_embeds(self.embed(token_ids))


# phase 1: the base model, every weight trained on task 1
model = Encoder()
pretrain_optimizer = torch.optim.Adam(model.parameters(), lr=args.pretrain_lr)
for step in range(args.pretrain_steps):
    idx = torch.randint(0, len(tokens), (args.batch_size,))
    loss = F.cross_entropy(model(tokens[idx]), labels_1[idx])
    pretrain_optimizer.zero_grad()
    loss.backward()
    pretrain_optimizer.step()
    print(f"pretrain {step} loss {loss.item():.4f}")

# phase 2: the model frozen, a soft prompt prepended to the input embeddings trained alone
model.requires_grad_(False)
prompt = nn.Parameter(model.embed.weight[:args.n_prompt].detach())
optimizer = torch.optim.Adam([prompt], lr=args.lr)


def prompted_logits(token_ids):
    embeds = model.embed(token_ids)
    prefix = prompt.unsqueeze(0).expand(len(token_ids), -1, -1)
    return model.forward_embeds(torch.cat([prefix, embeds], dim=1), n_skip=args.n_prompt)


for step in range(args.steps):
    idx = torch.randint(0, len(tokens), (args.batch_size,))
    loss = F.cross_entropy(prompted_logits(tokens[idx]), labels_2[idx])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"prompt {step} loss {loss.item():.4f}")

with torch.no_grad():
    accuracy = (prompted_logits(tokens).argmax(1) == labels_2).float().mean()
print(f"task 2 accuracy with the prompt {accuracy.item():.3f}")

if args.out:
    torch.save({"model": model.state_dict(), "prompt": prompt.detach()}, args.out)
