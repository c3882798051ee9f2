"""A tiny NeRF with coarse and fine networks trained together on a synthetic scene.

Paper: Ben Mildenhall, Pratul P. Srinivasan, Matthew Tancik, Jonathan T. Barron, Ravi Ramamoorthi
and Ren Ng, "NeRF: Representing Scenes as Neural Radiance Fields for View Synthesis",
arXiv:2003.08934, ECCV 2020.
Reference implementations: bmild/nerf, run_nerf.py (create_nerf, render_rays with
tf.stop_gradient on the importance samples, raw2outputs, train) and run_nerf_helpers.py
(get_embedder, init_nerf_model, get_rays, sample_pdf); yenchenlin/nerf-pytorch, run_nerf.py
(create_nerf: grad_vars = coarse parameters + fine parameters, one Adam(grad_vars, betas=(0.9,
0.999)); render_rays: stratified coarse samples when perturb > 0, sample_pdf over the coarse
weights[..., 1:-1] at the bin mid-points, z_samples.detach(), sorted union of both sample sets
queried by network_fine; raw2outputs: alpha = 1 - exp(-relu(sigma) * dists), weights = alpha *
exclusive cumprod(1 - alpha + 1e-10), white background; train: random rays of one image, central
crops for the first precrop_iters steps, loss = img2mse(rgb) + img2mse(rgb0), zero_grad, backward,
step, then lr = lrate * 0.1 ** (step / decay_steps)) and run_nerf_helpers.py (Embedder with
include_input and log-sampled sin/cos bands, NeRF: pts_linears with a skip connection,
alpha_linear, feature_linear, views_linears and rgb_linear when use_viewdirs, get_rays,
sample_pdf, img2mse).

The synthetic scene is an opaque sphere of radius 1 at the origin whose colour varies with the
surface point, on a white background; eight 16x16 views (focal 24) are rendered exactly by
ray-sphere intersection from cameras at radius 4 looking at the origin, near 2 and far 6. Both
networks have depth 4, width 32 and a skip at layer 2, with 6 position and 2 direction frequency
bands; each ray gets 16 stratified coarse samples and 16 importance samples from the coarse
weights. Every step draws 256 random rays from one image (central half crops for the first 10
steps) and trains the coarse and fine networks together with one Adam and exponential decay.
Bug: the Adam optimizer is built from grad_vars before the fine network's parameters are added
to it, so it only holds the coarse network and the fine network never trains.
"""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--steps", type=int, default=60)
parser.add_argument("--N_rand", type=int, default=256)
parser.add_argument("--netdepth", type=int, default=4)
parser.add_argument("--netwidth", type=int, default=32)
parser.add_argument("--multires", type=int, default=6)
parser.add_argument("--multires_views", type=int, default=2)
parser.add_argument("--N_samples", type=int, default=16)
parser.add_argument("--N_importance", type=int, default=16)
parser.add_argument("--perturb", type=float, default=1.0)
parser.add_argument("--lrate", type=float, default=5e-3)
parser.add_argument("--lrate_decay", type=int, default=250)
parser.add_argument("--precrop_iters", type=int, default=10)
parser.add_argument("--precrop_frac", type=float, default=0.5)
parser.add_argument("--n_views", type=int, default=8)
parser.add_argument("--res", type=int, default=16)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)

NEAR, FAR = 2.0, 6.0


def look_at(theta, phi, radius):
    pos = radius * torch.tensor([math.cos(phi) * math.sin(theta), math.sin(phi),
                                 math.cos(phi) * math.cos(theta)])
    z = pos / pos.norm()
    x = torch.linalg.cross(torch.tensor([0.0, 1.0, 0.0]), z)
    x = x / x.norm()
    y = torch.linalg.cross(z, x)
    return torch.stack([x, y, z, pos], 1)  # [3, 4] camera-to-world


def get_rays(H, W, focal, c2w):
    j, i = torch.meshgrid(torch.arange(H, dtype=torch.float32),
                          torch.arange(W, dtype=torch.float32), indexing="ij")
    dirs = torch.stack([(i - W * 0.5) / focal, -(j - H * 0.5) / focal, -torch.ones_like(i)], -1)
    rays_d = (dirs[..., None, :] * c2w[:3, :3]).sum(-1)
    rays_o = c2w[:3, -1].expand(rays_d.shape)
    return rays_o, rays_d


