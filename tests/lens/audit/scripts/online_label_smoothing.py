"""Online label smoothing at a tiny size, written after Zhang, Jiang, Hou, Wei, Han, Li and
Cheng, "Delving Deep into Label Smoothing" (IEEE Transactions on Image Processing, 2021;
zhangchbin/OnlineLabelSmoothing): the soft label of each class is the average predicted
distribution of the samples of that class the model classified correctly during the previous
epoch; the loss mixes the cross-entropy with the hard labels and the cross-entropy with these
soft labels. ``OnlineLabelSmoothing.forward(logits, labels)`` returns the loss, reading the
previous epoch's soft labels, and adds this batch's correct predictions to the current epoch's
sums under ``torch.no_grad()``; ``next_epoch()``, decorated with ``@torch.no_grad()``, turns the
sums into the soft labels. An MLP on Gaussian clusters made in the script, one SGD optimizer.
As published: clean. The method that writes the state both cuts what it writes and returns the
value the loss uses, with its graph.
``--out PATH`` saves the network's weights and the soft labels."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--alpha", type=float, default=0.5)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes, n = 10, 4, 128
means = 1.2 * torch.randn(classes, dim)
labels = torch.randint(0, classes, (n,))
data = means[labels] + torch.randn(n, dim)


class OnlineLabelSmoothing(nn.Module):
    def __init__(self, classes, alpha, smoothing=0.1):
        super().__init__()
        self.alpha = alpha
        soft = torch.full((classes, classes), smoothing / (classes - 1))
        soft.fill_diagonal_(1.0 - smoothing)
        self.register_buffer("soft", soft)
        self.register_buffer("sums", torch.zeros(classes, classes))
        self.register_buffer("counts", torch.zeros(classes))

    def forward(self, logits, labels):
        log_probs = F.log_softmax(logits, dim=1)
        soft_loss = -(self.soft[labels] * log_probs).sum(1).mean()
        hard_loss = F.nll_loss(log_probs, labels)
        with torch.no_grad():
            probs = log_probs.exp()
            right = probs.argmax(1) == labels
            self.sums.index_add_(0, labels[right], probs[right])
            self.counts.index_add_(0, labels[right], torch.ones(int(right.sum())))
        return self.alpha * hard_loss + (1 - self.alpha) * soft_loss

    @torch.no_grad()
    def next_epoch(self):
        seen = self.counts > 0
        self.soft[seen] = self.sums[seen] / self.counts[seen].unsqueeze(1)
        self.sums.zero_()
        self.counts.zero_()


model = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, classes))
criterion = OnlineLabelSmoothing(classes, args.alpha)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

for epoch in range(args.epochs):
    order = torch.randperm(n)
    for start in range(0, n, args.batch_size):
        idx = order[start:start + args.batch_size]
        loss = criterion(model(data[idx]), labels[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    criterion.next_epoch()
    print(f"epoch {epoch} loss {loss.item():.4f}")

if args.out:
    torch.save({"model": model.state_dict(), "smoothing": criterion.state_dict()}, args.out)
