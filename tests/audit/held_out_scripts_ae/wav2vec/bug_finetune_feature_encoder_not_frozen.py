"""wav2vec 2.0: self-supervised pre-training on raw waveforms, then CTC fine-tuning.

Paper: Alexei Baevski, Henry Zhou, Abdelrahman Mohamed and Michael Auli, "wav2vec 2.0: A
Framework for Self-Supervised Learning of Speech Representations", NeurIPS 2020
(arXiv:2006.11477, 2020).
Reference implementation: facebookresearch/fairseq, fairseq/models/wav2vec/wav2vec2.py
(ConvFeatureExtractionModel: strided 1-d convolutions, GroupNorm on the first layer, GELU;
Wav2Vec2Model.forward: GradMultiply of the features by feature_grad_mult, the feature penalty
features.pow(2).mean(), LayerNorm, unmasked_features = features.clone(), post_extract_proj,
dropout_input / dropout_features, apply_mask writing the learned mask_emb (an nn.Parameter) into
the masked time steps, TransformerEncoder with a weight-normalised grouped pos_conv, quantizer of
the unmasked features at the masked steps, project_q, sample_negatives from the other masked
steps of the same utterance, final_proj, compute_preds: cosine similarity / logit_temp with
negatives equal to the positive set to -inf; get_extra_losses: (num_vars - prob_perplexity) /
num_vars and features_pen), fairseq/modules/gumbel_vector_quantizer.py (GumbelVectorQuantizer:
weight_proj to groups x num_vars logits, straight-through hard gumbel_softmax at an annealed
temperature, codebook vars, the soft prob_perplexity), fairseq/criterions/wav2vec_criterion.py
(cross entropy with the positive at index 0, loss_weights [0.1, 10] on the extra losses),
fairseq/modules/grad_multiply.py (GradMultiply) and fairseq/models/wav2vec/wav2vec2_asr.py
(Wav2VecEncoder: arg_overrides with feature_grad_mult = 0 for fine-tuning, so the feature
encoder runs under torch.no_grad() and stays frozen; the whole w2v_model under no_grad for the
first freeze_finetune_updates updates; final_dropout and proj to the vocabulary; Wav2VecCtc
trained with the CTC loss, blank 0).

Synthetic speech: each utterance of 800 samples is a sequence of 3-5 "phones" of random
lengths; phone k (1..4) is a sinusoid of its own frequency and a harmonic, plus noise. The
feature encoder (three convolutions of 24 channels, total stride 20) gives 39 frames; the
context network is two post-LN Transformer layers of width 32 with a grouped positional
convolution; the quantizer has 2 groups of 16 codewords. Phase 1 (pre-training, 40 updates,
AdamW with weight decay 0.01): spans of 4 frames are masked (mask_prob 0.5, equal counts per
utterance), 10 distractors per masked step, contrastive loss + 0.1 * diversity loss + 10 *
feature penalty; the feature encoder gradient is scaled by 0.1. Phase 2 (fine-tuning, 30
updates, a fresh Adam): a CTC head on the context network; the first 10 updates train only the
head, after which the Transformer, the projection and the mask embedding train too, while the
feature encoder stays frozen (feature_grad_mult 0 -> torch.no_grad()). The pre-training heads
stay in the module and get no gradient in phase 2 (fairseq drops them).
Bug: Wav2VecEncoder does not apply the fine-tuning override feature_grad_mult = 0, so once the
Transformer unfreezes the feature encoder runs with gradient (scaled 0.1) and trains too.
"""
import argparse
import contextlib
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.parametrizations import weight_norm

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--pretrain_updates", type=int, default=40)
parser.add_argument("--finetune_updates", type=int, default=30)
parser.add_argument("--freeze_finetune_updates", type=int, default=10)
parser.add_argument("--batch_size", type=int, default=8)
parser.add_argument("--wav_len", type=int, default=800)
parser.add_argument("--conv_dim", type=int, default=24)
parser.add_argument("--embed_dim", type=int, default=32)
parser.add_argument("--ffn_dim", type=int, default=64)
parser.add_argument("--layers", type=int, default=2)
parser.add_argument("--heads", type=int, default=4)
parser.add_argument("--final_dim", type=int, default=16)
parser.add_argument("--latent_vars", type=int, default=16)
parser.add_argument("--latent_groups", type=int, default=2)
parser.add_argument("--mask_prob", type=float, default=0.5)
parser.add_argument("--mask_length", type=int, default=4)
parser.add_argument("--num_negatives", type=int, default=10)
parser.add_argument("--logit_temp", type=float, default=0.1)
parser.add_argument("--feature_grad_mult", type=float, default=0.1)
parser.add_argument("--ft_feature_grad_mult", type=float, default=0.0)
parser.add_argument("--ft_mask_prob", type=float, default=0.3)
parser.add_argument("--lr", type=float, default=2e-3)
parser.add_argument("--ft_lr", type=float, default=1e-3)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)

