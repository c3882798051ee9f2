"""Conditional adversarial domain adaptation with entropy conditioning (CDAN+E) of a small MLP
classifier from a labelled synthetic source domain to an unlabelled, shifted target domain,
written after Long, Cao, Wang and Jordan, "Conditional Adversarial Domain Adaptation"
(NeurIPS 2018, arXiv:1705.10667): a domain discriminator D is trained to tell source from
target on the multilinear map f (x) g of the features f and the classifier's softmax
predictions g (their outer product, flattened), while the feature extractor, through a gradient
reversal layer, learns to fool it; in CDAN+E each example's discriminator loss is weighted by
w = 1 + exp(-H(g)), H the prediction entropy, so that confident examples count more, the
weights normalised within each domain. With the authors' code, thuml/CDAN
(https://github.com/thuml/CDAN, pytorch/loss.py: Entropy; CDAN, which detaches the softmax
output before the outer product torch.bmm(softmax_output.unsqueeze(2), feature.unsqueeze(1)),
registers grl_hook(coeff) on the entropy, takes 1 + exp(-entropy), splits it by source and
target masks and divides each part, and the weighted BCE sum, by sums taken with
.detach().item(); pytorch/network.py: calc_coeff, the schedule of the reversal coefficient
rising from 0 to 1, and AdversarialNetwork, which registers grl_hook(coeff) on its input
(x * 1.0) and runs three linear layers with ReLU, dropout 0.5 and a sigmoid; train_image.py:
one SGD optimizer over the base network's and the discriminator's parameters, total loss
trade_off * transfer_loss + the source cross-entropy, zero_grad, backward, step), whose steps
this script follows; the entropy keeps its graph, so the weights 1 + exp(-H) send the reversed
gradient into the network while the normalisers are constants. Here the domains are Gaussian
class clusters, the target's rotated and shifted, the base network an MLP returning its
bottleneck features and the class logits, and one fixed learning rate replaces the schedule.
As published: clean."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=150)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--lr", type=float, default=0.02)
parser.add_argument("--trade-off", type=float, default=1.0)
parser.add_argument("--max-iter", type=float, default=150.0, help="sets the reversal schedule")
parser.add_argument("--out", default=None, help="where to save the networks")
args = parser.parse_args()
torch.manual_seed(args.seed)
torch.set_num_threads(1)

in_dim, bottleneck_dim, class_num = 6, 16, 3

# source: three Gaussian clusters; target: the same clusters rotated in the first two
# coordinates and shifted
centres = 2.0 * torch.randn(class_num, in_dim)
angle = 0.6
rotation = torch.eye(in_dim)
rotation[:2, :2] = torch.tensor([[math.cos(angle), -math.sin(angle)],
                                 [math.sin(angle), math.cos(angle)]])
n_per_domain = 600
labels_source_all = torch.randint(0, class_num, (n_per_domain,))
x_source_all = centres[labels_source_all] + 0.8 * torch.randn(n_per_domain, in_dim)
labels_target_all = torch.randint(0, class_num, (n_per_domain,))
x_target_all = (centres[labels_target_all] + 0.8 * torch.randn(n_per_domain, in_dim)) @ rotation.T
x_target_all = x_target_all + 0.5


def calc_coeff(iter_num, high=1.0, low=0.0, alpha=10.0, max_iter=args.max_iter):
    return 2.0 * (high - low) / (1.0 + math.exp(-alpha * iter_num / max_iter)) - (high - low) + low


def grl_hook(coeff):
    def reverse(grad):
        return -coeff * grad.clone()
    return reverse


class BaseNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.feature_layers = nn.Sequential(nn.Linear(in_dim, 32), nn.ReLU())
        self.bottleneck = nn.Sequential(nn.Linear(32, bottleneck_dim), nn.ReLU())
        self.fc = nn.Linear(bottleneck_dim, class_num)

    def forward(self, x):
        features = self.bottleneck(self.feature_layers(x))
        return features, self.fc(features)


class AdversarialNetwork(nn.Module):
    def __init__(self, in_feature, hidden_size):
        super().__init__()
        self.ad_layer1 = nn.Linear(in_feature, hidden_size)
        self.ad_layer2 = nn.Linear(hidden_size, hidden_size)
        self.ad_layer3 = nn.Linear(hidden_size, 1)
        self.dropout1, self.dropout2 = nn.Dropout(0.5), nn.Dropout(0.5)
        self.iter_num = 0

    def forward(self, x):
        if self.training:
            self.iter_num += 1
        coeff = calc_coeff(self.iter_num)
        x = x * 1.0
        x.register_hook(grl_hook(coeff))
        x = self.dropout1(F.relu(self.ad_layer1(x)))
        x = self.dropout2(F.relu(self.ad_layer2(x)))
        return torch.sigmoid(self.ad_layer3(x))


def entropy_of(probs):
    return -(probs * torch.log(probs + 1e-5)).sum(1)


def cdan_loss(features, softmax_out, ad_net, entropy, coeff):
    softmax_output = softmax_out.detach()
    op_out = torch.bmm(softmax_output.unsqueeze(2), features.unsqueeze(1))
    ad_out = ad_net(op_out.view(-1, softmax_output.size(1) * features.size(1)))
    batch_size = softmax_output.size(0) // 2
    dc_target = torch.cat([torch.ones(batch_size, 1), torch.zeros(batch_size, 1)])
    entropy.register_hook(grl_hook(coeff))
    weight = 1.0 + torch.exp(-entropy)
    source_mask = torch.zeros_like(weight)
    source_mask[:batch_size] = 1.0
    source_weight, target_weight = weight * source_mask, weight * (1.0 - source_mask)
    weight = source_weight / source_weight.sum().detach() + target_weight / target_weight.sum().detach()
    bce = F.binary_cross_entropy(ad_out, dc_target, reduction="none")
    return (weight.view(-1, 1) * bce).sum() / weight.sum().detach()


base_network = BaseNetwork()
ad_net = AdversarialNetwork(bottleneck_dim * class_num, 32)
parameter_list = list(base_network.parameters()) + list(ad_net.parameters())
optimizer = torch.optim.SGD(parameter_list, lr=args.lr, momentum=0.9, weight_decay=5e-4,
                            nesterov=True)
for i in range(args.steps):
    base_network.train()
    ad_net.train()
    idx_s = torch.randint(0, n_per_domain, (args.batch_size,))
    idx_t = torch.randint(0, n_per_domain, (args.batch_size,))
    inputs_source, labels_source = x_source_all[idx_s], labels_source_all[idx_s]
    inputs_target = x_target_all[idx_t]
    optimizer.zero_grad()
    features_source, outputs_source = base_network(inputs_source)
    features_target, outputs_target = base_network(inputs_target)
    features = torch.cat((features_source, features_target), dim=0)
    outputs = torch.cat((outputs_source, outputs_target), dim=0)
    softmax_out = F.softmax(outputs, dim=1)
    entropy = entropy_of(softmax_out)
    transfer_loss = cdan_loss(features, softmax_out, ad_net, entropy, calc_coeff(i))
    classifier_loss = F.cross_entropy(outputs_source, labels_source)
    total_loss = args.trade_off * transfer_loss + classifier_loss
    total_loss.backward()
    optimizer.step()
    if i % 50 == 0:
        print(f"iter {i} transfer {transfer_loss.item():.4f} classifier {classifier_loss.item():.4f}")

with torch.no_grad():
    base_network.eval()
    accuracy = (base_network(x_target_all)[1].argmax(1) == labels_target_all).float().mean()
    print(f"target accuracy {accuracy.item():.3f}")

if args.out:
    torch.save({"base_network": base_network.state_dict(), "ad_net": ad_net.state_dict()}, args.out)
