"""Audio: MetricGAN speech enhancement (a discriminator that learns a quality metric) and the
wav2vec 2.0 Gumbel-softmax quantizer of self-supervised speech pretraining.

The text is ours, at tiny sizes; the structure (modules, optimizers, order of calls) is the
source's.
"""

from __future__ import annotations

import torch
from realcode_common import RealCase
from torch import nn
from torch.nn import functional as F

# --- speechbrain/speechbrain recipes/Voicebank/enhance/MetricGAN/train.py@09582bdc3319d97b76
# 6436ba0715dd2121efaa92: the generator predicts a mask of the noisy magnitude spectrum; the
# discriminator reads (enhanced, clean) and regresses the metric score of the pair (a PESQ
# computed outside autograd), and clean pairs to 1; the generator is then trained to make the
# discriminator say 1. The discriminator's loss reads the enhanced spectrum detached.
METRICGAN = ("speechbrain/speechbrain recipes/Voicebank/enhance/MetricGAN/train.py@"
             "09582bdc3319d97b766436ba0715dd2121efaa92")
METRICGAN_URL = ("https://github.com/speechbrain/speechbrain/blob/09582bdc3319d97b766436ba0715dd2"
                 "121efaa92/recipes/Voicebank/enhance/MetricGAN/train.py")


@torch.no_grad()
def metric_score(enhanced: torch.Tensor, clean: torch.Tensor) -> torch.Tensor:
    """A stand-in for the normalized PESQ: an SNR squashed to (0, 1), outside autograd."""
    snr = 10 * torch.log10(clean.pow(2).sum((1, 2)) / (clean - enhanced).pow(2).sum((1, 2)))
    return torch.sigmoid(snr / 10)


class Discriminator(nn.Module):
    def __init__(self, bins: int) -> None:
        super().__init__()
        self.conv = nn.Conv1d(2 * bins, 8, 3, padding=1)
        self.out = nn.Linear(8, 1)

    def forward(self, enhanced: torch.Tensor, clean: torch.Tensor) -> torch.Tensor:
        h = F.leaky_relu(self.conv(torch.cat([enhanced, clean], dim=1)), 0.3)
        return self.out(h.mean(dim=2)).squeeze(1)


# The bug: the discriminator's loss reads the enhanced spectrum with its graph, so its backward
# fills the generator's gradients (truth "leaks"), as in a GAN's discriminator step.
def metricgan(seed: int, *, bug: bool = False) -> RealCase:
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    bins, frames = 5, 6
    generator = nn.Sequential(nn.Conv1d(bins, 8, 3, padding=1), nn.LeakyReLU(0.3),
                              nn.Conv1d(8, bins, 3, padding=1), nn.Sigmoid())
    discriminator = Discriminator(bins)
    opt_g = torch.optim.Adam(generator.parameters(), lr=1e-4)
    opt_d = torch.optim.Adam(discriminator.parameters(), lr=5e-4)

    def step() -> dict[str, torch.Tensor]:
        clean = torch.rand(2, bins, frames, generator=gen)
        noisy = clean + 0.3 * torch.rand(2, bins, frames, generator=gen)
        enhanced = generator(noisy) * noisy
        score = metric_score(enhanced, clean)
        fake = enhanced if bug else enhanced.detach()
        d_loss = (F.mse_loss(discriminator(clean, clean), torch.ones(2))
                  + F.mse_loss(discriminator(fake, clean), score))
        g_loss = F.mse_loss(discriminator(enhanced, clean), torch.ones(2))
        return {"d": d_loss, "g": g_loss}

    return RealCase("metricgan_d_no_detach" if bug else "metricgan", METRICGAN, METRICGAN_URL,
                    "leaks" if bug else "correct", step, {"d": opt_d, "g": opt_g},
                    {"generator": generator, "discriminator": discriminator},
                    expect_pass_through=True)


# --- huggingface/transformers src/transformers/models/wav2vec2/modeling_wav2vec2.py@73a515ed5f
# dfb409055362aacc3b62fa863530c1 (Wav2Vec2GumbelVectorQuantizer, Wav2Vec2ForPreTraining): the
# extracted features are projected to group logits, a hard Gumbel softmax picks one codevector
# per group (straight-through: the hard one-hot forward, the soft gradient), the context network
# reads the features with masked frames replaced by a learned embedding, and a contrastive loss
# compares each masked context vector with its quantized target against distractors (here the
# targets of the other frames) by cosine similarity. diversity_loss_weight is 0 here.
WAV2VEC = ("huggingface/transformers src/transformers/models/wav2vec2/modeling_wav2vec2.py@"
           "73a515ed5fdfb409055362aacc3b62fa863530c1")
