"""OBoW, online bag-of-visual-words self-supervised learning, of a small patch encoder on
synthetic part-based "images", written after Gidaris, Bursuc, Puy, Komodakis, Cord and Perez,
"OBoW: Online Bag-of-Visual-Words Generation for Self-Supervised Learning" (CVPR 2021,
arXiv:2012.11552): a teacher network, an exponential moving average of the student, maps the
full image to local features, softly assigns them to a vocabulary of visual words and max-pools
the codes into a bag-of-words (BoW) target; the vocabulary is a queue refreshed online with one
teacher feature per image; the student sees perturbed crops and predicts the BoW through a
dynamic head that generates one weight vector per visual word from the vocabulary itself, and is
trained with the cross-entropy (KL divergence) to the soft BoW target. With the authors' code,
valeoai/obow (https://github.com/valeoai/obow, obow/builder_obow.py: OBoW.forward takes the
dictionary from BoWExtractor.get_dictionary, a detached clone of the queue, runs the student on
the crops and BoWPredictor.forward on its pooled features, where layers_w (L2 normalisation,
linear, batch norm, ReLU, linear, L2 normalisation) generates the word weights and the logits
are kappa * features @ weights, with kappa a parameter created with requires_grad=learn_kappa,
False in all OBoW runs; then under torch.no_grad() _update_teacher (alpha from a cosine schedule
from 0.99 to 1) and generate_bow_targets, whose BoWExtractor.forward computes the distances to
the words, the soft codes softmax(-inv_delta / min_distance_mean * dist), the L1-normalised
max-pooled BoW, and updates min_distance_mean and the queue (_update_dictionary); _bow_loss is
F.kl_div of the log-softmax logits to the expanded targets; OBoWSolver.train_step zeroes,
backpropagates and steps SGD), whose steps this script follows, with inv_delta 10, kappa 5 and
SGD(lr 0.05, momentum 0.9, weight decay 5e-4) from its ResNet18_OBoW_full config. An image is
nine patch vectors drawn from class-specific mixtures of twelve parts; the encoder is a per-patch
MLP (its patch features stand for a convnet's feature map, their mean for global pooling); the
student sees two crops of five noisy patches; the queue takes one random patch feature per image.
Bug: generate_weights is decorated with @torch.no_grad(), so the weight generator never trains."""

import argparse
import copy
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=60)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--num-words", type=int, default=64)
parser.add_argument("--inv-delta", type=float, default=10.0)
parser.add_argument("--kappa", type=float, default=5.0)
parser.add_argument("--alpha", type=float, default=0.99, help="base teacher momentum")
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--out", default=None, help="where to save student, teacher, head and words")
args = parser.parse_args()
torch.manual_seed(args.seed)

patch_dim, n_parts, n_classes, n_patches, crop_patches, n_crops = 8, 12, 6, 9, 5, 2
channels, hidden = 32, 64
parts = torch.randn(n_parts, patch_dim)
class_mix = torch.softmax(2.0 * torch.randn(n_classes, n_parts), dim=1)


def sample_images(n):
    """n images of nine noisy patches, the parts drawn from the image's class mixture."""
    classes = torch.randint(0, n_classes, (n,))
    part_ids = torch.multinomial(class_mix[classes], n_patches, replacement=True)
    return parts[part_ids] + 0.2 * torch.randn(n, n_patches, patch_dim)


def make_crops(images):
    """Two crops per image of five random patches with extra noise, image-major (B * 2)."""
    order = torch.rand(images.shape[0], n_crops, n_patches).argsort(dim=2)[..., :crop_patches]
    crops = torch.gather(images.unsqueeze(1).expand(-1, n_crops, -1, -1), 2,
                         order.unsqueeze(3).expand(-1, -1, -1, patch_dim))
    crops = crops + 0.3 * torch.randn_like(crops)
    return crops.reshape(-1, crop_patches, patch_dim)


