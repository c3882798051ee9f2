"""Test-time entropy minimisation (tent) at a tiny size, written after Wang, Shelhamer, Liu,
Olshausen and Darrell, "Tent: Fully Test-Time Adaptation by Entropy Minimization" (ICLR 2021,
arXiv:2006.10726), section 3, with DequanWang/tent (https://github.com/DequanWang/tent, tent.py:
Tent.forward and reset, forward_and_adapt, softmax_entropy, collect_params, configure_model,
copy_model_and_optimizer, load_model_and_optimizer; cifar10c.py setup_tent, setup_optimizer and
evaluate, which resets the tented model before each corruption). Two phases: a small
convolutional classifier with batch normalisation is trained with labels on source images, and
its weights are loaded into the model to adapt (the reference's pretrained robustbench model).
Then the model is tented: train mode, requires_grad_(False) on the whole model and
requires_grad_(True) on each BatchNorm2d, whose running statistics are dropped so that it
normalises every batch with the batch's own statistics; Adam over the BatchNorm scales and shifts
alone (collect_params) minimises the mean entropy of the predictions on each unlabelled test
batch, one step per batch, clearing after the step; the model's and the optimizer's states are
deep-copied when the model is tented and restored before each of two shifted test domains.
Textured images of four kinds made in the script. As published: clean."""

import argparse
from copy import deepcopy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--source-steps", type=int, default=30)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--test-batches", type=int, default=4)
parser.add_argument("--source-lr", type=float, default=1e-2)
parser.add_argument("--lr", type=float, default=5e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_kinds, size = 4, 8
coords = torch.linspace(-1, 1, size)
yy, xx = torch.meshgrid(coords, coords, indexing="ij")
angles = torch.arange(n_kinds).float() * torch.pi / n_kinds
textures = torch.stack([torch.sin(4 * (xx * a.cos() + yy * a.sin())) for a in angles])


def make_images(n, gain=1.0, offset=0.0, noise=0.5):
    kinds = torch.randint(0, n_kinds, (n,))
    colour = gain * torch.tensor([1.0, 0.6, 0.3]).view(1, 3, 1, 1)
    images = textures[kinds].unsqueeze(1) * colour + offset + noise * torch.randn(n, 3, size, size)
    return images, kinds


source_images, source_kinds = make_images(512)
domains = {"low_contrast_bright": make_images(args.batch_size * args.test_batches, 0.5, 0.8),
           "noisy_tinted": make_images(args.batch_size * args.test_batches, 0.4,
                                       torch.tensor([-0.6, 0.3, 0.5]).view(1, 3, 1, 1), 0.7)}


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(16)
        self.fc = nn.Linear(16, n_kinds)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        return self.fc(x.mean((2, 3)))


def softmax_entropy(x):
    return -(x.softmax(1) * x.log_softmax(1)).sum(1)


@torch.enable_grad()
def forward_and_adapt(x, model, optimizer):
    outputs = model(x)
    loss = softmax_entropy(outputs).mean(0)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return outputs


def configure_model(model):
    model.train()
    model.requires_grad_(False)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.requires_grad_(True)
            m.track_running_stats = False
            m.running_mean = None
            m.running_var = None
    return model


def collect_params(model):
    params, names = [], []
    for nm, m in model.named_modules():
        if isinstance(m, nn.BatchNorm2d):
            for np_, p in m.named_parameters():
                if np_ in ["weight", "bias"]:
                    params.append(p)
                    names.append(f"{nm}.{np_}")
    return params, names


def copy_model_and_optimizer(model, optimizer):
    model_state = deepcopy(model.state_dict())
    optimizer_state = deepcopy(optimizer.state_dict())
    return model_state, optimizer_state


class Tent(nn.Module):
    def __init__(self, model, optimizer, steps=1):
        super().__init__()
        self.model, self.optimizer, self.steps = model, optimizer, steps
        self.model_state, self.optimizer_state = copy_model_and_optimizer(model, optimizer)

    def forward(self, x):
        for _ in range(self.steps):
            outputs = forward_and_adapt(x, self.model, self.optimizer)
        return outputs

    def reset(self):
        self.model.load_state_dict(self.model_state, strict=True)
        self.optimizer.load_state_dict(self.optimizer_state)


# phase 1: the source model, trained with labels
source_model = Net()
source_optimizer = torch.optim.Adam(source_model.parameters(), lr=args.source_lr)
for step in range(args.source_steps):
    idx = torch.randint(0, len(source_images), (args.batch_size,))
    loss = F.cross_entropy(source_model(source_images[idx]), source_kinds[idx])
    source_optimizer.zero_grad()
    loss.backward()
    source_optimizer.step()
source_model.eval()

# phase 2: tent adapts a copy of the source model on the unlabelled test domains
model = Net()
model.load_state_dict(source_model.state_dict())
model = configure_model(model)
params, param_names = collect_params(model)
optimizer = torch.optim.Adam(params, lr=args.lr, betas=(0.9, 0.999))
tent_model = Tent(model, optimizer)
for name, (images, kinds) in domains.items():
    tent_model.reset()
    source_correct, tent_correct = 0, 0
    with torch.no_grad():
        for start in range(0, len(images), args.batch_size):
            x, y = images[start:start + args.batch_size], kinds[start:start + args.batch_size]
            source_correct += (source_model(x).argmax(1) == y).sum().item()
            tent_correct += (tent_model(x).argmax(1) == y).sum().item()
    print(f"{name}: source accuracy {source_correct / len(images):.3f} "
          f"tent accuracy {tent_correct / len(images):.3f}")

if args.out:
    torch.save({"source": source_model.state_dict(), "tent": model.state_dict()}, args.out)
