"""Relation networks for few-shot learning at a tiny size, written after Sung, Yang, Zhang,
Xiang, Torr and Hospedales, "Learning to Compare: Relation Network for Few-Shot Learning" (CVPR
2018, arXiv:1711.06025), sections 3.2-3.4: an embedding module f_phi maps the support and query
examples of an episode to features, the features of each class's support examples are summed,
each query's feature is concatenated with every class feature, and a relation module g_theta
scores the pair in [0, 1]; both modules are trained end to end by the mean squared error
between the relation scores and the one-hot match of the query's class. With
floodsung/LearningToCompare_FSL (https://github.com/floodsung/LearningToCompare_FSL,
omniglot/omniglot_train_few_shot.py main: CNNEncoder and RelationNetwork, each with its own
torch.optim.Adam, feature_encoder_optim and relation_network_optim; each episode
sample_features summed over the shots, the repeat and transpose that build relation_pairs,
mse(relations, one_hot_labels), then feature_encoder.zero_grad() and relation_network.zero_grad(),
loss.backward(), clip_grad_norm over each module's parameters to 0.5 and both optimizers'
steps; every 5000 episodes a test on episodes of held-out classes, whose relations are only
compared). Here the test freezes both modules with requires_grad_(False), so that it builds no
graph, and unfreezes them after it. Vector-valued examples around class prototypes, made in the
script; small MLPs for the conv modules. Bug: test() leaves out
relation_network.requires_grad_(True) after the test episodes, and only the embedding module is
unfrozen, so from the first test on the freeze stays on for the relation module: the MSE still
backpropagates through g_theta into the embedding module, but relation_network's parameters get no
gradient and its Adam skips them, and the relations are learnt by f_phi alone under a fixed g_theta
(floodsung/LearningToCompare_FSL trains both modules in every episode, its test in between changing
no flag of either)."""

import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--episodes", type=int, default=30)
parser.add_argument("--test-every", type=int, default=10)
parser.add_argument("--test-episodes", type=int, default=4)
parser.add_argument("--way", type=int, default=5)
parser.add_argument("--shot", type=int, default=3)
parser.add_argument("--query", type=int, default=4)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

in_dim, feature_dim, relation_dim = 16, 32, 16
n_train_classes, n_test_classes = 20, 10
prototypes = torch.randn(n_train_classes + n_test_classes, in_dim)
train_classes = torch.arange(n_train_classes)
test_classes = torch.arange(n_train_classes, n_train_classes + n_test_classes)


def episode(classes):
    """Support (way, shot, in_dim), queries (way * query, in_dim) and the queries' labels."""
    chosen = classes[torch.randperm(len(classes))[:args.way]]
    centre = prototypes[chosen].unsqueeze(1)
    support = centre + 0.8 * torch.randn(args.way, args.shot, in_dim)
    queries = (centre + 0.8 * torch.randn(args.way, args.query, in_dim)).view(-1, in_dim)
    labels = torch.arange(args.way).repeat_interleave(args.query)
    order = torch.randperm(len(labels))
    return support, queries[order], labels[order]


class FeatureEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer1 = nn.Sequential(nn.Linear(in_dim, feature_dim), nn.ReLU())
        self.layer2 = nn.Sequential(nn.Linear(feature_dim, feature_dim), nn.ReLU())

    def forward(self, x):
        return self.layer2(self.layer1(x))


class RelationNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(2 * feature_dim, relation_dim)
        self.fc2 = nn.Linear(relation_dim, 1)

    def forward(self, pairs):
        return torch.sigmoid(self.fc2(torch.relu(self.fc1(pairs))))


feature_encoder = FeatureEncoder()
relation_network = RelationNetwork()
feature_encoder_optim = torch.optim.Adam(feature_encoder.parameters(), lr=args.lr)
relation_network_optim = torch.optim.Adam(relation_network.parameters(), lr=args.lr)
mse = nn.MSELoss()


def relations_of(support, queries):
    sample_features = feature_encoder(support.view(-1, in_dim))
    sample_features = sample_features.view(args.way, args.shot, feature_dim).sum(dim=1)
    batch_features = feature_encoder(queries)
    n_queries = len(queries)
    sample_features_ext = sample_features.unsqueeze(0).repeat(n_queries, 1, 1)
    batch_features_ext = batch_features.unsqueeze(0).repeat(args.way, 1, 1).transpose(0, 1)
    relation_pairs = torch.cat((sample_features_ext, batch_features_ext), 2)
    return relation_network(relation_pairs.view(-1, 2 * feature_dim)).view(-1, args.way)


def test():
    feature_encoder.requires_grad_(False)
    relation_network.requires_grad_(False)
    correct = 0
    for _ in range(args.test_episodes):
        support, queries, labels = episode(test_classes)
        correct += (relations_of(support, queries).argmax(1) == labels).sum().item()
    feature_encoder.requires_grad_(True)
    return correct / (args.test_episodes * args.way * args.query)


for ep in range(args.episodes):
    support, queries, labels = episode(train_classes)
    relations = relations_of(support, queries)
    one_hot_labels = torch.zeros(len(labels), args.way).scatter_(1, labels.view(-1, 1), 1)
    loss = mse(relations, one_hot_labels)

    feature_encoder.zero_grad()
    relation_network.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(feature_encoder.parameters(), 0.5)
    nn.utils.clip_grad_norm_(relation_network.parameters(), 0.5)
    feature_encoder_optim.step()
    relation_network_optim.step()
    print(f"episode {ep} loss {loss.item():.4f}")
    if (ep + 1) % args.test_every == 0:
        print(f"test accuracy {test():.3f}")

if args.out:
    torch.save({**{f"feature_encoder.{k}": v for k, v in feature_encoder.state_dict().items()},
                **{f"relation_network.{k}": v for k, v in relation_network.state_dict().items()}},
               args.out)