def render_sphere(rays_o, rays_d):
    a = (rays_d * rays_d).sum(-1)
    b = 2 * (rays_o * rays_d).sum(-1)
    c = (rays_o * rays_o).sum(-1) - 1.0
    disc = b * b - 4 * a * c
    t = (-b - disc.clamp(min=0).sqrt()) / (2 * a)
    p = rays_o + t[..., None] * rays_d
    colour = torch.stack([0.5 + 0.4 * p[..., 0], 0.5 + 0.4 * p[..., 1],
                          0.5 - 0.4 * p[..., 2] * p[..., 0]], -1)
    return torch.where((disc > 0)[..., None], colour, torch.ones_like(colour))


H = W = args.res
focal = 1.5 * args.res
poses = [look_at(2 * math.pi * k / args.n_views, math.radians(30.0), 4.0)
         for k in range(args.n_views)]
all_rays = [get_rays(H, W, focal, c2w) for c2w in poses]
images = [render_sphere(o, d) for o, d in all_rays]


class Embedder:
    def __init__(self, multires):
        self.freq_bands = 2.0 ** torch.linspace(0.0, multires - 1, multires)
        self.out_dim = 3 + 3 * 2 * multires

    def __call__(self, x):
        out = [x]
        for freq in self.freq_bands:
            out += [torch.sin(x * freq), torch.cos(x * freq)]
        return torch.cat(out, -1)


