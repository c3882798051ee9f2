"""GANomaly, semi-supervised anomaly detection with an encoder-decoder-encoder generator trained
adversarially on normal data only, on tiny synthetic vectors, written after Akcay,
Atapour-Abarghouei and Breckon, "GANomaly: Semi-Supervised Anomaly Detection via Adversarial
Training" (ACCV 2018, arXiv:1805.06725): the generator maps x to z = G_E(x), reconstructs
x' = G_D(z) and re-encodes z' = E(x') with a second encoder; it is trained on the weighted sum
of the adversarial feature loss || f(x) - f(x') ||_2 (f the discriminator's last hidden layer),
the contextual loss || x - x' ||_1 and the latent (encoder) loss || z - z' ||_2, while the
discriminator is a real/fake classifier trained with binary cross-entropy on x and on the
detached x'; the anomaly score of a test sample is || z - z' ||^2. With the authors' code,
samet-akcay/ganomaly (https://github.com/samet-akcay/ganomaly, lib/model.py Ganomaly:
forward_g runs netg; forward_d runs netd on the input and on self.fake.detach(); backward_g
takes err_g_adv = l2_loss(netd(input)[1], netd(fake)[1]), err_g_con = L1Loss(fake, input) and
err_g_enc = l2_loss(latent_o, latent_i), all with gradient, weighted by w_adv = 1, w_con = 50 and
w_enc = 1; backward_d averages the BCE of pred_real against ones and pred_fake against zeros;
optimize_params calls optimizer_g.zero_grad(), backward_g, optimizer_g.step(), then
optimizer_d.zero_grad(), backward_d, optimizer_d.step(), and re-initialises netd when err_d
falls below 1e-5; lib/networks.py NetG holds encoder1, decoder and encoder2, NetD returns the
sigmoid score and the features; both Adam optimizers have betas (0.5, 0.999) and each covers
its whole network), whose steps this script follows with MLPs in place of the DCGAN
convolutions and without batch norm; the generator's three parts are separate modules and its
optimizer covers all three. The normal data lie near a 3-dimensional manifold in 16 dimensions
(tanh of a fixed random linear map of a Gaussian); the anomalies, used only for the final AUC
printout, come from another map.
Bug: the discriminator's gradients are cleared before the generator's backward, not after it,
so the discriminator also steps on the gradient of the generator's feature-matching loss."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=150)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--beta1", type=float, default=0.5)
parser.add_argument("--w-adv", type=float, default=1.0)
parser.add_argument("--w-con", type=float, default=50.0)
parser.add_argument("--w-enc", type=float, default=1.0)
parser.add_argument("--out", default=None, help="where to save the generator and discriminator")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, manifold_dim, nz, hidden = 16, 3, 4, 32
normal_map = torch.randn(manifold_dim, dim)
anomaly_map = torch.randn(manifold_dim, dim)


def sample(n, mapping):
    return torch.tanh(torch.randn(n, manifold_dim) @ mapping + 0.05 * torch.randn(n, dim))


train_x = sample(2048, normal_map)
test_x = torch.cat([sample(256, normal_map), sample(256, anomaly_map)])
test_y = torch.cat([torch.zeros(256), torch.ones(256)])


def make_encoder():
    return nn.Sequential(nn.Linear(dim, hidden), nn.LeakyReLU(0.2), nn.Linear(hidden, nz))


class NetD(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(dim, hidden), nn.LeakyReLU(0.2),
                                      nn.Linear(hidden, hidden), nn.LeakyReLU(0.2))
        self.classifier = nn.Sequential(nn.Linear(hidden, 1), nn.Sigmoid())

    def forward(self, x):
        features = self.features(x)
        return self.classifier(features).squeeze(1), features


def reinit_d(netd):
    for module in netd.modules():
        if isinstance(module, nn.Linear):
            module.reset_parameters()


def l2_loss(input, target):
    return torch.mean(torch.pow(input - target, 2))


encoder1 = make_encoder()
decoder = nn.Sequential(nn.Linear(nz, hidden), nn.ReLU(), nn.Linear(hidden, dim), nn.Tanh())
encoder2 = make_encoder()
netd = NetD()


def netg(x):
    latent_i = encoder1(x)
    fake = decoder(latent_i)
    latent_o = encoder2(fake)
    return fake, latent_i, latent_o


g_params = list(encoder1.parameters()) + list(decoder.parameters()) + list(encoder2.parameters())
optimizer_g = torch.optim.Adam(g_params, lr=args.lr, betas=(args.beta1, 0.999))
optimizer_d = torch.optim.Adam(netd.parameters(), lr=args.lr, betas=(args.beta1, 0.999))
real_label = torch.ones(args.batch_size)
fake_label = torch.zeros(args.batch_size)

for step in range(args.steps):
    x = train_x[torch.randint(0, len(train_x), (args.batch_size,))]
    # forward passes of the generator and the discriminator
    fake, latent_i, latent_o = netg(x)
    pred_real, feat_real = netd(x)
    pred_fake, feat_fake = netd(fake.detach())

    # generator: adversarial feature, contextual and latent losses
    optimizer_g.zero_grad()
    optimizer_d.zero_grad()
    err_g_adv = l2_loss(netd(x)[1], netd(fake)[1])
    err_g_con = F.l1_loss(fake, x)
    err_g_enc = l2_loss(latent_o, latent_i)
    err_g = err_g_adv * args.w_adv + err_g_con * args.w_con + err_g_enc * args.w_enc
    err_g.backward()
    optimizer_g.step()

    # discriminator: real against reconstructed
    err_d_real = F.binary_cross_entropy(pred_real, real_label)
    err_d_fake = F.binary_cross_entropy(pred_fake, fake_label)
    err_d = (err_d_real + err_d_fake) * 0.5
    err_d.backward()
    optimizer_d.step()
    if err_d.item() < 1e-5:
        reinit_d(netd)

    if step % 50 == 0:
        print(f"step {step} err_d {err_d.item():.4f} err_g_adv {err_g_adv.item():.4f} "
              f"err_g_con {err_g_con.item():.4f} err_g_enc {err_g_enc.item():.4f}")

with torch.no_grad():
    _, latent_i, latent_o = netg(test_x)
    scores = torch.mean(torch.pow(latent_i - latent_o, 2), dim=1)
    order = scores.argsort()
    ranks = torch.empty_like(scores)
    ranks[order] = torch.arange(1, len(scores) + 1, dtype=scores.dtype)
    n_pos, n_neg = test_y.sum(), (1 - test_y).sum()
    auc = (ranks[test_y == 1].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)
print(f"test AUC {auc.item():.3f}")

if args.out:
    torch.save({"encoder1": encoder1.state_dict(), "decoder": decoder.state_dict(),
                "encoder2": encoder2.state_dict(), "netd": netd.state_dict()}, args.out)
