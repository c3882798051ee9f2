"""The forward-forward algorithm at a tiny size, written after Hinton, "The Forward-Forward
Algorithm: Some Preliminary Investigations" (arXiv:2212.13345, 2022), sections 2 and 3 (a layer's
goodness, the mean of its squared activities, pushed above a threshold for positive data and below
it for negative data; the label written into the input; each layer's input the length-normalised
activity of the layer below, so that the next layer cannot read the goodness from its length), with
mohammadpz/pytorch_forward_forward (https://github.com/mohammadpz/pytorch_forward_forward, main.py:
overlay_y_on_x, which writes the one-hot label into the first pixels; Layer.forward, which divides
its input by its norm plus 1e-4 before the ReLU layer; Layer.train, the loss log(1 + exp(cat([-g_pos
+ threshold, g_neg - threshold]))).mean() with threshold 2.0 and its own Adam per layer, the outputs
passed on with .detach(); Net.predict, the label of highest summed goodness; negative data the same
input with a wrong label) and the minibatch layout of loeweX/Forward-Forward
(https://github.com/loeweX/Forward-Forward, src/ff_model.py FF_model.forward: every layer updated on
every batch, the per-layer losses summed into one backward with z = z.detach() between the layers;
forward_downstream_classification_model, a linear classifier trained beside them on the normalised
activities of the upper layers for a neutral label, those activities computed under
torch.no_grad()). Three FF layers, each stepped by its own Adam, and the classifier by its own.
Class prototypes plus noise, made in the script. Injected bug: the z = z.detach() between the layers
is dropped, so each layer's input keeps the graph of the layers below (mohammadpz's Layer.train
passes its outputs on with .detach(), and loeweX's FF_model.forward cuts z after every layer's
loss): the one backward of the summed losses carries every upper layer's goodness loss down through
the normalisation into the layers below, whose own Adams step on their loss plus those of all the
layers above, which is backpropagation, not forward-forward."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=80)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--threshold", type=float, default=2.0)
parser.add_argument("--lr", type=float, default=0.03)
parser.add_argument("--classifier-lr", type=float, default=0.01)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_classes, in_dim, hidden_dim, n_layers = 4, 24, 32, 3
prototypes = torch.randn(n_classes, in_dim)
labels = torch.randint(0, n_classes, (512,))
data = prototypes[labels] + 0.8 * torch.randn(512, in_dim)


def overlay(x, y):
    """Write the label over the first n_classes inputs (a neutral 1/n_classes when y is None)."""
    x = x.clone()
    x[:, :n_classes] = 0.0 if y is not None else 1.0 / n_classes
    if y is not None:
        x[torch.arange(len(x)), y] = x.max()
    return x


def normalise(x):
    return x / (x.norm(2, 1, keepdim=True) + 1e-4)


class FFLayer(nn.Linear):
    def forward(self, x):
        return F.relu(super().forward(normalise(x)))


def ff_loss(z, n_pos):
    goodness = z.pow(2).mean(1)
    g_pos, g_neg = goodness[:n_pos], goodness[n_pos:]
    return F.softplus(torch.cat([args.threshold - g_pos, g_neg - args.threshold])).mean()


layers = nn.ModuleList([FFLayer(in_dim if i == 0 else hidden_dim, hidden_dim)
                        for i in range(n_layers)])
classifier = nn.Linear(hidden_dim * (n_layers - 1), n_classes, bias=False)
nn.init.zeros_(classifier.weight)
optimizers = [torch.optim.Adam(layer.parameters(), lr=args.lr) for layer in layers]
classifier_optimizer = torch.optim.Adam(classifier.parameters(), lr=args.classifier_lr)


def predict(x):
    """The label whose overlay gives the highest goodness summed over the layers."""
    scores = []
    for label in range(n_classes):
        z, total = overlay(x, torch.full((len(x),), label)), 0.0
        for layer in layers:
            z = layer(z)
            total = total + z.pow(2).mean(1)
        scores.append(total)
    return torch.stack(scores, 1).argmax(1)


for step in range(args.steps):
    idx = torch.randint(0, len(data), (args.batch_size,))
    x, y = data[idx], labels[idx]
    wrong = (y + torch.randint(1, n_classes, y.shape)) % n_classes
    z = torch.cat([overlay(x, y), overlay(x, wrong)])
    losses = []
    for layer in layers:
        z = layer(z)
        losses.append(ff_loss(z, len(x)))
    # the downstream classifier reads the upper layers' normalised activities for a neutral label
    with torch.no_grad():
        h, features = overlay(x, None), []
        for i, layer in enumerate(layers):
            h = layer(h)
            if i >= 1:
                features.append(normalise(h))
        features = torch.cat(features, 1)
    logits = classifier(features)
    classification_loss = F.cross_entropy(logits, y)
    for optimizer in optimizers + [classifier_optimizer]:
        optimizer.zero_grad()
    (sum(losses) + classification_loss).backward()
    for optimizer in optimizers + [classifier_optimizer]:
        optimizer.step()
    if step % 10 == 0 or step == args.steps - 1:
        with torch.no_grad():
            ff_acc = (predict(data) == labels).float().mean().item()
            probe = (classifier(features).argmax(1) == y).float().mean().item()
        print(f"step {step} losses {' '.join(f'{l.item():.3f}' for l in losses)} "
              f"ce {classification_loss.item():.3f} ff acc {ff_acc:.3f} probe {probe:.3f}")

if args.out:
    torch.save({"layers": layers.state_dict(), "classifier": classifier.state_dict()}, args.out)
