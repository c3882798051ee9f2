"""Sequence classification with the Hugging Face ``Trainer`` at a tiny size, written after
transformers' examples/pytorch/text-classification/run_glue.py (https://github.com/huggingface/
transformers/blob/242e7fc66cfcb271496bf5a6d207db90c9b96817/examples/pytorch/text-classification/
run_glue.py): ``TrainingArguments`` and ``Trainer(model, args, train_dataset)``, here with a
BERT encoder built from a tiny ``BertConfig`` (random weights, nothing downloaded) under a
classification head of the script's own, as custom models given to the Trainer are written.
Injected bug: the
head reads ``cls.detach()``: no loss reaches the encoder, which the Trainer's optimizer steps."""

import argparse
import tempfile

import torch
from torch import nn
from transformers import BertConfig, BertModel, Trainer, TrainingArguments

parser = argparse.ArgumentParser()
parser.add_argument("--max-steps", type=int, default=4)
parser.add_argument("--batch-size", type=int, default=4)
parser.add_argument("--seq-len", type=int, default=8)
parser.add_argument("--output-dir", default=None)
parser.add_argument("--seed", type=int, default=42)
args = parser.parse_args()
torch.manual_seed(args.seed)


class Classifier(nn.Module):
    def __init__(self, config, num_labels):
        super().__init__()
        self.bert = BertModel(config, add_pooling_layer=False)
        self.dropout = nn.Dropout(0.1)
        self.classifier = nn.Linear(config.hidden_size, num_labels)

    def forward(self, input_ids, labels=None):
        cls = self.bert(input_ids=input_ids).last_hidden_state[:, 0]
        logits = self.classifier(self.dropout(cls.detach()))
        loss = nn.functional.cross_entropy(logits, labels)
        return {"loss": loss, "logits": logits}


class RandomText(torch.utils.data.Dataset):
    def __init__(self, n, vocab):
        self.ids = torch.randint(0, vocab, (n, args.seq_len))
        self.labels = torch.randint(0, 2, (n,))

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


config = BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                    intermediate_size=32, max_position_embeddings=32)
model = Classifier(config, num_labels=2)
training_args = TrainingArguments(
    output_dir=args.output_dir or tempfile.mkdtemp(), max_steps=args.max_steps,
    per_device_train_batch_size=args.batch_size, learning_rate=5e-4, logging_steps=1,
    save_strategy="no", report_to=[], use_cpu=True, seed=args.seed, disable_tqdm=True)
trainer = Trainer(model=model, args=training_args, train_dataset=RandomText(32, 64))
trainer.train()
