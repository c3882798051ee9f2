"""BiGAN / ALI at a tiny size, written after Donahue, Kraehenbuehl and Darrell, "Adversarial
Feature Learning" (ICLR 2017, arXiv:1605.09782), section 3 (an encoder E trained jointly with
the generator G against a discriminator D(x, z) that tells data pairs (x, E(x)) from generated
pairs (G(z), z), the minimax objective V(D, E, G) of eq. 3, with E and G updated together on the
inverted labels) and section 4.3 (the encoder fine-tuned with a classifier on labels, the "all"
setting of Table 3), and Dumoulin, Belghazi, Poole, Mastropietro, Lamb, Arjovsky and Courville,
"Adversarially Learned Inference" (ICLR 2017, arXiv:1606.00704), with IshmaelBelghazi/ALI
(https://github.com/IshmaelBelghazi/ALI, ali/bricks.py ALI: sample_z_hat, the reparameterised
encoder mu + sigma * epsilon; get_predictions on the concatenated pairs; compute_losses, the
discriminator's softplus(-data_preds) + softplus(sample_preds) and the generator's
softplus(data_preds) + softplus(-sample_preds); generator_parameters, the encoder's and the
decoder's bricks together; ali/algorithms.py ali_algorithm, the discriminator's gradient over
discriminator_parameters and the generator's over generator_parameters) and jeffdonahue/bigan
(https://github.com/jeffdonahue/bigan, train_gan.py with --encode and --joint_discrim_weight).
The PyTorch updates are the usual alternating ones: the discriminator on the detached encodings
and samples, then one Adam over the encoder and the generator through the stepped discriminator.
Two phases: the adversarial training on unlabelled 8-dimensional data from three clusters, made
in the script, then the fine-tuning of the encoder's mean with a linear classifier on a few
labelled points.
Bug: the encoder and generator's loss scores the data pair on the detached encoding, D(x,
z_hat.detach()), the discriminator's line copied with only the sample pair's detach taken out
(ALI's compute_losses and BiGAN's objective backpropagate the generator's loss through both
pairs, the data pair's term softplus(data_preds) being the encoder's only training signal), so
the encoder gets no gradient in the adversarial phase and keeps its initial weights until the
fine-tuning, while the generator still learns through the sample pair."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iters", type=int, default=20, help="adversarial iterations")
parser.add_argument("--finetune-steps", type=int, default=10)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--lr", type=float, default=2e-3)
parser.add_argument("--finetune-lr", type=float, default=1e-2)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

x_dim, z_dim, hidden_dim, n_classes = 8, 2, 32, 3
centers = 2 * torch.randn(n_classes, x_dim)


def sample_data(n):
    y = torch.randint(0, n_classes, (n,))
    return centers[y] + 0.5 * torch.randn(n, x_dim), y


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(x_dim, hidden_dim), nn.LeakyReLU(0.2))
        self.mu = nn.Linear(hidden_dim, z_dim)
        self.log_sigma = nn.Linear(hidden_dim, z_dim)

    def forward(self, x):
        h = self.body(x)
        return self.mu(h), self.log_sigma(h)

    def sample_z_hat(self, x):
        mu, log_sigma = self(x)
        return mu + log_sigma.exp() * torch.randn_like(mu)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(x_dim + z_dim, hidden_dim), nn.LeakyReLU(0.2),
                                 nn.Linear(hidden_dim, hidden_dim), nn.LeakyReLU(0.2),
                                 nn.Linear(hidden_dim, 1))

    def forward(self, x, z):
        return self.net(torch.cat([x, z], dim=1))


E = Encoder()
G = nn.Sequential(nn.Linear(z_dim, hidden_dim), nn.LeakyReLU(0.2), nn.Linear(hidden_dim, x_dim))
D = Discriminator()
d_optimizer = torch.optim.Adam(D.parameters(), lr=args.lr, betas=(0.5, 0.999))
g_optimizer = torch.optim.Adam([*E.parameters(), *G.parameters()], lr=args.lr,
                               betas=(0.5, 0.999))

# phase 1: adversarial training of the encoder and the generator against D(x, z)
for it in range(args.iters):
    x, _ = sample_data(args.batch_size)
    z = torch.randn(args.batch_size, z_dim)
    z_hat = E.sample_z_hat(x)
    x_tilde = G(z)

    data_preds = D(x, z_hat.detach())
    sample_preds = D(x_tilde.detach(), z)
    d_loss = (F.softplus(-data_preds) + F.softplus(sample_preds)).mean()
    d_optimizer.zero_grad()
    d_loss.backward()
    d_optimizer.step()

    data_preds = D(x, z_hat.detach())
    sample_preds = D(x_tilde, z)
    g_loss = (F.softplus(data_preds) + F.softplus(-sample_preds)).mean()
    g_optimizer.zero_grad()
    g_loss.backward()
    g_optimizer.step()
    print(f"it {it} D {d_loss.item():.4f} EG {g_loss.item():.4f}")

# phase 2: the encoder's mean fine-tuned with a linear classifier on a few labelled points
x_lab, y_lab = sample_data(48)
classifier = nn.Linear(z_dim, n_classes)
finetune_optimizer = torch.optim.Adam([*E.parameters(), *classifier.parameters()],
                                      lr=args.finetune_lr)
for step in range(args.finetune_steps):
    mu, _ = E(x_lab)
    loss = F.cross_entropy(classifier(mu), y_lab)
    finetune_optimizer.zero_grad()
    loss.backward()
    finetune_optimizer.step()
    print(f"finetune {step} loss {loss.item():.4f}")

if args.out:
    weights = {f"E.{k}": v.detach().clone() for k, v in E.state_dict().items()}
    weights.update({f"G.{k}": v.detach().clone() for k, v in G.state_dict().items()})
    weights.update({f"D.{k}": v.detach().clone() for k, v in D.state_dict().items()})
    weights.update({f"classifier.{k}": v.detach().clone()
                    for k, v in classifier.state_dict().items()})
    torch.save(weights, args.out)