WAV2VEC_URL = ("https://github.com/huggingface/transformers/blob/73a515ed5fdfb409055362aacc3b62f"
               "a863530c1/src/transformers/models/wav2vec2/modeling_wav2vec2.py")


class GumbelQuantizer(nn.Module):
    def __init__(self, dim: int, groups: int, entries: int, code_dim: int) -> None:
        super().__init__()
        self.groups, self.entries = groups, entries
        self.codevectors = nn.Parameter(torch.randn(1, groups * entries, code_dim // groups))
        self.weight_proj = nn.Linear(dim, groups * entries)


# The bug: the quantizer keeps only the hard one-hot of the argmax (the straight-through term
# left out), so weight_proj gets no gradient (truth "dead").
def wav2vec_quantizer(seed: int, *, bug: bool = False) -> RealCase:
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    dim, groups, entries, code_dim = 6, 2, 4, 4
    feature_encoder = nn.Sequential(nn.Conv1d(1, dim, 4, stride=2), nn.GELU())
    quantizer = GumbelQuantizer(dim, groups, entries, code_dim)
    masked_spec_embed = nn.Parameter(torch.rand(dim))
    context = nn.GRU(dim, dim, batch_first=True)
    project_hid = nn.Linear(dim, code_dim)
    project_q = nn.Linear(code_dim, code_dim)
    head = nn.ModuleDict({"project_hid": project_hid, "project_q": project_q})
    modules = {"feature_encoder": feature_encoder, "quantizer": quantizer, "context": context,
               "head": head}
    optimizer = torch.optim.AdamW([*feature_encoder.parameters(), *quantizer.parameters(),
                                   masked_spec_embed, *context.parameters(),
                                   *head.parameters()], lr=1e-4)

    def quantize(features: torch.Tensor) -> torch.Tensor:
        b, t, _ = features.shape
        logits = quantizer.weight_proj(features).view(b * t * groups, entries)
        gumbels = -torch.empty_like(logits).exponential_(generator=gen).log()
        soft = ((logits + gumbels) / 2.0).softmax(dim=-1)
        hard = F.one_hot(soft.argmax(dim=-1), entries).to(soft.dtype)
        probs = hard if bug else hard - soft.detach() + soft
        codes = probs.view(b * t, -1, 1) * quantizer.codevectors
        return codes.view(b * t, groups, entries, -1).sum(-2).view(b, t, -1)

    def step() -> torch.Tensor:
        wave = torch.randn(2, 1, 18, generator=gen)
        features = feature_encoder(wave).transpose(1, 2)
        targets = project_q(quantize(features))
        mask = torch.zeros(features.shape[:2], dtype=torch.bool)
        mask[:, 2:5] = True
        masked = torch.where(mask.unsqueeze(-1), masked_spec_embed.expand_as(features), features)
        ctx = project_hid(context(masked)[0])
        candidates = torch.stack([targets, targets.roll(1, 1), targets.roll(2, 1)])
        sims = F.cosine_similarity(ctx.unsqueeze(0), candidates, dim=-1) / 0.1
        logits = sims.permute(1, 2, 0)[mask]
        return F.cross_entropy(logits, torch.zeros(len(logits), dtype=torch.long))

    case = RealCase("wav2vec_quantizer_no_ste" if bug else "wav2vec_quantizer", WAV2VEC,
                    WAV2VEC_URL, "dead" if bug else "correct", step, optimizer, modules,
                    tensors={"masked_spec_embed": masked_spec_embed})
    return case


CASES = {"metricgan": metricgan,
         "metricgan_d_no_detach": lambda seed: metricgan(seed, bug=True),
         "wav2vec_quantizer": wav2vec_quantizer,
         "wav2vec_quantizer_no_ste": lambda seed: wav2vec_quantizer(seed, bug=True)}
TWINS = {"metricgan_d_no_detach": "metricgan",
         "wav2vec_quantizer_no_ste": "wav2vec_quantizer"}
FIELD = "audio (speech enhancement, speech pretraining)"
