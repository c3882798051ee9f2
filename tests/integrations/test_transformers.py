"""``toolkit.integrations.transformers.AuditCallback``, driven by the real ``Trainer.train``.

A one-layer ``BertForSequenceClassification`` built from a ``BertConfig`` (no weights from a
hub: ``HF_HUB_OFFLINE=1``), on random token ids; two or three optimizer steps per run.
"""

from __future__ import annotations

import os

import pytest

pytest.importorskip("transformers", reason="needs the [transformers] extra: pip install -e \".[transformers]\"")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from torch import nn
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    Trainer,
    TrainingArguments,
)

from toolkit import GradientLeakError
from toolkit.integrations import AuditWarning
from toolkit.integrations.transformers import AuditCallback

SEQ, VOCAB = 12, 64


class Tokens(torch.utils.data.Dataset):
    """Random token ids and binary labels, as a tokenized dataset hands them to the Trainer."""

    def __init__(self, seed: int, n: int = 16) -> None:
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(1, VOCAB, (n, SEQ), generator=g)
        self.labels = torch.randint(0, 2, (n,), generator=g)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "attention_mask": torch.ones(SEQ, dtype=torch.long),
                "labels": self.labels[i]}


def tiny_bert(seed: int) -> BertForSequenceClassification:
    torch.manual_seed(seed)
    return BertForSequenceClassification(BertConfig(
        vocab_size=VOCAB, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=SEQ + 4, num_labels=2))


def train(trainer_cls, model, seed: int, tmp_path, callbacks=(), steps: int = 2, **kwargs):
    args = TrainingArguments(output_dir=str(tmp_path), per_device_train_batch_size=4,
                             max_steps=steps, learning_rate=1e-2, report_to="none",
                             save_strategy="no", logging_strategy="no", disable_tqdm=True,
                             use_cpu=True, dataloader_num_workers=0, seed=seed)
    trainer = trainer_cls(model=model, args=args, train_dataset=Tokens(seed),
                          callbacks=list(callbacks), **kwargs)
    trainer.train()
    return trainer


class ClsTokenTrainer(Trainer):
    """``compute_loss`` after the custom-loss pattern of the Trainer documentation (as in
    dchartash/n2c2_2022, ``train_utils/custom_trainer.py``: labels from the inputs, the
    model's forward, then ``CrossEntropyLoss``), classifying the ``[CLS]`` token's last
    hidden state with the model's classifier instead of the pooled output. BERT's pooler
    still runs and never reaches the loss: the "parameters that were not used in producing
    loss" of allenai/allennlp#5682 under DDP.
    """

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        labels = inputs.get("labels")
        # forward pass
        outputs = model(**inputs, output_hidden_states=True)
        cls = outputs.hidden_states[-1][:, 0]
        logits = model.classifier(model.dropout(cls))
        loss_fct = nn.CrossEntropyLoss()
        loss = loss_fct(logits.view(-1, self.model.config.num_labels), labels.view(-1))
        return (loss, outputs) if return_outputs else loss


def test_a_frozen_embedding_audits_clean(seed, tmp_path) -> None:
    model = tiny_bert(seed)
    model.bert.embeddings.requires_grad_(False)
    callback = AuditCallback()
    trainer = train(Trainer, model, seed, tmp_path, [callback])
    ((step, audit),) = callback.audits
    trainable = sum(p.requires_grad for p in model.parameters())
    assert step == 0 and audit.ok and audit.n_stepped == trainable < len(list(model.parameters()))
    assert trainer.compute_loss.__func__ is Trainer.compute_loss  # its own method back


def test_frozen_tensors_in_a_users_optimizer_are_information(seed, tmp_path) -> None:
    model = tiny_bert(seed)
    model.bert.embeddings.requires_grad_(False)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)  # frozen ones included
    callback = AuditCallback()
    train(Trainer, model, seed, tmp_path, [callback], optimizers=(optimizer, None))
    audit = callback.audits[0][1]
    assert audit.ok
    assert {f.parameter for f in audit.frozen} == {
        f"bert.embeddings.{n}" for n, _ in model.bert.embeddings.named_parameters()}


def test_a_loss_that_skips_a_head_is_reported_dead_with_its_reason(seed, tmp_path) -> None:
    with pytest.raises(GradientLeakError, match="compute_loss of optimizer step 0") as caught:
        train(ClsTokenTrainer, tiny_bert(seed), seed, tmp_path, [AuditCallback()])
    dead = caught.value.audit.dead
    assert {d.parameter for d in dead} == {"bert.pooler.dense.weight", "bert.pooler.dense.bias"}
    assert {d.kind for d in dead} == {"no_graph"}
    assert all(d.cut.startswith("no graph: the step reads it") for d in dead)
    # the user's line that ran the model, with the package's function that called the pooler
    # (issue 53: no line of an installed package is named)
    assert all(d.line and d.line.startswith("at test_transformers.py:")
               and d.line.endswith("inside transformers's forward") for d in dead)
    assert "modeling_bert.py" not in str(caught.value)
    # and the line of the user's compute_loss that ran it, not one inside transformers
    (line,) = {x for d in dead for x in d.lines}
    assert (line.file, line.function) == ("test_transformers.py", "compute_loss")
    assert line.text == "outputs = model(**inputs, output_hidden_states=True)"
    assert f"at:   {line}" in str(caught.value)


def test_warn_reports_and_training_goes_on(seed, tmp_path) -> None:
    callback = AuditCallback(on_finding="warn", every_n_steps=2)
    with pytest.warns(AuditWarning, match="bert.pooler.dense.weight"):
        trainer = train(ClsTokenTrainer, tiny_bert(seed), seed, tmp_path, [callback], steps=3)
    assert [step for step, _ in callback.audits] == [0, 2]
    assert trainer.state.global_step == 3


def test_watching_never_changes_what_is_trained(seed, tmp_path) -> None:
    """Every step audited, with dropout on: the same weights as without the callback."""
    plain, watched = tiny_bert(seed), tiny_bert(seed)
    train(Trainer, plain, seed, tmp_path / "plain", steps=3)
    callback = AuditCallback(every_n_steps=1)
    train(Trainer, watched, seed, tmp_path / "watched", [callback], steps=3)
    assert [step for step, _ in callback.audits] == [0, 1, 2]
    state = watched.state_dict()
    assert not [k for k, v in plain.state_dict().items() if not torch.equal(v, state[k])]
    assert not torch.equal(plain.classifier.weight, tiny_bert(seed).classifier.weight)