VOCAB = 5  # blank + 4 phones
FREQS = [0.02, 0.045, 0.07, 0.11]


def make_batch(n, wav_len):
    wavs = torch.zeros(n, wav_len)
    labels = []
    t = torch.arange(wav_len, dtype=torch.float)
    for b in range(n):
        n_ph = int(torch.randint(3, 6, (1,)))
        cuts = torch.sort(torch.randperm(wav_len // 40 - 1)[:n_ph - 1] + 1).values * 40
        bounds = [0] + cuts.tolist() + [wav_len]
        seq = torch.randint(1, VOCAB, (n_ph,))
        for k in range(n_ph):
            f = FREQS[int(seq[k]) - 1]
            s, e = bounds[k], bounds[k + 1]
            phase = float(torch.rand(1)) * 6.28
            wavs[b, s:e] = torch.sin(2 * math.pi * f * t[s:e] + phase)
            wavs[b, s:e] += 0.5 * torch.sin(4 * math.pi * f * t[s:e] + phase)
        labels.append(seq)
    wavs = wavs + 0.1 * torch.randn_like(wavs)
    wavs = (wavs - wavs.mean(1, keepdim=True)) / wavs.std(1, keepdim=True)
    return wavs, labels


class GradMultiply(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale):
        ctx.scale = scale
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.scale, None


class ConvFeatureExtractor(nn.Module):
    def __init__(self, dim, layers=((10, 5), (3, 2), (2, 2))):
        super().__init__()
        blocks = []
        n_in = 1
        for i, (k, stride) in enumerate(layers):
            conv = nn.Conv1d(n_in, dim, k, stride=stride, bias=False)
            nn.init.kaiming_normal_(conv.weight)
            if i == 0:
                blocks.append(nn.Sequential(conv, nn.GroupNorm(dim, dim), nn.GELU()))
            else:
                blocks.append(nn.Sequential(conv, nn.GELU()))
            n_in = dim
        self.conv_layers = nn.ModuleList(blocks)

    def forward(self, wav):
        x = wav.unsqueeze(1)
        for block in self.conv_layers:
            x = block(x)
        return x


class GumbelVectorQuantizer(nn.Module):
    def __init__(self, dim, num_vars, groups, vq_dim, temp=(2.0, 0.5, 0.995)):
        super().__init__()
        self.groups, self.num_vars = groups, num_vars
        self.vars = nn.Parameter(torch.empty(1, groups * num_vars, vq_dim // groups))
        nn.init.uniform_(self.vars)
        self.weight_proj = nn.Linear(dim, groups * num_vars)
        nn.init.normal_(self.weight_proj.weight, mean=0, std=1)
        nn.init.zeros_(self.weight_proj.bias)
        self.max_temp, self.min_temp, self.temp_decay = temp
        self.curr_temp = self.max_temp

    def set_num_updates(self, num_updates):
        self.curr_temp = max(self.max_temp * self.temp_decay ** num_updates, self.min_temp)

    def forward(self, x):
        bsz, tsz, fsz = x.shape
        logits = self.weight_proj(x.reshape(-1, fsz)).view(bsz * tsz * self.groups, -1)
        avg_probs = torch.softmax(logits.view(bsz * tsz, self.groups, -1), -1).mean(0)
        prob_ppl = torch.exp(-(avg_probs * torch.log(avg_probs + 1e-7)).sum(-1)).sum()
        if self.training:
            onehot = F.gumbel_softmax(logits, tau=self.curr_temp, hard=True)
        else:
            onehot = F.one_hot(logits.argmax(-1), self.num_vars).to(logits.dtype)
        onehot = onehot.view(bsz * tsz, -1)
        q = onehot.unsqueeze(-1) * self.vars
        q = q.view(bsz * tsz, self.groups, self.num_vars, -1).sum(-2)
        return {"x": q.view(bsz, tsz, -1), "prob_perplexity": prob_ppl,
                "num_vars": self.num_vars * self.groups}


class TransformerLayer(nn.Module):
    def __init__(self, dim, ffn_dim, heads, dropout=0.1):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(dim, heads, dropout=dropout, batch_first=True)
        self.self_attn_layer_norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, ffn_dim)
        self.fc2 = nn.Linear(ffn_dim, dim)
        self.final_layer_norm = nn.LayerNorm(dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        attn, _ = self.self_attn(x, x, x, need_weights=False)
        x = self.self_attn_layer_norm(x + self.dropout(attn))
        h = self.fc2(self.dropout(F.gelu(self.fc1(x))))
        return self.final_layer_norm(x + self.dropout(h))


class TransformerEncoder(nn.Module):
    def __init__(self, dim, ffn_dim, heads, layers, conv_pos=8, conv_pos_groups=4):
        super().__init__()
        pos_conv = nn.Conv1d(dim, dim, conv_pos, padding=conv_pos // 2, groups=conv_pos_groups)
        nn.init.normal_(pos_conv.weight, mean=0, std=math.sqrt(4.0 / (conv_pos * dim)))
        nn.init.zeros_(pos_conv.bias)
        self.pos_conv = weight_norm(pos_conv, name="weight", dim=2)
        self.layers = nn.ModuleList([TransformerLayer(dim, ffn_dim, heads)
                                     for _ in range(layers)])
        self.layer_norm = nn.LayerNorm(dim)
        self.dropout = nn.Dropout(0.1)
        for m in self.layers.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        x_conv = F.gelu(self.pos_conv(x.transpose(1, 2))[:, :, :-1]).transpose(1, 2)
        x = self.dropout(self.layer_norm(x + x_conv))
        for layer in self.layers:
            x = layer(x)
        return x


def compute_mask_indices(bsz, tsz, mask_prob, mask_length, min_masks=2):
    mask = torch.zeros(bsz, tsz, dtype=torch.bool)
    for b in range(bsz):
        num_mask = int(mask_prob * tsz / mask_length + float(torch.rand(1)))
        num_mask = min(max(num_mask, min_masks), tsz - mask_length)
        starts = torch.randperm(tsz - mask_length)[:num_mask]
        for s in starts.tolist():
            mask[b, s:s + mask_length] = True
    min_len = int(mask.sum(1).min())
    for b in range(bsz):
        idc = mask[b].nonzero().squeeze(1)
        if len(idc) > min_len:
            mask[b, idc[torch.randperm(len(idc))[min_len:]]] = False
    return mask


class Wav2Vec2Model(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.feature_extractor = ConvFeatureExtractor(a.conv_dim)
        self.feature_grad_mult = a.feature_grad_mult
        self.mask_prob, self.mask_length = a.mask_prob, a.mask_length
        self.n_negatives, self.logit_temp = a.num_negatives, a.logit_temp
        self.layer_norm = nn.LayerNorm(a.conv_dim)
        self.post_extract_proj = nn.Linear(a.conv_dim, a.embed_dim)
        self.dropout_input = nn.Dropout(0.1)
        self.dropout_features = nn.Dropout(0.1)
        self.mask_emb = nn.Parameter(torch.empty(a.embed_dim).uniform_())
        self.encoder = TransformerEncoder(a.embed_dim, a.ffn_dim, a.heads, a.layers)
        self.quantizer = GumbelVectorQuantizer(a.conv_dim, a.latent_vars, a.latent_groups,
                                               a.final_dim)
        self.project_q = nn.Linear(a.final_dim, a.final_dim)
        self.final_proj = nn.Linear(a.embed_dim, a.final_dim)

    def sample_negatives(self, y):
        bsz, num, fsz = y.shape
        with torch.no_grad():
            tszs = torch.arange(num).unsqueeze(-1).expand(-1, self.n_negatives).flatten()
            neg_idxs = torch.randint(0, num - 1, (bsz, self.n_negatives * num))
            neg_idxs[neg_idxs >= tszs] += 1
            neg_idxs = neg_idxs + torch.arange(bsz).unsqueeze(1) * num
        negs = y.reshape(-1, fsz)[neg_idxs.view(-1)]
        return negs.view(bsz, num, self.n_negatives, fsz).permute(2, 0, 1, 3)

    def compute_preds(self, x, y, negs):
        neg_is_pos = (y == negs).all(-1)
        targets = torch.cat([y.unsqueeze(0), negs], 0)
        logits = torch.cosine_similarity(x, targets, dim=-1) / self.logit_temp
        inf_mask = torch.cat([torch.zeros_like(neg_is_pos[:1]), neg_is_pos], 0)
        return logits.masked_fill(inf_mask, float("-inf"))

    def forward(self, source, mask=True, features_only=False):
        if self.feature_grad_mult > 0:
            features = self.feature_extractor(source)
            if self.feature_grad_mult != 1.0:
                features = GradMultiply.apply(features, self.feature_grad_mult)
        else:
            with torch.no_grad():
                features = self.feature_extractor(source)
        features_pen = features.pow(2).mean()
        features = self.layer_norm(features.transpose(1, 2))
        unmasked_features = features.clone()
        features = self.dropout_input(self.post_extract_proj(features))
        unmasked_features = self.dropout_features(unmasked_features)

        mask_indices = None
        x = features
        if mask:
            bsz, tsz, _ = features.shape
            mask_indices = compute_mask_indices(bsz, tsz, self.mask_prob, self.mask_length)
            x[mask_indices] = self.mask_emb
        x = self.encoder(x)
        if features_only:
            return x

        bsz = x.size(0)
        y = unmasked_features[mask_indices].view(bsz, -1, unmasked_features.size(-1))
        q = self.quantizer(y)
        y = self.project_q(q["x"])
        negs = self.sample_negatives(y)
        x = self.final_proj(x[mask_indices].view(bsz, -1, x.size(-1)))
        logits = self.compute_preds(x, y, negs)
        return {"logits": logits, "features_pen": features_pen,
                "prob_perplexity": q["prob_perplexity"], "num_vars": q["num_vars"]}


def wav2vec_criterion(net_output, loss_weights=(0.1, 10.0)):
    logits = net_output["logits"]  # (1 + negatives) x B x M
    logits = logits.permute(1, 2, 0).reshape(-1, logits.size(0))
    target = torch.zeros(logits.size(0), dtype=torch.long)
    contrastive = F.cross_entropy(logits, target)
    num_vars = net_output["num_vars"]
    diversity = (num_vars - net_output["prob_perplexity"]) / num_vars
    loss = contrastive + loss_weights[0] * diversity
    loss = loss + loss_weights[1] * net_output["features_pen"]
    return loss, contrastive, diversity


class Wav2VecEncoder(nn.Module):
    """Fine-tuning wrapper: the pre-trained model with the fine-tuning overrides and a head."""

    def __init__(self, w2v_model, vocab, a):
        super().__init__()
        w2v_model.mask_prob = a.ft_mask_prob
        self.w2v_model = w2v_model
        self.final_dropout = nn.Dropout(0.0)
        self.freeze_finetune_updates = a.freeze_finetune_updates
        self.num_updates = 0
        self.proj = nn.Linear(a.embed_dim, vocab)
        nn.init.xavier_uniform_(self.proj.weight)
        nn.init.zeros_(self.proj.bias)

    def forward(self, source):
        ft = self.freeze_finetune_updates <= self.num_updates
        with torch.no_grad() if not ft else contextlib.ExitStack():
            x = self.w2v_model(source, mask=self.training, features_only=True)
        return self.proj(self.final_dropout(x))


# ---- phase 1: self-supervised pre-training ----
model = Wav2Vec2Model(args)
optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.98), eps=1e-6,
                              weight_decay=0.01)
warmup = max(1, args.pretrain_updates // 8)
scheduler = torch.optim.lr_scheduler.LambdaLR(
    optimizer, lambda u: min((u + 1) / warmup,
                             1.0 - u / args.pretrain_updates * 0.9))
model.train()
for update in range(args.pretrain_updates):
    model.quantizer.set_num_updates(update)
    wavs, _ = make_batch(args.batch_size, args.wav_len)
    optimizer.zero_grad()
    loss, contrastive, diversity = wav2vec_criterion(model(wavs))
    loss.backward()
    optimizer.step()
    scheduler.step()
    if update % 10 == 0 or update == args.pretrain_updates - 1:
        print(f"pretrain {update:3d} loss {loss.item():.4f} contrastive "
              f"{contrastive.item():.4f} diversity {diversity.item():.4f}")

# ---- phase 2: CTC fine-tuning ----
encoder = Wav2VecEncoder(model, VOCAB, args)
ft_optimizer = torch.optim.Adam(encoder.parameters(), lr=args.ft_lr, betas=(0.9, 0.98),
                                eps=1e-8)
encoder.train()
for update in range(args.finetune_updates):
    encoder.num_updates = update
    wavs, labels = make_batch(args.batch_size, args.wav_len)
    ft_optimizer.zero_grad()
    logits = encoder(wavs)  # B x T x V
    lprobs = F.log_softmax(logits, -1).transpose(0, 1)
    input_lengths = torch.full((wavs.size(0),), lprobs.size(0), dtype=torch.long)
    target_lengths = torch.tensor([len(l) for l in labels])
    targets = torch.cat(labels)
    ctc = F.ctc_loss(lprobs, targets, input_lengths, target_lengths, blank=0,
                     reduction="sum", zero_infinity=True) / target_lengths.sum()
    ctc.backward()
    ft_optimizer.step()
    if update % 10 == 0 or update == args.finetune_updates - 1:
        print(f"finetune {update:3d} ctc {ctc.item():.4f}")

if args.out:
    torch.save({"model": encoder.state_dict()}, args.out)
