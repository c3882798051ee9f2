"""pix2pix: a conditional GAN translating label outlines into shaded images.

Paper: Phillip Isola, Jun-Yan Zhu, Tinghui Zhou and Alexei A. Efros, "Image-to-Image Translation
with Conditional Adversarial Networks", CVPR 2017, arXiv:1611.07004 (2017).
Reference implementation: junyanz/pytorch-CycleGAN-and-pix2pix, models/pix2pix_model.py
(Pix2PixModel: forward, backward_D with the fake pair detached, backward_G with the GAN term
plus lambda_L1 * L1, optimize_parameters: set_requires_grad(netD, True), D zero_grad, backward,
step, then set_requires_grad(netD, False), G zero_grad, backward, step), models/networks.py
(UnetGenerator / UnetSkipConnectionBlock, NLayerDiscriminator, GANLoss('vanilla') as
BCEWithLogitsLoss, init_weights 'normal' with gain 0.02, get_scheduler 'linear'),
models/base_model.py (set_requires_grad) and train.py (n_epochs at the initial learning rate, then
n_epochs_decay epochs with the rate decayed linearly towards zero).

The data are made here: A is a one-channel map of one or two rectangle outlines, B the matching
three-channel picture (each rectangle filled with its own colour and a vertical shading on a dark
background), 64x64 and scaled to [-1, 1]. The generator is the U-Net of the reference with six
downsamplings (64 -> 1), ngf = 4, batch norm without conv biases, a dropout-0.5 ngf*8 block and
skip connections by concatenation; the discriminator is the 2-layer PatchGAN on the concatenated
(A, B) pair (a 14x14 map of patch logits). Both networks use Adam(lr 2e-4, betas (0.5, 0.999)).
Each iteration computes fake_B = G(A) once; the D update switches D's gradients on, zeroes D's
gradients and minimises the mean of the BCE of D(A, fake_B.detach()) against 0 and of D(A, B)
against 1; the G update switches D's gradients off, zeroes G's gradients and minimises the BCE of
D(A, fake_B) against 1 plus 100 * |fake_B - B|_1. Training runs in two phases with their own
loops, as the reference's schedule: n_epochs at the initial rate, then n_epochs_decay epochs with
the rate of both optimizers decayed linearly. The eval L1 is computed under torch.no_grad().
Bug: the D update never calls optimizer_D.zero_grad(), so from the second iteration on D's
gradients are the sum of every earlier D loss's gradients and Adam steps on that running sum.
"""
import argparse

import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--n_pairs", type=int, default=24)
parser.add_argument("--batch_size", type=int, default=4)
parser.add_argument("--n_epochs", type=int, default=4)
parser.add_argument("--n_epochs_decay", type=int, default=4)
parser.add_argument("--size", type=int, default=64)
parser.add_argument("--ngf", type=int, default=4)
parser.add_argument("--ndf", type=int, default=8)
parser.add_argument("--n_layers_D", type=int, default=2)
parser.add_argument("--lr", type=float, default=2e-4)
parser.add_argument("--beta1", type=float, default=0.5)
parser.add_argument("--lambda_L1", type=float, default=100.0)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)


