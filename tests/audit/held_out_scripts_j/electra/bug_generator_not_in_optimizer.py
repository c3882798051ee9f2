"""Replaced-token detection at a tiny size, written after Clark, Luong, Le and Manning, "ELECTRA:
Pre-training Text Encoders as Discriminators Rather Than Generators" (ICLR 2020,
arXiv:2003.10555), sections 2 and 3.2, with google-research/electra
(https://github.com/google-research/electra, run_pretraining.py PretrainingModel:
_get_masked_lm_output with the output embeddings tied to the shared embedding table (initialised
with a standard deviation of 0.02, as BERT's), _get_fake_data, which samples the
replacements from the generator's softmax under tf.stop_gradient, _get_discriminator_output, and
total_loss = mlm_weight * mlm_loss + disc_weight * disc_loss with disc_weight = 50) and
lucidrains/electra-pytorch (https://github.com/lucidrains/electra-pytorch, electra_pytorch.py
Electra.forward: gumbel_sample of the masked positions' logits, disc_labels = (input != sampled),
loss = mlm_weight * mlm_loss + disc_weight * disc_loss; the token embeddings tied between the
two networks). A small generator, a masked language model narrower than the discriminator whose
input is projected from the shared embeddings, proposes tokens at the masked positions; the
replacements are sampled from its softmax with no gradient (the sampling is not differentiable,
and the paper trains the generator by maximum likelihood, not adversarially); the discriminator
predicts for every position whether its token was replaced. The token and position embeddings
are shared by the two networks, and one AdamW steps everything on the summed loss. Sequences of a
random Markov chain over a tiny vocabulary, made in the script. Injected bug: the AdamW is built
over model.discriminator.parameters() (the network kept for fine-tuning) instead of the whole
model's, so the generator's own parameters (its input projection, encoder, MLM head and output
bias) get the MLM loss's gradients at every backward but no optimizer steps them; only the shared
embeddings, which the discriminator holds, learn from the MLM loss (google-research/electra's
optimization.create_optimizer minimises total_loss over tf.trainable_variables(), and
lucidrains/electra-pytorch's example steps Adam over the Electra wrapper's parameters, the
generator's included)."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=30)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--mask-prob", type=float, default=0.25)
parser.add_argument("--disc-weight", type=float, default=50.0)
parser.add_argument("--lr", type=float, default=2e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_words, seq_len = 20, 12
mask_id, vocab_size = n_words, n_words + 1
emb_dim, gen_dim, disc_dim = 32, 16, 32

transitions = torch.rand(n_words, n_words).pow(6)
transitions = transitions / transitions.sum(1, keepdim=True)


def make_sequences(n):
    tokens = [torch.randint(0, n_words, (n,))]
    for _ in range(seq_len - 1):
        tokens.append(torch.multinomial(transitions[tokens[-1]], 1).squeeze(1))
    return torch.stack(tokens, 1)


corpus, held_out = make_sequences(512), make_sequences(64)


def encoder_layer(dim, heads):
    return nn.TransformerEncoderLayer(dim, heads, 2 * dim, dropout=0.0, activation="gelu",
                                      batch_first=True)


class Embeddings(nn.Module):
    def __init__(self):
        super().__init__()
        self.token = nn.Embedding(vocab_size, emb_dim)
        self.position = nn.Embedding(seq_len, emb_dim)
        self.norm = nn.LayerNorm(emb_dim)
        nn.init.normal_(self.token.weight, std=0.02)
        nn.init.normal_(self.position.weight, std=0.02)

    def forward(self, ids):
        return self.norm(self.token(ids) + self.position(torch.arange(ids.size(1))))


class Generator(nn.Module):
    """A masked language model; its output layer is the shared token embedding table."""

    def __init__(self, embeddings):
        super().__init__()
        self.embeddings = embeddings
        self.project = nn.Linear(emb_dim, gen_dim)
        self.encoder = encoder_layer(gen_dim, 2)
        self.head = nn.Sequential(nn.Linear(gen_dim, emb_dim), nn.GELU(), nn.LayerNorm(emb_dim))
        self.output_bias = nn.Parameter(torch.zeros(vocab_size))

    def forward(self, ids):
        hidden = self.head(self.encoder(self.project(self.embeddings(ids))))
        return hidden @ self.embeddings.token.weight.t() + self.output_bias


class Discriminator(nn.Module):
    """One logit per position: was this token replaced?"""

    def __init__(self, embeddings):
        super().__init__()
        self.embeddings = embeddings
        self.encoder = encoder_layer(disc_dim, 4)
        self.head = nn.Sequential(nn.Linear(disc_dim, disc_dim), nn.GELU(),
                                  nn.Linear(disc_dim, 1))

    def forward(self, ids):
        return self.head(self.encoder(self.embeddings(ids))).squeeze(-1)


class Electra(nn.Module):
    def __init__(self):
        super().__init__()
        self.embeddings = Embeddings()
        self.generator = Generator(self.embeddings)
        self.discriminator = Discriminator(self.embeddings)


def corrupt(ids):
    mask = torch.rand(ids.shape) < args.mask_prob
    return mask, ids.masked_fill(mask, mask_id)


def sample_replacements(logits):
    gumbel = -torch.log(-torch.log(torch.rand(logits.shape) + 1e-9) + 1e-9)
    return (logits + gumbel).argmax(-1)


model = Electra()
optimizer = torch.optim.AdamW(model.discriminator.parameters(), lr=args.lr, weight_decay=0.01)
for step in range(args.steps):
    ids = corpus[torch.randint(0, len(corpus), (args.batch_size,))]
    mask, masked_ids = corrupt(ids)
    gen_logits = model.generator(masked_ids)
    mlm_loss = F.cross_entropy(gen_logits[mask], ids[mask])
    with torch.no_grad():  # the replacements are sampled: no gradient reaches the generator
        sampled = sample_replacements(gen_logits[mask])
    fake_ids = ids.clone()
    fake_ids[mask] = sampled
    is_replaced = (fake_ids != ids).float()
    disc_logits = model.discriminator(fake_ids)
    disc_loss = F.binary_cross_entropy_with_logits(disc_logits, is_replaced)
    loss = mlm_loss + args.disc_weight * disc_loss
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    print(f"step {step} mlm {mlm_loss.item():.4f} disc {disc_loss.item():.4f}")

with torch.no_grad():
    mask, masked_ids = corrupt(held_out)
    fake_ids = held_out.clone()
    fake_ids[mask] = sample_replacements(model.generator(masked_ids)[mask])
    predicted = model.discriminator(fake_ids) > 0
    accuracy = (predicted == (fake_ids != held_out)).float().mean()
print(f"held-out replaced-token detection accuracy {accuracy.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
