"""Self-critical sequence training at a tiny size, written after Rennie, Marcheret, Mroueh, Ross
and Goel, "Self-critical Sequence Training for Image Captioning" (CVPR 2017, arXiv:1612.00563),
section 5 (REINFORCE on a sampled caption w^s with the reward of the test-time greedy caption w^ as
the baseline, (r(w^s) - r(w^)) grad log p(w^s), after a cross-entropy warm start), with
ruotianluo/self-critical.pytorch (https://github.com/ruotianluo/self-critical.pytorch,
misc/rewards.py get_self_critical_reward, which decodes the greedy baseline under torch.no_grad()
and returns scores[:batch_size] - scores[batch_size:] as a numpy array; misc/utils.py
RewardCriterion, -logprob * reward * mask over the sampled words and the first end token,
LanguageModelCriterion for the cross-entropy phase; train.py self_critical_after) and
sgrvinod/a-PyTorch-Tutorial-to-Image-Captioning
(https://github.com/sgrvinod/a-PyTorch-Tutorial-to-Image-Captioning, train.py: the encoder's
fine_tune(fine_tune_encoder), which sets requires_grad on its parameters, its own encoder_optimizer
made once fine-tuning starts, and the zero_grad and step of decoder_optimizer and encoder_optimizer
around each backward). Two phases: cross-entropy training of the decoder with the image encoder
(standing in for the pretrained CNN) frozen, then self-critical training with the encoder
fine-tuned by its own Adam. Images of a colour and a shape with three reference captions each, and
an n-gram F1 score against the references standing in for CIDEr-D, made in the script. Injected
bug: the freeze of the cross-entropy phase is never undone: the encoder.requires_grad_(True) that
starts fine-tuning (sgrvinod's encoder.fine_tune(True) before its encoder_optimizer is made) is
missing, so in the self-critical phase the encoder's features carry no graph, its Adam finds no
gradient and skips it, and only the decoder learns from the self-critical reward; second phase of a
two-phase script."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--xe-steps", type=int, default=30)
parser.add_argument("--sc-steps", type=int, default=15)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--xe-lr", type=float, default=1e-2)
parser.add_argument("--sc-lr", type=float, default=1e-3)
parser.add_argument("--encoder-lr", type=float, default=1e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_colours, n_shapes, pixel_dim, feat_dim, hidden_dim, max_len = 4, 4, 16, 32, 32, 4
vocab = 1 + n_colours + n_shapes + 2  # 0 ends a caption; then colours, shapes, "a", "the"
bos = vocab
colour_pixels, shape_pixels = torch.randn(n_colours, pixel_dim), torch.randn(n_shapes, pixel_dim)


def make_batch(n):
    colours, shapes = torch.randint(0, n_colours, (n,)), torch.randint(0, n_shapes, (n,))
    images = colour_pixels[colours] + shape_pixels[shapes] + 0.3 * torch.randn(n, pixel_dim)
    c, s, z = 1 + colours, 1 + n_colours + shapes, torch.zeros(n, dtype=torch.long)
    refs = torch.stack([torch.stack([torch.full_like(c, vocab - 2), c, s, z], 1),
                        torch.stack([torch.full_like(c, vocab - 1), c, s, z], 1),
                        torch.stack([c, s, z, z], 1)], 1)  # [n, 3 references, max_len]
    return images, refs


def words(seq):
    out = []
    for w in seq.tolist():
        if w == 0:
            break
        out.append(w)
    return out


def f1(cand, ref):
    common = sum(min(cand.count(g), ref.count(g)) for g in set(cand))
    return 0.0 if common == 0 else 2 * common / (len(cand) + len(ref))


def score(seqs, refs):
    """Mean over the references of the unigram and bigram F1, a number per caption."""
    scores = []
    for seq, img_refs in zip(seqs, refs):
        cand = words(seq)
        total = 0.0
        for ref in map(words, img_refs):
            total += 0.5 * f1(cand, ref) + 0.5 * f1(list(zip(cand, cand[1:])),
                                                    list(zip(ref, ref[1:])))
        scores.append(total / len(img_refs))
    return torch.tensor(scores)


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.init_h = nn.Linear(feat_dim, hidden_dim)
        self.embed = nn.Embedding(vocab + 1, hidden_dim)
        self.cell = nn.GRUCell(hidden_dim, hidden_dim)
        self.logit = nn.Linear(hidden_dim, vocab)

    def forward(self, feats, captions):
        """Teacher-forced log-probabilities of every next word, [n, max_len, vocab]."""
        h, inputs, out = torch.tanh(self.init_h(feats)), torch.full_like(captions[:, 0], bos), []
        for t in range(max_len):
            h = self.cell(self.embed(inputs), h)
            out.append(F.log_softmax(self.logit(h), dim=-1))
            inputs = captions[:, t]
        return torch.stack(out, 1)

    def sample(self, feats, greedy):
        h, inputs = torch.tanh(self.init_h(feats)), torch.full((len(feats),), bos)
        seq, logprobs, done = [], [], torch.zeros(len(feats), dtype=torch.bool)
        for _ in range(max_len):
            h = self.cell(self.embed(inputs), h)
            logp = F.log_softmax(self.logit(h), dim=-1)
            w = logp.argmax(-1) if greedy else torch.multinomial(logp.exp(), 1).squeeze(1)
            w = w.masked_fill(done, 0)
            seq.append(w)
            logprobs.append(logp.gather(1, w[:, None]).squeeze(1))
            done, inputs = done | (w == 0), w
        return torch.stack(seq, 1), torch.stack(logprobs, 1)


def word_mask(seq):
    """The words up to and including the first end token."""
    return torch.cat([torch.ones(len(seq), 1), (seq[:, :-1] > 0).float()], 1).cumprod(1)


encoder = nn.Sequential(nn.Linear(pixel_dim, feat_dim), nn.ReLU())
decoder = Decoder()
encoder.requires_grad_(False)  # phase 1: the "pretrained CNN" is not fine-tuned
decoder_optimizer = torch.optim.Adam(decoder.parameters(), lr=args.xe_lr)
for step in range(args.xe_steps):
    images, refs = make_batch(args.batch_size)
    captions = refs[torch.arange(args.batch_size), torch.randint(0, 3, (args.batch_size,))]
    logprobs = decoder(encoder(images), captions)
    mask = word_mask(captions)
    xe_loss = -(logprobs.gather(2, captions[:, :, None]).squeeze(2) * mask).sum() / mask.sum()
    decoder_optimizer.zero_grad()
    xe_loss.backward()
    decoder_optimizer.step()
print(f"cross-entropy done, loss {xe_loss.item():.4f}")

encoder_optimizer = torch.optim.Adam(encoder.parameters(), lr=args.encoder_lr)
for group in decoder_optimizer.param_groups:
    group["lr"] = args.sc_lr
for step in range(args.sc_steps):
    images, refs = make_batch(args.batch_size)
    feats = encoder(images)
    with torch.no_grad():
        greedy_seq, _ = decoder.sample(feats, greedy=True)
    sample_seq, sample_logprobs = decoder.sample(feats, greedy=False)
    reward = score(sample_seq, refs) - score(greedy_seq, refs)
    mask = word_mask(sample_seq)
    rl_loss = -(sample_logprobs * reward[:, None] * mask).sum() / mask.sum()
    decoder_optimizer.zero_grad()
    encoder_optimizer.zero_grad()
    rl_loss.backward()
    decoder_optimizer.step()
    encoder_optimizer.step()
    print(f"sc step {step} greedy score {score(greedy_seq, refs).mean().item():.4f} "
          f"advantage {reward.mean().item():.4f}")

if args.out:
    torch.save({**{f"encoder.{k}": v.detach().clone() for k, v in encoder.state_dict().items()},
                **{f"decoder.{k}": v.detach().clone() for k, v in decoder.state_dict().items()}},
               args.out)