def make_pairs(n, size):
    palette = torch.tensor([[0.9, 0.2, 0.2], [0.2, 0.8, 0.3], [0.2, 0.4, 0.9]])
    ys = torch.arange(size).view(1, size, 1).float()
    xs = torch.arange(size).view(1, 1, size).float()
    edges = torch.zeros(n, size, size)
    photo = torch.zeros(n, 3, size, size)
    for k in range(2):
        h = torch.randint(size // 6, size // 2, (n, 1, 1)).float()
        w = torch.randint(size // 6, size // 2, (n, 1, 1)).float()
        top = (torch.rand(n, 1, 1) * (size - h)).floor()
        left = (torch.rand(n, 1, 1) * (size - w)).floor()
        present = (torch.rand(n, 1, 1) < (1.0 if k == 0 else 0.6)).float()
        inside = (ys >= top) & (ys < top + h) & (xs >= left) & (xs < left + w)
        inner = (ys > top) & (ys < top + h - 1) & (xs > left) & (xs < left + w - 1)
        border = (inside & ~inner).float() * present
        fill = inside.float() * present
        edges = torch.maximum(edges, border)
        colour = palette[torch.randint(0, 3, (n,))].view(n, 3, 1, 1)
        shade = 0.5 + 0.5 * (ys - top) / h
        photo = photo * (1 - fill.unsqueeze(1)) + fill.unsqueeze(1) * colour * shade.unsqueeze(1)
    return edges.unsqueeze(1) * 2 - 1, photo * 2 - 1


class UnetSkipConnectionBlock(nn.Module):
    def __init__(self, outer_nc, inner_nc, input_nc=None, submodule=None, outermost=False,
                 innermost=False, use_dropout=False):
        super().__init__()
        self.outermost = outermost
        if input_nc is None:
            input_nc = outer_nc
        downconv = nn.Conv2d(input_nc, inner_nc, 4, stride=2, padding=1, bias=False)
        downrelu = nn.LeakyReLU(0.2, True)
        downnorm = nn.BatchNorm2d(inner_nc)
        uprelu = nn.ReLU(True)
        upnorm = nn.BatchNorm2d(outer_nc)
        if outermost:
            upconv = nn.ConvTranspose2d(inner_nc * 2, outer_nc, 4, stride=2, padding=1)
            layers = [downconv, submodule, uprelu, upconv, nn.Tanh()]
        elif innermost:
            upconv = nn.ConvTranspose2d(inner_nc, outer_nc, 4, stride=2, padding=1, bias=False)
            layers = [downrelu, downconv, uprelu, upconv, upnorm]
        else:
            upconv = nn.ConvTranspose2d(inner_nc * 2, outer_nc, 4, stride=2, padding=1,
                                        bias=False)
            layers = [downrelu, downconv, downnorm, submodule, uprelu, upconv, upnorm]
            if use_dropout:
                layers.append(nn.Dropout(0.5))
        self.model = nn.Sequential(*layers)

    def forward(self, x):
        if self.outermost:
            return self.model(x)
        return torch.cat([x, self.model(x)], 1)


class UnetGenerator(nn.Module):
    def __init__(self, input_nc, output_nc, num_downs, ngf):
        super().__init__()
        block = UnetSkipConnectionBlock(ngf * 8, ngf * 8, innermost=True)
        for _ in range(num_downs - 5):
            block = UnetSkipConnectionBlock(ngf * 8, ngf * 8, submodule=block, use_dropout=True)
        block = UnetSkipConnectionBlock(ngf * 4, ngf * 8, submodule=block)
        block = UnetSkipConnectionBlock(ngf * 2, ngf * 4, submodule=block)
        block = UnetSkipConnectionBlock(ngf, ngf * 2, submodule=block)
        self.model = UnetSkipConnectionBlock(output_nc, ngf, input_nc=input_nc, submodule=block,
                                             outermost=True)

    def forward(self, x):
        return self.model(x)


class NLayerDiscriminator(nn.Module):
    def __init__(self, input_nc, ndf, n_layers):
        super().__init__()
        seq = [nn.Conv2d(input_nc, ndf, 4, stride=2, padding=1), nn.LeakyReLU(0.2, True)]
        mult = 1
        for n in range(1, n_layers):
            prev, mult = mult, min(2 ** n, 8)
            seq += [nn.Conv2d(ndf * prev, ndf * mult, 4, stride=2, padding=1, bias=False),
                    nn.BatchNorm2d(ndf * mult), nn.LeakyReLU(0.2, True)]
        prev, mult = mult, min(2 ** n_layers, 8)
        seq += [nn.Conv2d(ndf * prev, ndf * mult, 4, stride=1, padding=1, bias=False),
                nn.BatchNorm2d(ndf * mult), nn.LeakyReLU(0.2, True)]
        seq += [nn.Conv2d(ndf * mult, 1, 4, stride=1, padding=1)]
        self.model = nn.Sequential(*seq)

    def forward(self, x):
        return self.model(x)


def init_weights(net, gain=0.02):
    for m in net.modules():
        if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
            nn.init.normal_(m.weight, 0.0, gain)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.normal_(m.weight, 1.0, gain)
            nn.init.zeros_(m.bias)


def set_requires_grad(net, requires_grad):
    for p in net.parameters():
        p.requires_grad = requires_grad


def gan_loss(prediction, target_is_real):
    target = torch.ones_like(prediction) if target_is_real else torch.zeros_like(prediction)
    return bce(prediction, target)


num_downs = {32: 5, 64: 6, 128: 7, 256: 8}[args.size]
netG = UnetGenerator(1, 3, num_downs, args.ngf)
netD = NLayerDiscriminator(1 + 3, args.ndf, args.n_layers_D)
init_weights(netG)
init_weights(netD)
bce = nn.BCEWithLogitsLoss()
l1 = nn.L1Loss()
optimizer_G = torch.optim.Adam(netG.parameters(), lr=args.lr, betas=(args.beta1, 0.999))
optimizer_D = torch.optim.Adam(netD.parameters(), lr=args.lr, betas=(args.beta1, 0.999))

train_A, train_B = make_pairs(args.n_pairs, args.size)
test_A, test_B = make_pairs(8, args.size)


def optimize_parameters(real_A, real_B):
    fake_B = netG(real_A)
    # update D
    set_requires_grad(netD, True)
    fake_AB = torch.cat((real_A, fake_B), 1)
    pred_fake = netD(fake_AB.detach())
    loss_D_fake = gan_loss(pred_fake, False)
    real_AB = torch.cat((real_A, real_B), 1)
    pred_real = netD(real_AB)
    loss_D_real = gan_loss(pred_real, True)
    loss_D = (loss_D_fake + loss_D_real) * 0.5
    loss_D.backward()
    optimizer_D.step()
    # update G
    set_requires_grad(netD, False)
    optimizer_G.zero_grad()
    fake_AB = torch.cat((real_A, fake_B), 1)
    pred_fake = netD(fake_AB)
    loss_G_GAN = gan_loss(pred_fake, True)
    loss_G_L1 = l1(fake_B, real_B) * args.lambda_L1
    loss_G = loss_G_GAN + loss_G_L1
    loss_G.backward()
    optimizer_G.step()
    return loss_D.item(), loss_G_GAN.item(), loss_G_L1.item()


def run_epoch(epoch):
    order = torch.randperm(args.n_pairs)
    for i in range(0, args.n_pairs, args.batch_size):
        idx = order[i:i + args.batch_size]
        losses = optimize_parameters(train_A[idx], train_B[idx])
    print(f"epoch {epoch:2d} lr {optimizer_G.param_groups[0]['lr']:.2e} "
          f"D {losses[0]:.4f} G_GAN {losses[1]:.4f} G_L1 {losses[2]:.4f}")


netG.train()
netD.train()
# phase 1: n_epochs at the initial learning rate
for epoch in range(1, args.n_epochs + 1):
    run_epoch(epoch)

# phase 2: n_epochs_decay epochs with the learning rate decayed linearly towards zero
for k, epoch in enumerate(range(args.n_epochs + 1, args.n_epochs + args.n_epochs_decay + 1)):
    lr = args.lr * (1.0 - (k + 1) / float(args.n_epochs_decay + 1))
    for optimizer in (optimizer_G, optimizer_D):
        for group in optimizer.param_groups:
            group["lr"] = lr
    run_epoch(epoch)

netG.eval()
with torch.no_grad():
    test_l1 = l1(netG(test_A), test_B)
print(f"test L1 {test_l1.item():.4f}")

if args.out:
    torch.save({"netG": netG.state_dict(), "netD": netD.state_dict()}, args.out)
