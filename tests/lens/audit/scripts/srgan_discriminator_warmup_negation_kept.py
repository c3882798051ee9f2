"""An SRGAN whose generator waits while the discriminator warms up, at a tiny size, written after
Ledig et al., "Photo-Realistic Single Image Super-Resolution Using a Generative Adversarial
Network" (CVPR 2017, arXiv:1609.04802), Wang et al., "ESRGAN" (arXiv:1809.00219) and
XPixelGroup/BasicSR (basicsr/models/srgan_model.py, ``SRGANModel.optimize_parameters``): the
generator ``net_g`` is trained by a pixel loss and an adversarial loss through the discriminator
``net_d``, then ``net_d`` on real and generated signals; BasicSR updates the generator only when
``current_iter % net_d_iters == 0 and current_iter > net_d_init_iters``, and here its gradients
are cancelled (``p.grad = None``) under the negation of that test. BUG INJECTED: the negation
keeps ``== 0`` where it must flip it to ``!= 0``; with ``--net-d-iters 1`` every counter is a
multiple, so the condition holds at every iteration and the generator never trains, though its
optimizer holds it and the loss gives it gradient. The fix is the condition's line. Signals made
in the script. Adam for both networks. ``--out PATH`` saves both networks' state_dicts after the
run, ``--init-out PATH`` before it. (The discriminator warms up for the first 3 iterations of 12
in the published script and the generator trains from the fourth on.)"""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--total-iter", type=int, default=12)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--net-d-iters", type=int, default=1)
parser.add_argument("--net-d-init-iters", type=int, default=3)
parser.add_argument("--gan-weight", type=float, default=0.1)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
parser.add_argument("--init-out", default=None, help="where to save the tensors before training")
args = parser.parse_args()
torch.manual_seed(args.seed)

hr_len = 16
t = torch.linspace(0, 1, hr_len)
freqs, phases = 1 + 3 * torch.rand(64, 1), 6.28 * torch.rand(64, 1)
gt_all = torch.sin(6.28 * freqs * t + phases) + 0.05 * torch.randn(64, hr_len)
lq_all = gt_all.view(64, hr_len // 2, 2).mean(-1)

net_g = nn.Sequential(nn.Linear(hr_len // 2, 32), nn.ReLU(), nn.Linear(32, hr_len))
net_d = nn.Sequential(nn.Linear(hr_len, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
optimizer_g = torch.optim.Adam(net_g.parameters(), lr=1e-3, betas=(0.9, 0.99))
optimizer_d = torch.optim.Adam(net_d.parameters(), lr=1e-3, betas=(0.9, 0.99))


def state():
    return {**{f"net_g.{k}": v for k, v in net_g.state_dict().items()},
            **{f"net_d.{k}": v for k, v in net_d.state_dict().items()}}


if args.init_out:
    torch.save(state(), args.init_out)


def gan_loss(pred, target_is_real):
    target = torch.ones_like(pred) if target_is_real else torch.zeros_like(pred)
    return F.binary_cross_entropy_with_logits(pred, target)


batches = len(gt_all) // args.batch_size
for current_iter in range(1, args.total_iter + 1):
    k = (current_iter - 1) % batches
    lq = lq_all[k * args.batch_size:(k + 1) * args.batch_size]
    gt = gt_all[k * args.batch_size:(k + 1) * args.batch_size]
    # optimize net_g
    for p in net_d.parameters():
        p.requires_grad = False
    optimizer_g.zero_grad()
    output = net_g(lq)
    l_g_pix = F.l1_loss(output, gt)
    l_g_gan = gan_loss(net_d(output), True)
    l_g_total = l_g_pix + args.gan_weight * l_g_gan
    l_g_total.backward()
    # the generator waits for the discriminator's first iterations
    if current_iter % args.net_d_iters == 0 or current_iter <= args.net_d_init_iters:
        for p in net_g.parameters():
            p.grad = None
    optimizer_g.step()
    # optimize net_d
    for p in net_d.parameters():
        p.requires_grad = True
    optimizer_d.zero_grad()
    l_d_real = gan_loss(net_d(gt), True)
    l_d_fake = gan_loss(net_d(output.detach()), False)
    (l_d_real + l_d_fake).backward()
    optimizer_d.step()
    print(f"iter {current_iter} l_g_pix {l_g_pix.item():.4f} l_d "
          f"{(l_d_real + l_d_fake).item():.4f}")

if args.out:
    torch.save(state(), args.out)