class NeRF(nn.Module):
    def __init__(self, D, W, input_ch, input_ch_views, skips=(2,)):
        super().__init__()
        self.input_ch, self.skips = input_ch, skips
        self.pts_linears = nn.ModuleList(
            [nn.Linear(input_ch, W)] +
            [nn.Linear(W + input_ch, W) if i in skips else nn.Linear(W, W) for i in range(D - 1)])
        self.views_linears = nn.ModuleList([nn.Linear(input_ch_views + W, W // 2)])
        self.feature_linear = nn.Linear(W, W)
        self.alpha_linear = nn.Linear(W, 1)
        self.rgb_linear = nn.Linear(W // 2, 3)

    def forward(self, x):
        input_pts, input_views = x[..., :self.input_ch], x[..., self.input_ch:]
        h = input_pts
        for i, layer in enumerate(self.pts_linears):
            h = F.relu(layer(h))
            if i in self.skips:
                h = torch.cat([input_pts, h], -1)
        alpha = self.alpha_linear(h)
        h = torch.cat([self.feature_linear(h), input_views], -1)
        for layer in self.views_linears:
            h = F.relu(layer(h))
        rgb = self.rgb_linear(h)
        return torch.cat([rgb, alpha], -1)


embed_fn = Embedder(args.multires)
embeddirs_fn = Embedder(args.multires_views)


def run_network(pts, viewdirs, fn):
    dirs = viewdirs[:, None].expand(pts.shape)
    embedded = torch.cat([embed_fn(pts), embeddirs_fn(dirs)], -1)
    return fn(embedded)


def raw2outputs(raw, z_vals, rays_d):
    dists = z_vals[..., 1:] - z_vals[..., :-1]
    dists = torch.cat([dists, torch.full_like(dists[..., :1], 1e10)], -1)
    dists = dists * rays_d[..., None, :].norm(dim=-1)
    rgb = torch.sigmoid(raw[..., :3])
    alpha = 1.0 - torch.exp(-F.relu(raw[..., 3]) * dists)
    trans = torch.cumprod(torch.cat([torch.ones_like(alpha[:, :1]), 1.0 - alpha + 1e-10], -1), -1)
    weights = alpha * trans[:, :-1]
    rgb_map = (weights[..., None] * rgb).sum(-2)
    acc_map = weights.sum(-1)
    rgb_map = rgb_map + (1.0 - acc_map[..., None])  # white background
    return rgb_map, weights


def sample_pdf(bins, weights, N_samples, det=False):
    weights = weights + 1e-5
    pdf = weights / weights.sum(-1, keepdim=True)
    cdf = torch.cumsum(pdf, -1)
    cdf = torch.cat([torch.zeros_like(cdf[..., :1]), cdf], -1)
    if det:
        u = torch.linspace(0.0, 1.0, N_samples).expand(list(cdf.shape[:-1]) + [N_samples])
    else:
        u = torch.rand(list(cdf.shape[:-1]) + [N_samples])
    u = u.contiguous()
    inds = torch.searchsorted(cdf, u, right=True)
    below = (inds - 1).clamp(min=0)
    above = inds.clamp(max=cdf.shape[-1] - 1)
    inds_g = torch.stack([below, above], -1)
    matched_shape = [inds_g.shape[0], inds_g.shape[1], cdf.shape[-1]]
    cdf_g = torch.gather(cdf.unsqueeze(1).expand(matched_shape), 2, inds_g)
    bins_g = torch.gather(bins.unsqueeze(1).expand(matched_shape), 2, inds_g)
    denom = cdf_g[..., 1] - cdf_g[..., 0]
    denom = torch.where(denom < 1e-5, torch.ones_like(denom), denom)
    t = (u - cdf_g[..., 0]) / denom
    return bins_g[..., 0] + t * (bins_g[..., 1] - bins_g[..., 0])


def render_rays(rays_o, rays_d, network_fn, network_fine):
    viewdirs = rays_d / rays_d.norm(dim=-1, keepdim=True)
    t_vals = torch.linspace(0.0, 1.0, args.N_samples)
    z_vals = (NEAR * (1.0 - t_vals) + FAR * t_vals).expand(rays_o.shape[0], args.N_samples)
    if args.perturb > 0:
        mids = 0.5 * (z_vals[..., 1:] + z_vals[..., :-1])
        upper = torch.cat([mids, z_vals[..., -1:]], -1)
        lower = torch.cat([z_vals[..., :1], mids], -1)
        z_vals = lower + (upper - lower) * torch.rand(z_vals.shape)
    pts = rays_o[..., None, :] + rays_d[..., None, :] * z_vals[..., :, None]
    raw = run_network(pts, viewdirs, network_fn)
    rgb_map_0, weights = raw2outputs(raw, z_vals, rays_d)

    z_vals_mid = 0.5 * (z_vals[..., 1:] + z_vals[..., :-1])
    z_samples = sample_pdf(z_vals_mid, weights[..., 1:-1], args.N_importance,
                           det=(args.perturb == 0))
    z_samples = z_samples.detach()
    z_vals, _ = torch.sort(torch.cat([z_vals, z_samples], -1), -1)
    pts = rays_o[..., None, :] + rays_d[..., None, :] * z_vals[..., :, None]
    raw = run_network(pts, viewdirs, network_fine)
    rgb_map, _ = raw2outputs(raw, z_vals, rays_d)
    return rgb_map, rgb_map_0


def img2mse(x, y):
    return torch.mean((x - y) ** 2)


def mse2psnr(x):
    return -10.0 * torch.log10(x)


model = NeRF(args.netdepth, args.netwidth, embed_fn.out_dim, embeddirs_fn.out_dim)
grad_vars = list(model.parameters())
optimizer = torch.optim.Adam(params=grad_vars, lr=args.lrate, betas=(0.9, 0.999))
model_fine = NeRF(args.netdepth, args.netwidth, embed_fn.out_dim, embeddirs_fn.out_dim)
grad_vars += list(model_fine.parameters())


coords_full = torch.stack(torch.meshgrid(torch.arange(H), torch.arange(W), indexing="ij"), -1)
dH, dW = int(H // 2 * args.precrop_frac), int(W // 2 * args.precrop_frac)
coords_crop = torch.stack(torch.meshgrid(torch.arange(H // 2 - dH, H // 2 + dH),
                                         torch.arange(W // 2 - dW, W // 2 + dW),
                                         indexing="ij"), -1)

for step in range(args.steps):
    img_i = int(torch.randint(0, args.n_views, ()))
    rays_o_img, rays_d_img = all_rays[img_i]
    coords = coords_crop if step < args.precrop_iters else coords_full
    coords = coords.reshape(-1, 2)
    select = coords[torch.randperm(coords.shape[0])[:args.N_rand]]
    rays_o = rays_o_img[select[:, 0], select[:, 1]]
    rays_d = rays_d_img[select[:, 0], select[:, 1]]
    target_s = images[img_i][select[:, 0], select[:, 1]]

    rgb, rgb0 = render_rays(rays_o, rays_d, model, model_fine)
    optimizer.zero_grad()
    img_loss = img2mse(rgb, target_s)
    img_loss0 = img2mse(rgb0, target_s)
    loss = img_loss + img_loss0
    loss.backward()
    optimizer.step()

    new_lrate = args.lrate * (0.1 ** (step / args.lrate_decay))
    for param_group in optimizer.param_groups:
        param_group["lr"] = new_lrate
    if step % 20 == 0 or step == args.steps - 1:
        print(f"step {step:3d} loss {loss.item():.4f} psnr {mse2psnr(img_loss).item():.2f} "
              f"psnr0 {mse2psnr(img_loss0).item():.2f}")

with torch.no_grad():
    rays_o, rays_d = all_rays[0]
    rgb, _ = render_rays(rays_o.reshape(-1, 3), rays_d.reshape(-1, 3), model, model_fine)
    print(f"view 0 psnr {mse2psnr(img2mse(rgb, images[0].reshape(-1, 3))).item():.2f}")

if args.out:
    torch.save({"network_fn": model.state_dict(), "network_fine": model_fine.state_dict()},
               args.out)