class BoWExtractor(nn.Module):
    """Teacher side: soft BoW over an online queue-based vocabulary of visual words."""

    def __init__(self, num_words, num_channels, inv_delta):
        super().__init__()
        self.inv_delta, self.decay = inv_delta, 0.99
        self.register_buffer("embedding", torch.randn(num_words, num_channels).clamp(min=0))
        self.register_buffer("embedding_ptr", torch.zeros(1, dtype=torch.long))
        self.register_buffer("min_distance_mean", torch.ones(1) * 0.5)

    @torch.no_grad()
    def update_dictionary(self, features):
        """One random local feature per image replaces the oldest words."""
        batch_size, num_locs, _ = features.shape
        index = torch.randint(0, num_locs, (batch_size,))
        selected = features[torch.arange(batch_size), index]
        ptr = int(self.embedding_ptr)
        self.embedding[ptr:ptr + batch_size] = selected
        self.embedding_ptr[0] = (ptr + batch_size) % self.embedding.shape[0]

    @torch.no_grad()
    def get_dictionary(self):
        return self.embedding.detach().clone()

    def forward(self, features):
        """features: B x locations x channels teacher features; returns the B x words BoW."""
        dist = (features.pow(2).sum(2, keepdim=True) + self.embedding.pow(2).sum(1)
                - 2 * features @ self.embedding.t())
        min_dist = dist.min(dim=2)[0]
        self.min_distance_mean.mul_(self.decay).add_(min_dist.mean(), alpha=1 - self.decay)
        self.update_dictionary(features)
        codes = F.softmax(-(self.inv_delta / self.min_distance_mean) * dist, dim=2)
        bow = codes.max(dim=1)[0]
        return F.normalize(bow, p=1, dim=1)


class BoWPredictor(nn.Module):
    """Student side: generates one weight vector per visual word from the vocabulary."""

    def __init__(self, num_channels, num_hidden, kappa):
        super().__init__()
        self.fc_in = nn.Linear(num_channels, num_hidden, bias=False)
        self.bn = nn.BatchNorm1d(num_hidden)
        self.fc_out = nn.Linear(num_hidden, num_channels)
        self.scale = nn.Parameter(torch.full((1,), kappa), requires_grad=False)

    @torch.no_grad()
    def generate_weights(self, dictionary):
        h = F.relu(self.bn(self.fc_in(F.normalize(dictionary, dim=1))))
        return F.normalize(self.fc_out(h), dim=1)

    def forward(self, features, dictionary):
        weight = self.generate_weights(dictionary)
        return (features * self.scale) @ weight.t()


student = nn.Sequential(nn.Linear(patch_dim, hidden), nn.ReLU(), nn.Linear(hidden, channels),
                        nn.ReLU())
teacher = copy.deepcopy(student)
for param_teacher in teacher.parameters():
    param_teacher.requires_grad = False
bow_extractor = BoWExtractor(args.num_words, channels, args.inv_delta)
bow_predictor = BoWPredictor(channels, 2 * channels, args.kappa)


def momentum_alpha(iteration):
    """Cosine schedule of the teacher momentum from alpha to 1 over the run."""
    scale = 0.5 * (1.0 + math.cos(math.pi * iteration / args.steps))
    return 1.0 - (1.0 - args.alpha) * scale


optimizer = torch.optim.SGD(list(student.parameters()) + list(bow_predictor.parameters()),
                            lr=args.lr, momentum=0.9, weight_decay=5e-4)
for step in range(args.steps):
    images = sample_images(args.batch_size)
    crops = make_crops(images)

    # student: BoW predictions from the crops, with the vocabulary before this step's update
    dictionary = bow_extractor.get_dictionary()
    features = student(crops).mean(dim=1)
    bow_prediction = bow_predictor(features, dictionary)

    # teacher: momentum update, then BoW targets from the full images (updates the vocabulary)
    with torch.no_grad():
        alpha = momentum_alpha(step)
        for param, param_teacher in zip(student.parameters(), teacher.parameters()):
            param_teacher.data.mul_(alpha).add_(param.detach().data, alpha=1.0 - alpha)
        bow_target = bow_extractor(teacher(images))
        perplexity = torch.exp(-(bow_target * torch.log(bow_target + 1e-5)).sum(1)).mean()

    target = bow_target.unsqueeze(1).repeat(1, n_crops, 1).view(-1, args.num_words)
    loss = F.kl_div(F.log_softmax(bow_prediction, dim=1), target, reduction="batchmean")

    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 20 == 0:
        print(f"step {step} loss {loss.item():.4f} perplexity {perplexity.item():.2f}")

if args.out:
    torch.save({"student": student.state_dict(), "teacher": teacher.state_dict(),
                "bow_predictor": bow_predictor.state_dict(),
                "bow_extractor": bow_extractor.state_dict()}, args.out)
