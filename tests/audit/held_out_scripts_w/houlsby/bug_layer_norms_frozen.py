"""Adapter tuning of a pre-trained network on a new task, written after Houlsby, Giurgiu,
Jastrzebski, Morrone, de Laroussilhe, Gesmundo, Attariyan and Gelly, "Parameter-Efficient
Transfer Learning for NLP" (ICML 2019, arXiv:1902.00751): a bottleneck adapter, a down-
projection, a nonlinearity and an up-projection with an identity skip connection and a
near-zero initialisation, is inserted after the output projection of each sublayer, before the
residual addition and the layer normalisation; the pre-trained weights are frozen and only the
adapters, the layer normalisation parameters and the new task's head are trained. Two phases:
pre-training of the backbone (no adapters) with its own head on a source task, then adapter
tuning on a target task. With the authors' code, google-research/adapter-bert
(https://github.com/google-research/adapter-bert: modeling.py feedforward_adapter builds the
bottleneck, weights1 and weights2 drawn with stddev init_scale = 1e-3, zero biases, a gelu in
between and "net + input_tensor" at the end, its variables put in the "adapters" collection;
transformer_model calls adapter_fn on the attention output and on the feed-forward output just
before layer_norm(output + residual), and layer_norm puts its variables in the "layer_norm"
collection; run_classifier.py create_model puts output_weights and output_bias of the
classifier on the pooled output in the "head" collection, the pooler itself is not in it;
optimization.py create_optimizer takes the gradients of the loss only with respect to the
variables of the "adapters", "layer_norm" and "head" collections, clips them to global norm 1.0
and applies AdamWeightDecayOptimizer with weight decay 0.01 except for LayerNorm and bias
variables), whose steps this script follows, freezing the other parameters with
requires_grad_(False). The "transformer" here works on vectors: each block has a dense mixing
sublayer and a feed-forward sublayer, each followed by an adapter, the residual and a LayerNorm.
Bug: the trainable set leaves out the layer norms ("norm" in name), which stay frozen."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--pretrain-steps", type=int, default=80)
parser.add_argument("--adapter-steps", type=int, default=80)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--adapter-size", type=int, default=8)
parser.add_argument("--pretrain-lr", type=float, default=3e-3)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--out", default=None, help="where to save the pre-trained and adapted models")
args = parser.parse_args()
torch.manual_seed(args.seed)

in_dim, d_model, d_ff, n_layers = 12, 32, 64, 2
n_source_classes, n_target_classes = 5, 3

# source and target tasks share latent features: labels are readouts of one random feature map
latent = nn.Sequential(nn.Linear(in_dim, 16), nn.Tanh())
source_readout, target_readout = nn.Linear(16, n_source_classes), nn.Linear(16, n_target_classes)


def make_task(readout, n):
    x = torch.randn(n, in_dim)
    with torch.no_grad():
        y = readout(latent(x) + 0.1 * torch.randn(n, 16)).argmax(1)
    return x, y


x_source, y_source = make_task(source_readout, 1024)
x_target, y_target = make_task(target_readout, 256)


class Adapter(nn.Module):
    """Bottleneck adapter with a skip connection, initialised near the identity."""

    def __init__(self, size):
        super().__init__()
        self.down, self.up = nn.Linear(d_model, size), nn.Linear(size, d_model)
        for layer in (self.down, self.up):
            nn.init.trunc_normal_(layer.weight, std=1e-3, a=-2e-3, b=2e-3)
            nn.init.zeros_(layer.bias)

    def forward(self, h):
        return h + self.up(F.gelu(self.down(h)))


class Block(nn.Module):
    def __init__(self, adapter_size):
        super().__init__()
        self.mix = nn.Linear(d_model, d_model)
        self.mix_norm = nn.LayerNorm(d_model)
        self.ff_in, self.ff_out = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.ff_norm = nn.LayerNorm(d_model)
        self.mix_adapter = Adapter(adapter_size) if adapter_size else nn.Identity()
        self.ff_adapter = Adapter(adapter_size) if adapter_size else nn.Identity()

    def forward(self, h):
        h = self.mix_norm(self.mix_adapter(torch.tanh(self.mix(h))) + h)
        return self.ff_norm(self.ff_adapter(self.ff_out(F.gelu(self.ff_in(h)))) + h)


class Classifier(nn.Module):
    def __init__(self, n_classes, adapter_size=0):
        super().__init__()
        self.embed = nn.Linear(in_dim, d_model)
        self.embed_norm = nn.LayerNorm(d_model)
        self.blocks = nn.ModuleList([Block(adapter_size) for _ in range(n_layers)])
        self.pooler = nn.Linear(d_model, d_model)
        self.head = nn.Linear(d_model, n_classes)
        nn.init.trunc_normal_(self.head.weight, std=0.02)
        nn.init.zeros_(self.head.bias)

    def forward(self, x):
        h = self.embed_norm(self.embed(x))
        for block in self.blocks:
            h = block(h)
        return self.head(torch.tanh(self.pooler(h)))


# phase 1: pre-training of the whole backbone and a source head on the source task
pretrained = Classifier(n_source_classes)
pretrain_optimizer = torch.optim.AdamW(pretrained.parameters(), lr=args.pretrain_lr,
                                       weight_decay=0.01)
for step in range(args.pretrain_steps):
    idx = torch.randint(0, len(x_source), (args.batch_size,))
    loss = F.cross_entropy(pretrained(x_source[idx]), y_source[idx])
    pretrain_optimizer.zero_grad()
    loss.backward()
    pretrain_optimizer.step()
    if step % 40 == 0:
        print(f"pretrain {step} loss {loss.item():.4f}")

# phase 2: adapter tuning; copy the pre-trained weights (not the source head), add fresh
# adapters and a target head, and train only the adapters, the layer norms and the head
model = Classifier(n_target_classes, adapter_size=args.adapter_size)
backbone_weights = {k: v for k, v in pretrained.state_dict().items() if not k.startswith("head.")}
model.load_state_dict(backbone_weights, strict=False)
for name, p in model.named_parameters():
    p.requires_grad_("adapter" in name or name.startswith("head."))
trainable = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
decay = [p for name, p in trainable if "norm" not in name and not name.endswith("bias")]
no_decay = [p for name, p in trainable if "norm" in name or name.endswith("bias")]
optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                               {"params": no_decay, "weight_decay": 0.0}], lr=args.lr, eps=1e-6)
for step in range(args.adapter_steps):
    idx = torch.randint(0, len(x_target), (args.batch_size,))
    loss = F.cross_entropy(model(x_target[idx]), y_target[idx])
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_([p for _, p in trainable], 1.0)
    optimizer.step()
    if step % 40 == 0:
        print(f"adapter {step} loss {loss.item():.4f}")

if args.out:
    torch.save({"pretrained": pretrained.state_dict(), "model": model.state_dict()}, args.out)
