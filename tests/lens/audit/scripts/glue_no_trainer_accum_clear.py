"""Sequence classification fine-tuned with gradient accumulation, at a tiny size, written after
Hugging Face's example without the Trainer (huggingface/transformers,
examples/pytorch/text-classification/run_glue_no_trainer.py, the loop over ``step, batch in
enumerate(train_dataloader)``; the Trainer's ``(step + 1) % gradient_accumulation_steps == 0``
test, src/transformers/trainer.py): each loss is divided by ``--gradient-accumulation-steps``
(4 at the defaults), and the optimizer and the linear warm-up and decay schedule step once the
window's last micro-batch is through (``(step + 1) % gradient_accumulation_steps == 0`` or the
epoch's last batch), ``completed_steps`` counting the steps (6 at the defaults, 2 epochs of 12
batches). The example clears the gradient right after the step; here the clear opens each
window, under ``step % gradient_accumulation_steps == 0``, before the window's first forward
pass, as Lightning's loop does. A small encoder standing in for a pretrained one (an embedding
averaged over the tokens, a pre-classifier, a classifier, as DistilBERT's head). Token ids and
labels made in the script. AdamW. As published: clean. ``--out PATH`` saves the model's
state_dict after the run."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--num-train-epochs", type=int, default=2)
parser.add_argument("--per-device-train-batch-size", type=int, default=4)
parser.add_argument("--gradient-accumulation-steps", type=int, default=4)
parser.add_argument("--learning-rate", type=float, default=5e-3)
parser.add_argument("--weight-decay", type=float, default=0.01)
parser.add_argument("--num-warmup-steps", type=int, default=1)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

vocab_size, seq_len, dim, num_labels = 20, 6, 16, 2
input_ids = torch.randint(0, vocab_size, (48, seq_len))
labels = ((input_ids < 5).sum(1) > 1).long()
train_dataloader = [(input_ids[i:i + args.per_device_train_batch_size],
                     labels[i:i + args.per_device_train_batch_size])
                    for i in range(0, len(input_ids), args.per_device_train_batch_size)]


class SequenceClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embeddings = nn.Embedding(vocab_size, dim)
        self.pre_classifier = nn.Linear(dim, dim)
        self.classifier = nn.Linear(dim, num_labels)

    def forward(self, ids):
        hidden = self.embeddings(ids).mean(1)
        return self.classifier(F.relu(self.pre_classifier(hidden)))


model = SequenceClassifier()
no_decay = ["bias"]
optimizer = torch.optim.AdamW([
    {"params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)],
     "weight_decay": args.weight_decay},
    {"params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)],
     "weight_decay": 0.0},
], lr=args.learning_rate)
num_update_steps_per_epoch = -(-len(train_dataloader) // args.gradient_accumulation_steps)
max_train_steps = args.num_train_epochs * num_update_steps_per_epoch


def linear_schedule(current_step):
    if current_step < args.num_warmup_steps:
        return (current_step + 1) / (args.num_warmup_steps + 1)
    return max(0.0, (max_train_steps - current_step) / (max_train_steps - args.num_warmup_steps))


lr_scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, linear_schedule)

completed_steps = 0
for epoch in range(args.num_train_epochs):
    model.train()
    total_loss = 0.0
    for step, (batch_ids, batch_labels) in enumerate(train_dataloader):
        if step % args.gradient_accumulation_steps == 0:
            optimizer.zero_grad()
        logits = model(batch_ids)
        loss = F.cross_entropy(logits, batch_labels)
        total_loss += loss.item()
        loss = loss / args.gradient_accumulation_steps
        loss.backward()
        if (step + 1) % args.gradient_accumulation_steps == 0 or \
                step == len(train_dataloader) - 1:
            optimizer.step()
            lr_scheduler.step()
            completed_steps += 1
    print(f"epoch {epoch}: steps {completed_steps}, "
          f"loss {total_loss / len(train_dataloader):.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
