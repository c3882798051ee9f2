"""Steps that train one model against another model's outputs: DistilBERT's distiller, DeiT's
distillation loss, and DPO against a reference model. The other model (teacher, reference) is
not trained, so its forward belongs under ``torch.no_grad()``; without it every step fills its
``.grad``.

Each builder takes ``seed`` and returns a :class:`RealCase`; the text is ours, the structure
(modules, optimizers, order of calls, bug) is the repository's.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from realcode_common import RealCase
from torch import nn
from torch.nn import functional as F

# --- huggingface/transformers examples/research_projects/distillation/distiller.py@16074447058
# 41ea5084ea2c37b22950175c7c84a (Distiller.step, mlm): the teacher runs under torch.no_grad();
# the loss is alpha_ce * KLDivLoss(batchmean)(log_softmax(s / T), softmax(t / T)) * T^2 on the
# positions of the attention mask, plus alpha_mlm * the masked-LM cross-entropy, plus alpha_cos *
# a cosine loss between the last hidden states; AdamW over the student with and without weight
# decay. The bug twin calls the teacher outside no_grad: the teacher's weights then receive a
# gradient every step (huggingface/trl#6526, "teacher projection tracks unused gradients").


class TinyMLM(nn.Module):
    """Embeddings, residual feed-forward layers with LayerNorm, a vocabulary projector; returns
    the logits and every hidden state (output_hidden_states=True)."""

    def __init__(self, vocab: int = 12, dim: int = 8, n_layers: int = 1) -> None:
        super().__init__()
        self.embeddings = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(nn.ModuleDict({"ff": nn.Sequential(
            nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim)),
            "norm": nn.LayerNorm(dim)}) for _ in range(n_layers))
        self.vocab_projector = nn.Linear(dim, vocab)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        h = self.embeddings(input_ids) * attention_mask.unsqueeze(-1)
        hidden_states = [h]
        for layer in self.layers:
            h = layer["norm"](h + layer["ff"](h))
            hidden_states.append(h)
        return self.vocab_projector(h), tuple(hidden_states)


def distilbert(seed: int, *, no_grad: bool = True, bs: int = 2, seq_length: int = 5,
               vocab: int = 12, temperature: float = 2.0, alpha_ce: float = 5.0,
               alpha_mlm: float = 2.0, alpha_cos: float = 1.0) -> RealCase:
    torch.manual_seed(seed)
    student, teacher = TinyMLM(vocab, n_layers=1), TinyMLM(vocab, n_layers=2)
    teacher.eval()
    no_decay = ["bias", "LayerNorm.weight"]
    optimizer = torch.optim.AdamW([
        {"params": [p for n, p in student.named_parameters()
                    if not any(nd in n for nd in no_decay)], "weight_decay": 0.0},
        {"params": [p for n, p in student.named_parameters()
                    if any(nd in n for nd in no_decay)], "weight_decay": 0.0}],
        lr=5e-4, eps=1e-6, betas=(0.9, 0.98))
    ce_loss_fct = nn.KLDivLoss(reduction="batchmean")
    lm_loss_fct = nn.CrossEntropyLoss(ignore_index=-100)
    cosine_loss_fct = nn.CosineEmbeddingLoss(reduction="mean")
    input_ids = torch.randint(0, vocab, (bs, seq_length))
    attn_mask = torch.ones(bs, seq_length, dtype=torch.long)
    attn_mask[1, -1] = 0
    lm_labels = torch.full((bs, seq_length), -100)
    lm_labels[:, 1] = input_ids[:, 1]  # prepare_batch_mlm: the masked positions keep a label

    def step() -> torch.Tensor:
        s_logits, s_hidden_states = student(input_ids=input_ids, attention_mask=attn_mask)
        if no_grad:
            with torch.no_grad():
                t_logits, t_hidden_states = teacher(input_ids=input_ids,
                                                    attention_mask=attn_mask)
        else:
            t_logits, t_hidden_states = teacher(input_ids=input_ids,  # audit: fix here
                                                attention_mask=attn_mask)
        mask = attn_mask.bool().unsqueeze(-1).expand_as(s_logits)
        s_logits_slct = torch.masked_select(s_logits, mask).view(-1, s_logits.size(-1))
        t_logits_slct = torch.masked_select(t_logits, mask).view(-1, s_logits.size(-1))
        loss_ce = ce_loss_fct(F.log_softmax(s_logits_slct / temperature, dim=-1),
                              F.softmax(t_logits_slct / temperature, dim=-1)) * temperature ** 2
        loss = alpha_ce * loss_ce
        loss_mlm = lm_loss_fct(s_logits.view(-1, s_logits.size(-1)), lm_labels.view(-1))
        loss = loss + alpha_mlm * loss_mlm
        s_hidden, t_hidden = s_hidden_states[-1], t_hidden_states[-1]
        mask = attn_mask.bool().unsqueeze(-1).expand_as(s_hidden)
        dim = s_hidden.size(-1)
        s_hidden_slct = torch.masked_select(s_hidden, mask).view(-1, dim)
        t_hidden_slct = torch.masked_select(t_hidden, mask).view(-1, dim)
        target = s_hidden_slct.new(s_hidden_slct.size(0)).fill_(1)
        return loss + alpha_cos * cosine_loss_fct(s_hidden_slct, t_hidden_slct, target)

    return RealCase(f"distilbert{'' if no_grad else '_teacher_grad'}",
                    "huggingface/transformers examples/research_projects/distillation/distiller"
                    ".py@1607444705841ea5084ea2c37b22950175c7c84a",
                    "https://arxiv.org/abs/1910.01108 (DistilBERT: the teacher's outputs are "
                    "targets)" if no_grad else "https://github.com/huggingface/trl/pull/6526",
                    "correct" if no_grad else "leaks", step, optimizer,
                    {"student": student, "teacher": teacher})


# --- facebookresearch/deit losses.py@0ed02778c74dd84979e9545b295dc4b99b8b16d5 (DistillationLoss,
# distillation_type="soft"): label-smoothed cross-entropy on the student's logits, plus
# KL(log_softmax(s / tau) || log_softmax(t / tau)) with log_target=True, summed and scaled by
# tau^2 / numel; the teacher (a convnet) under torch.no_grad() ("don't backprop through the
# teacher"). The student is a tiny ViT (patch embedding, class token, one block, head).


class TinyViT(nn.Module):
    def __init__(self, num_classes: int = 3, dim: int = 8, patch: int = 4) -> None:
        super().__init__()
        self.patch_embed = nn.Conv2d(3, dim, patch, patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.randn(1, 5, dim) * 0.02)
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, 2, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        self.norm, self.head = nn.LayerNorm(dim), nn.Linear(dim, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1) + self.pos_embed
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        x = x + self.mlp(self.norm2(x))
        return self.head(self.norm(x)[:, 0])


def deit_soft(seed: int, *, batch: int = 2, alpha: float = 0.5, tau: float = 1.0) -> RealCase:
    torch.manual_seed(seed)
    model = TinyViT()
    teacher_model = nn.Sequential(nn.Conv2d(3, 4, 3, 2, 1), nn.BatchNorm2d(4), nn.ReLU(),
                                  nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 3))
    teacher_model.eval()
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=0.05)
    samples, targets = torch.randn(batch, 3, 8, 8), torch.randint(0, 3, (batch,))

    def base_criterion(outputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(outputs, labels, label_smoothing=0.1)

    def step() -> torch.Tensor:
        outputs = model(samples)
        base_loss = base_criterion(outputs, targets)
        with torch.no_grad():
            teacher_outputs = teacher_model(samples)
        T = tau
        distillation_loss = F.kl_div(F.log_softmax(outputs / T, dim=1),
                                     F.log_softmax(teacher_outputs / T, dim=1),
                                     reduction="sum", log_target=True) * (T * T) / outputs.numel()
        return base_loss * (1 - alpha) + distillation_loss * alpha

    return RealCase("deit_soft", "facebookresearch/deit losses.py@0ed02778c74dd84979e9545b295dc"
                    "4b99b8b16d5", "https://arxiv.org/abs/2012.12877 (DeiT, eq. 2: soft "
                    "distillation against the frozen teacher)", "correct", step, optimizer,
                    {"model": model, "teacher_model": teacher_model})


# --- rasbt/LLMs-from-scratch ch07/04_preference-tuning-with-dpo/dpo-from-scratch.ipynb@2d7ca7ee
# 4b231abde064ee9c6eca07572d896697 (before rasbt/LLMs-from-scratch#473) and @28c65cdfbc3338e2e04
# 0016eea4b7fdf556e4d57 (after): compute_dpo_loss_batch scores the chosen and the rejected
# response under the policy and under the reference model (the SFT model, in eval mode), then
# -logsigmoid(beta * (policy log-ratio - reference log-ratio)); AdamW over the policy only.
# Before #473 the reference model ran with gradients; #473 put it under torch.no_grad().


class GPTBlock(nn.Module):
    def __init__(self, emb_dim: int, context_length: int, n_heads: int = 2) -> None:
        super().__init__()
        self.n_heads, self.head_dim = n_heads, emb_dim // n_heads
        self.W_query = nn.Linear(emb_dim, emb_dim, bias=False)
        self.W_key = nn.Linear(emb_dim, emb_dim, bias=False)
        self.W_value = nn.Linear(emb_dim, emb_dim, bias=False)
        self.out_proj = nn.Linear(emb_dim, emb_dim)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), 1))
        self.ff = nn.Sequential(nn.Linear(emb_dim, 4 * emb_dim), nn.GELU(),
                                nn.Linear(4 * emb_dim, emb_dim))
        self.norm1, self.norm2 = nn.LayerNorm(emb_dim), nn.LayerNorm(emb_dim)

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape

        def heads(t: torch.Tensor) -> torch.Tensor:
            return t.view(b, n, self.n_heads, self.head_dim).transpose(1, 2)

        q, k, v = heads(self.W_query(x)), heads(self.W_key(x)), heads(self.W_value(x))
        scores = (q @ k.transpose(2, 3)).masked_fill(self.mask.bool()[:n, :n], -torch.inf)
        weights = torch.softmax(scores / self.head_dim ** 0.5, dim=-1)
        return self.out_proj((weights @ v).transpose(1, 2).contiguous().view(b, n, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.norm1(x))
        return x + self.ff(self.norm2(x))


class GPTModel(nn.Module):
    def __init__(self, vocab_size: int = 12, context_length: int = 8, emb_dim: int = 8) -> None:
        super().__init__()
        self.tok_emb = nn.Embedding(vocab_size, emb_dim)
        self.pos_emb = nn.Embedding(context_length, emb_dim)
        self.trf_blocks = nn.Sequential(GPTBlock(emb_dim, context_length))
        self.final_norm = nn.LayerNorm(emb_dim)
        self.out_head = nn.Linear(emb_dim, vocab_size, bias=False)

    def forward(self, in_idx: torch.Tensor) -> torch.Tensor:
        x = self.tok_emb(in_idx) + self.pos_emb(torch.arange(in_idx.shape[1]))
        return self.out_head(self.final_norm(self.trf_blocks(x)))


def compute_logprobs(logits: torch.Tensor, labels: torch.Tensor,
                     selection_mask: torch.Tensor) -> torch.Tensor:
    labels = labels[:, 1:].clone()
    log_probs = F.log_softmax(logits[:, :-1, :], dim=-1)
    selected = torch.gather(input=log_probs, dim=-1, index=labels.unsqueeze(-1)).squeeze(-1)
    mask = selection_mask[:, 1:].clone()
    return (selected * mask).sum(-1) / mask.sum(-1)


def dpo(seed: int, *, no_grad: bool = True, batch: int = 2, length: int = 6,
        beta: float = 0.1) -> RealCase:
    torch.manual_seed(seed)
    policy_model, reference_model = GPTModel(), GPTModel()
    reference_model.load_state_dict(policy_model.state_dict())  # both from the SFT checkpoint
    reference_model.eval()
    optimizer = torch.optim.AdamW(policy_model.parameters(), lr=5e-6, weight_decay=0.01)
    chosen, rejected = torch.randint(0, 12, (batch, length)), torch.randint(0, 12, (batch, length))
    chosen_mask = torch.ones(batch, length, dtype=torch.bool)
    rejected_mask = torch.ones(batch, length, dtype=torch.bool)
    chosen_mask[:, :2] = rejected_mask[:, :2] = False  # the prompt is masked out
    rejected_mask[0, -1] = False  # padding

    def reference_logprobs() -> tuple[torch.Tensor, torch.Tensor]:
        ref_chosen = compute_logprobs(logits=reference_model(chosen),  # audit: fix here
                                      labels=chosen, selection_mask=chosen_mask)
        ref_rejected = compute_logprobs(logits=reference_model(rejected),  # audit: fix here
                                        labels=rejected, selection_mask=rejected_mask)
        return ref_chosen, ref_rejected

    def step() -> torch.Tensor:
        policy_chosen = compute_logprobs(logits=policy_model(chosen), labels=chosen,
                                         selection_mask=chosen_mask)
        policy_rejected = compute_logprobs(logits=policy_model(rejected), labels=rejected,
                                           selection_mask=rejected_mask)
        if no_grad:
            with torch.no_grad():
                ref_chosen, ref_rejected = reference_logprobs()
        else:
            ref_chosen, ref_rejected = reference_logprobs()
        logits = (policy_chosen - policy_rejected) - (ref_chosen - ref_rejected)
        return -F.logsigmoid(beta * logits).mean()

    return RealCase(f"dpo{'' if no_grad else '_reference_grad'}",
                    "rasbt/LLMs-from-scratch ch07/04_preference-tuning-with-dpo/dpo-from-scratch"
                    ".ipynb@" + ("28c65cdfbc3338e2e040016eea4b7fdf556e4d57" if no_grad else
                                 "2d7ca7ee4b231abde064ee9c6eca07572d896697"),
                    "https://github.com/rasbt/LLMs-from-scratch/pull/473",
                    "correct" if no_grad else "leaks", step, optimizer,
                    {"policy_model": policy_model, "reference_model": reference_model})


CASES: dict[str, Callable[[int], RealCase]] = {
    "distilbert": distilbert,
    "distilbert_teacher_grad": lambda s: distilbert(s, no_grad=False),
    "deit_soft": deit_soft,
    "dpo": dpo, "dpo_reference_grad": lambda s: dpo(s, no_grad=False),
}
