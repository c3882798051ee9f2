"""Neural ODEs and NeRF from public code: torchdiffeq's examples trained through
``odeint_adjoint`` (the real ``torchdiffeq`` package, the ``corpus`` extra), one of them with a
trained tensor its dynamics read that the adjoint does not differentiate; FFJORD's toy
continuous normalizing flow, whose trained end time is copied off the graph; and
nerf-pytorch's hierarchical coarse-to-fine step.

Each builder takes ``seed`` and returns a :class:`RealCase`; the text is ours, the structure
(modules, optimizers, order of calls, bug) is the repository's, at tiny sizes.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import pytest
import torch
from realcode_common import RealCase
from torch import nn
from torch.nn import functional as F


def _torchdiffeq() -> Any:
    return pytest.importorskip("torchdiffeq",
                               reason="the corpus extra (torchdiffeq) is not installed")


# --- rtqichen/torchdiffeq examples/ode_demo.py@657943acefa826ef04c025ebeb1ff5e9d60dc268: with
# --adjoint, odeint is odeint_adjoint; the data are the spiral dy/dt = (y ** 3) A of a fixed
# A solved by odeint under no_grad; each iteration draws batch_size start points and the next
# batch_time points of the trajectory, solves ODEFunc (net(y ** 3)) from them and trains one
# RMSprop over func.parameters() on mean |pred_y - batch_y|: correct (adjoint_params defaults
# to tuple(func.parameters()), all the dynamics read).
# ode_demo_external_a: the same step whose dynamics add a learned linear term (y ** 3) A, A a
# trained tensor held as a plain attribute of func, not a parameter (the pattern of
# rtqichen/torchdiffeq#94 and PR #104, "self.a = a  # This is not a param"; #246: "If you use
# odeint, gradient will be computed w.r.t. external_p, but odeint_adjoint will only do it for
# p"). RMSprop steps A, the adjoint gives it no gradient: dead. The fix is the adjoint_params=
# argument (added in 7391aec984c1e9e0899d51e6b0538483c37ec8fb, "Updated adjoint", documented
# in FURTHER_DOCUMENTATION.md): adjoint_params=(*func.parameters(), A).


class TrueDynamics(nn.Module):
    """ode_demo's ``Lambda``: the spiral the data come from."""

    def __init__(self, true_A: torch.Tensor) -> None:
        super().__init__()
        self.true_A = true_A

    def forward(self, t: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.mm(y ** 3, self.true_A)


class ODEFunc(nn.Module):
    """ode_demo's learned dynamics (50 hidden units -> 6); ``A``: the learned linear term of
    the external-tensor variant, a plain attribute (``func.parameters()`` leaves it out)."""

    def __init__(self, hidden: int = 6, A: torch.Tensor | None = None) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2, hidden), nn.Tanh(), nn.Linear(hidden, 2))
        for m in self.net.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, mean=0, std=0.1)
                nn.init.constant_(m.bias, val=0)
        self.A = A

    def forward(self, t: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = self.net(y ** 3)
        if self.A is not None:
            out = out + torch.mm(y ** 3, self.A)
        return out


def ode_demo(seed: int, *, external_a: bool = False, fixed: bool = False, data_size: int = 24,
             batch_time: int = 4, batch_size: int = 3) -> RealCase:
    torchdiffeq = _torchdiffeq()
    odeint, odeint_adjoint = torchdiffeq.odeint, torchdiffeq.odeint_adjoint
    torch.manual_seed(seed)
    true_y0 = torch.tensor([[2.0, 0.0]])
    t = torch.linspace(0.0, 2.0, data_size)
    true_A = torch.tensor([[-0.1, 2.0], [-2.0, -0.1]])
    with torch.no_grad():
        true_y = odeint(TrueDynamics(true_A), true_y0, t, method="dopri5")
    A = (0.1 * torch.randn(2, 2)).requires_grad_() if external_a else None
    func = ODEFunc(A=A)
    params = [*func.parameters()] + ([A] if A is not None else [])
    optimizer = torch.optim.RMSprop(params, lr=1e-3)

    def get_batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        s = torch.randperm(data_size - batch_time)[:batch_size]
        batch_y0 = true_y[s]  # (M, 1, D)
        batch_t = t[:batch_time]  # (T)
        batch_y = torch.stack([true_y[s + i] for i in range(batch_time)], dim=0)  # (T, M, 1, D)
        return batch_y0.squeeze(1), batch_t, batch_y.squeeze(2)

    def step() -> torch.Tensor:
        y0, batch_t, batch_y = get_batch()
        if fixed:
            pred_y = odeint_adjoint(func, y0, batch_t, adjoint_params=(*func.parameters(), A))
        else:
            pred_y = odeint_adjoint(func, y0, batch_t)  # audit: fix here [ode_demo_external_a]
        return torch.mean(torch.abs(pred_y - batch_y))

    name = "ode_demo_adjoint" if not external_a else (
        "ode_demo_external_a_fixed" if fixed else "ode_demo_external_a")
    confirms = ("https://github.com/rtqichen/torchdiffeq/pull/104" if external_a else
                "https://github.com/rtqichen/torchdiffeq/blob/657943acefa826ef04c025ebeb1ff5e9d6"
                "0dc268/FURTHER_DOCUMENTATION.md (adjoint_params defaults to "
                "tuple(func.parameters()))")
    return RealCase(name, "rtqichen/torchdiffeq examples/ode_demo.py"
                    "@657943acefa826ef04c025ebeb1ff5e9d60dc268", confirms,
                    "dead" if external_a and not fixed else "correct", step, optimizer,
                    {"func": func}, tensors={"A": A} if A is not None else {})


# --- rtqichen/torchdiffeq examples/latent_ode.py@657943acefa826ef04c025ebeb1ff5e9d60dc268 with
# --adjoint True: a RecognitionRNN runs backward in time over the observed spirals, its last
# output gives q(z0) (mean, log-variance), z0 is drawn by the reparameterization, the latent
# LatentODEfunc is solved by odeint_adjoint from z0 over the sample times, a Decoder maps the
# latent path to observations; one Adam over func, dec and rec trains -log p(x) + KL. The
# adjoint gives the gradient to z0 (then the RNN) and to func.parameters(): correct.


class LatentODEfunc(nn.Module):
    def __init__(self, latent_dim: int = 2, nhidden: int = 6) -> None:
        super().__init__()
        self.elu = nn.ELU(inplace=True)
        self.fc1 = nn.Linear(latent_dim, nhidden)
        self.fc2 = nn.Linear(nhidden, nhidden)
        self.fc3 = nn.Linear(nhidden, latent_dim)
        self.nfe = 0

    def forward(self, t: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        self.nfe += 1
        return self.fc3(self.elu(self.fc2(self.elu(self.fc1(x)))))


class RecognitionRNN(nn.Module):
    def __init__(self, latent_dim: int = 2, obs_dim: int = 2, nhidden: int = 6,
                 nbatch: int = 3) -> None:
        super().__init__()
        self.nhidden, self.nbatch = nhidden, nbatch
        self.i2h = nn.Linear(obs_dim + nhidden, nhidden)
        self.h2o = nn.Linear(nhidden, latent_dim * 2)

    def forward(self, x: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = torch.tanh(self.i2h(torch.cat((x, h), dim=1)))
        return self.h2o(h), h

    def initHidden(self) -> torch.Tensor:
        return torch.zeros(self.nbatch, self.nhidden)


class Decoder(nn.Module):
    def __init__(self, latent_dim: int = 2, obs_dim: int = 2, nhidden: int = 6) -> None:
        super().__init__()
        self.relu = nn.ReLU(inplace=True)
        self.fc1 = nn.Linear(latent_dim, nhidden)
        self.fc2 = nn.Linear(nhidden, obs_dim)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.relu(self.fc1(z)))


def log_normal_pdf(x: torch.Tensor, mean: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    const = torch.log(torch.tensor([2.0 * math.pi]))
    return -0.5 * (const + logvar + (x - mean) ** 2.0 / torch.exp(logvar))


def normal_kl(mu1: torch.Tensor, lv1: torch.Tensor, mu2: torch.Tensor,
              lv2: torch.Tensor) -> torch.Tensor:
    v1, v2 = torch.exp(lv1), torch.exp(lv2)
    return lv2 / 2.0 - lv1 / 2.0 + (v1 + (mu1 - mu2) ** 2.0) / (2.0 * v2) - 0.5


def latent_ode(seed: int, *, latent_dim: int = 2, nspiral: int = 3, nsample: int = 4,
               noise_std: float = 0.3) -> RealCase:
    odeint = _torchdiffeq().odeint_adjoint
    torch.manual_seed(seed)
    samp_trajs = torch.randn(nspiral, nsample, 2)
    samp_ts = torch.linspace(0.0, 6 * math.pi, 100)[:nsample]
    func = LatentODEfunc(latent_dim)
    rec = RecognitionRNN(latent_dim, 2, 6, nspiral)
    dec = Decoder(latent_dim, 2)
    params = list(func.parameters()) + list(dec.parameters()) + list(rec.parameters())
    optimizer = torch.optim.Adam(params, lr=0.01)

    def step() -> torch.Tensor:
        h = rec.initHidden()
        for t in reversed(range(samp_trajs.size(1))):
            out, h = rec.forward(samp_trajs[:, t, :], h)
        qz0_mean, qz0_logvar = out[:, :latent_dim], out[:, latent_dim:]
        epsilon = torch.randn(qz0_mean.size())
        z0 = epsilon * torch.exp(0.5 * qz0_logvar) + qz0_mean
        pred_z = odeint(func, z0, samp_ts).permute(1, 0, 2)
        pred_x = dec(pred_z)
        noise_logvar = 2.0 * torch.log(torch.zeros(pred_x.size()) + noise_std)
        logpx = log_normal_pdf(samp_trajs, pred_x, noise_logvar).sum(-1).sum(-1)
        pz0_mean = pz0_logvar = torch.zeros(z0.size())
        analytic_kl = normal_kl(qz0_mean, qz0_logvar, pz0_mean, pz0_logvar).sum(-1)
        return torch.mean(-logpx + analytic_kl, dim=0)

    return RealCase("latent_ode_adjoint", "rtqichen/torchdiffeq examples/latent_ode.py"
                    "@657943acefa826ef04c025ebeb1ff5e9d60dc268",
                    "https://github.com/rtqichen/torchdiffeq/issues/216 (odeint_adjoint does "
                    "the same thing as odeint; func must be an nn.Module)", "correct", step,
                    optimizer, {"func": func, "rec": rec, "dec": dec})


# --- yenchenlin/nerf-pytorch run_nerf.py, run_nerf_helpers.py
# @63a5a630c9abd62b0f21c08703d0ac2ea7d4b9dd: create_nerf builds a coarse and a fine NeRF MLP
# (positional encoding of points and view directions, a skip connection, alpha/feature/rgb
# heads) and one Adam over both; render -> batchify_rays -> render_rays samples N_samples
# stratified depths, queries the coarse MLP, raw2outputs composites the weights, sample_pdf
# draws N_importance depths from the coarse weights, "z_samples = z_samples.detach()", the
# fine MLP is queried on the sorted union and composited; the loss is the MSE of the fine and
# of the coarse render (rgb0). Correct: the detach (bmild/nerf run_nerf.py
# @14c55567a6d0fbd75d3fd12b0411f98160ba3237 line 218, tf.stop_gradient(z_samples)) keeps the
# fine loss off the coarse MLP through the sample positions (bmild/nerf#55: "No gradients pass
# from the fine network to the coarse network"); both MLPs are stepped by the one Adam, so
# without it no tensor outside the optimizer gets a gradient: no category of the audit.


class Embedder:
    """Positional encoding: the input and sin/cos of it at ``num_freqs`` octaves."""

    def __init__(self, input_dims: int, num_freqs: int) -> None:
        self.freq_bands = 2.0 ** torch.linspace(0.0, num_freqs - 1, steps=num_freqs)
        self.out_dim = input_dims * (1 + 2 * num_freqs)

    def embed(self, inputs: torch.Tensor) -> torch.Tensor:
        parts = [inputs]
        for freq in self.freq_bands:
            parts += [torch.sin(inputs * freq), torch.cos(inputs * freq)]
        return torch.cat(parts, -1)


class NeRF(nn.Module):
    def __init__(self, D: int = 6, W: int = 8, input_ch: int = 3, input_ch_views: int = 3,
                 skips: tuple[int, ...] = (4,)) -> None:
        super().__init__()
        self.input_ch, self.input_ch_views, self.skips = input_ch, input_ch_views, skips
        self.pts_linears = nn.ModuleList(
            [nn.Linear(input_ch, W)] + [nn.Linear(W + input_ch if i in skips else W, W)
                                        for i in range(D - 1)])
        self.views_linears = nn.ModuleList([nn.Linear(input_ch_views + W, W // 2)])
        self.feature_linear = nn.Linear(W, W)
        self.alpha_linear = nn.Linear(W, 1)
        self.rgb_linear = nn.Linear(W // 2, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        input_pts, input_views = torch.split(x, [self.input_ch, self.input_ch_views], dim=-1)
        h = input_pts
        for i, layer in enumerate(self.pts_linears):
            h = F.relu(layer(h))
            if i in self.skips:
                h = torch.cat([input_pts, h], -1)
        alpha = self.alpha_linear(h)
        h = torch.cat([self.feature_linear(h), input_views], -1)
        for layer in self.views_linears:
            h = F.relu(layer(h))
        return torch.cat([self.rgb_linear(h), alpha], -1)


def run_network(inputs: torch.Tensor, viewdirs: torch.Tensor, fn: nn.Module,
                embed_fn: Callable[[torch.Tensor], torch.Tensor],
                embeddirs_fn: Callable[[torch.Tensor], torch.Tensor],
                netchunk: int = 64) -> torch.Tensor:
    inputs_flat = torch.reshape(inputs, [-1, inputs.shape[-1]])
    embedded = embed_fn(inputs_flat)
    input_dirs = viewdirs[:, None].expand(inputs.shape)
    embedded = torch.cat([embedded, embeddirs_fn(torch.reshape(input_dirs, [-1, 3]))], -1)
    outputs_flat = torch.cat([fn(embedded[i:i + netchunk])
                              for i in range(0, embedded.shape[0], netchunk)], 0)
    return torch.reshape(outputs_flat, [*inputs.shape[:-1], outputs_flat.shape[-1]])


def raw2outputs(raw: torch.Tensor, z_vals: torch.Tensor, rays_d: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    dists = z_vals[..., 1:] - z_vals[..., :-1]
    dists = torch.cat([dists, torch.tensor([1e10]).expand(dists[..., :1].shape)], -1)
    dists = dists * torch.norm(rays_d[..., None, :], dim=-1)
    rgb = torch.sigmoid(raw[..., :3])
    alpha = 1.0 - torch.exp(-F.relu(raw[..., 3]) * dists)
    transmittance = torch.cumprod(torch.cat([torch.ones((alpha.shape[0], 1)),
                                             1.0 - alpha + 1e-10], -1), -1)[:, :-1]
    weights = alpha * transmittance
    rgb_map = torch.sum(weights[..., None] * rgb, -2)
    depth_map = torch.sum(weights * z_vals, -1)
    disp_map = 1.0 / torch.max(1e-10 * torch.ones_like(depth_map),
                               depth_map / torch.sum(weights, -1))
    return rgb_map, disp_map, torch.sum(weights, -1), weights


def sample_pdf(bins: torch.Tensor, weights: torch.Tensor, N_samples: int,
               det: bool = False) -> torch.Tensor:
    """Inverse-transform sampling of the piecewise-constant pdf the coarse weights define."""
    weights = weights + 1e-5
    pdf = weights / torch.sum(weights, -1, keepdim=True)
    cdf = torch.cumsum(pdf, -1)
    cdf = torch.cat([torch.zeros_like(cdf[..., :1]), cdf], -1)
    if det:
        u = torch.linspace(0.0, 1.0, steps=N_samples).expand([*cdf.shape[:-1], N_samples])
    else:
        u = torch.rand([*cdf.shape[:-1], N_samples])
    u = u.contiguous()
    inds = torch.searchsorted(cdf, u, right=True)
    below = torch.max(torch.zeros_like(inds - 1), inds - 1)
    above = torch.min((cdf.shape[-1] - 1) * torch.ones_like(inds), inds)
    inds_g = torch.stack([below, above], -1)
    matched_shape = [inds_g.shape[0], inds_g.shape[1], cdf.shape[-1]]
    cdf_g = torch.gather(cdf.unsqueeze(1).expand(matched_shape), 2, inds_g)
    bins_g = torch.gather(bins.unsqueeze(1).expand(matched_shape), 2, inds_g)
    denom = cdf_g[..., 1] - cdf_g[..., 0]
    denom = torch.where(denom < 1e-5, torch.ones_like(denom), denom)
    t = (u - cdf_g[..., 0]) / denom
    return bins_g[..., 0] + t * (bins_g[..., 1] - bins_g[..., 0])


def render_rays(ray_batch: torch.Tensor, network_fn: nn.Module,
                network_query_fn: Callable[..., torch.Tensor], N_samples: int,
                perturb: float = 1.0, N_importance: int = 0,
                network_fine: nn.Module | None = None,
                detach_samples: bool = True) -> dict[str, torch.Tensor]:
    N_rays = ray_batch.shape[0]
    rays_o, rays_d = ray_batch[:, 0:3], ray_batch[:, 3:6]
    viewdirs = ray_batch[:, -3:]
    bounds = torch.reshape(ray_batch[..., 6:8], [-1, 1, 2])
    near, far = bounds[..., 0], bounds[..., 1]
    t_vals = torch.linspace(0.0, 1.0, steps=N_samples)
    z_vals = (near * (1.0 - t_vals) + far * t_vals).expand([N_rays, N_samples])
    if perturb > 0.0:
        mids = 0.5 * (z_vals[..., 1:] + z_vals[..., :-1])
        upper = torch.cat([mids, z_vals[..., -1:]], -1)
        lower = torch.cat([z_vals[..., :1], mids], -1)
        z_vals = lower + (upper - lower) * torch.rand(z_vals.shape)
    pts = rays_o[..., None, :] + rays_d[..., None, :] * z_vals[..., :, None]
    raw = network_query_fn(pts, viewdirs, network_fn)
    rgb_map, disp_map, acc_map, weights = raw2outputs(raw, z_vals, rays_d)
    ret = {}
    if N_importance > 0:
        ret["rgb0"], ret["disp0"], ret["acc0"] = rgb_map, disp_map, acc_map
        z_vals_mid = 0.5 * (z_vals[..., 1:] + z_vals[..., :-1])
        z_samples = sample_pdf(z_vals_mid, weights[..., 1:-1], N_importance,
                               det=(perturb == 0.0))
        if detach_samples:
            z_samples = z_samples.detach()
        z_vals, _ = torch.sort(torch.cat([z_vals, z_samples], -1), -1)
        pts = rays_o[..., None, :] + rays_d[..., None, :] * z_vals[..., :, None]
        run_fn = network_fn if network_fine is None else network_fine
        raw = network_query_fn(pts, viewdirs, run_fn)
        rgb_map, disp_map, acc_map, weights = raw2outputs(raw, z_vals, rays_d)
        ret["z_std"] = torch.std(z_samples, dim=-1, unbiased=False)
    ret.update({"rgb_map": rgb_map, "disp_map": disp_map, "acc_map": acc_map, "raw": raw})
    return ret


def render(rays: tuple[torch.Tensor, torch.Tensor], chunk: int = 4, near: float = 2.0,
           far: float = 6.0, **kwargs: Any) -> list[Any]:
    rays_o, rays_d = rays
    viewdirs = rays_d / torch.norm(rays_d, dim=-1, keepdim=True)
    sh = rays_d.shape
    rays_o, rays_d = torch.reshape(rays_o, [-1, 3]).float(), torch.reshape(rays_d, [-1, 3])
    near_t, far_t = near * torch.ones_like(rays_d[..., :1]), far * torch.ones_like(rays_d[..., :1])
    batch = torch.cat([rays_o, rays_d, near_t, far_t, torch.reshape(viewdirs, [-1, 3])], -1)
    parts: dict[str, list[torch.Tensor]] = {}
    for i in range(0, batch.shape[0], chunk):
        for k, v in render_rays(batch[i:i + chunk], **kwargs).items():
            parts.setdefault(k, []).append(v)
    all_ret = {k: torch.cat(v, 0) for k, v in parts.items()}
    for k in all_ret:
        all_ret[k] = torch.reshape(all_ret[k], list(sh[:-1]) + list(all_ret[k].shape[1:]))
    keys = ["rgb_map", "disp_map", "acc_map"]
    return [all_ret[k] for k in keys] + [{k: v for k, v in all_ret.items() if k not in keys}]


def nerf_pytorch(seed: int, *, N_rand: int = 4, N_samples: int = 6,
                 N_importance: int = 4) -> RealCase:
    torch.manual_seed(seed)
    embedder, embedder_views = Embedder(3, 2), Embedder(3, 1)
    model = NeRF(input_ch=embedder.out_dim, input_ch_views=embedder_views.out_dim)
    model_fine = NeRF(input_ch=embedder.out_dim, input_ch_views=embedder_views.out_dim)
    grad_vars = list(model.parameters()) + list(model_fine.parameters())
    optimizer = torch.optim.Adam(params=grad_vars, lr=5e-4, betas=(0.9, 0.999))

    def network_query_fn(inputs: torch.Tensor, viewdirs: torch.Tensor,
                         network_fn: nn.Module) -> torch.Tensor:
        return run_network(inputs, viewdirs, network_fn, embedder.embed, embedder_views.embed)

    render_kwargs_train = {"network_query_fn": network_query_fn, "perturb": 1.0,
                           "N_importance": N_importance, "network_fine": model_fine,
                           "N_samples": N_samples, "network_fn": model}
    rays_o = torch.randn(N_rand, 3) * 0.1
    rays_d = torch.randn(N_rand, 3)
    target_s = torch.rand(N_rand, 3)

    def step() -> torch.Tensor:
        rgb, _disp, _acc, extras = render((rays_o, rays_d), **render_kwargs_train)
        img_loss = torch.mean((rgb - target_s) ** 2)
        loss = img_loss
        if "rgb0" in extras:
            loss = loss + torch.mean((extras["rgb0"] - target_s) ** 2)
        return loss

    return RealCase("nerf_pytorch", "yenchenlin/nerf-pytorch run_nerf.py"
                    "@63a5a630c9abd62b0f21c08703d0ac2ea7d4b9dd",
                    "https://github.com/bmild/nerf/issues/55 (\"No gradients pass from the fine "
                    "network to the coarse network\")", "correct", step, optimizer,
                    {"model": model, "model_fine": model_fine})


# --- rtqichen/ffjord train_toy.py, train_misc.py, lib/layers/cnf.py, lib/layers/odefunc.py,
# lib/layers/diffeq_layers/basic.py@994864ad0517db3549717c25170f9b71e96788b1: the toy
# continuous normalizing flow with its defaults (concatsquash layers, tanh, brute-force
# divergence, train_T=True, one CNF block in a SequentialFlow, dopri5 at 1e-5, Adam with weight
# decay over model.parameters()); CNF integrates (z, delta log p) with torchdiffeq's
# odeint_adjoint over [0, sqrt_end_time ** 2]; the dynamics compute the divergence by
# autograd.grad with create_graph=True under set_grad_enabled(True); the loss is
# -mean(log N(z) - delta log p). The bug (ffjord_toy): with train_T the end time is the
# parameter sqrt_end_time, but CNF.forward builds the integration times with
# torch.tensor([0.0, self.sqrt_end_time * self.sqrt_end_time]), a copy of the values without
# their graph: Adam steps sqrt_end_time, no gradient reaches it: dead. The fix
# (ffjord_toy_stack) is the line of stevenygd/PointFlow models/cnf.py
# @4e6795a4d9b45a433068fd57b99ea909a9c58a96, the CNF written from this one: torch.stack of
# torch.tensor(0.0) and the product, so that the times require grad and odeint_adjoint returns
# their gradient (rtqichen/torchdiffeq#87: "it should automatically give you gradients if t1
# is set to require gradients").


class ConcatSquashLinear(nn.Module):
    def __init__(self, dim_in: int, dim_out: int) -> None:
        super().__init__()
        self._layer = nn.Linear(dim_in, dim_out)
        self._hyper_bias = nn.Linear(1, dim_out, bias=False)
        self._hyper_gate = nn.Linear(1, dim_out)

    def forward(self, t: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        gate = torch.sigmoid(self._hyper_gate(t.view(1, 1)))
        return self._layer(x) * gate + self._hyper_bias(t.view(1, 1))


class ODEnet(nn.Module):
    def __init__(self, hidden_dims: tuple[int, ...], dim: int) -> None:
        super().__init__()
        dims = (dim, *hidden_dims, dim)
        self.layers = nn.ModuleList([ConcatSquashLinear(a, b) for a, b in itertools.pairwise(dims)])
        self.activation_fns = nn.ModuleList([nn.Tanh() for _ in hidden_dims])

    def forward(self, t: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        dx = y
        for i, layer in enumerate(self.layers):
            dx = layer(t, dx)
            if i < len(self.layers) - 1:
                dx = self.activation_fns[i](dx)
        return dx


def divergence_bf(dx: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The trace of d dx / d y, one autograd.grad per dimension (kept differentiable)."""
    sum_diag = 0.0
    for i in range(y.shape[1]):
        sum_diag += torch.autograd.grad(dx[:, i].sum(), y, create_graph=True)[0][:, i]
    return sum_diag


class FFJORDODEfunc(nn.Module):
    """ffjord's ODEfunc: the dynamics of (y, -log-density change)."""

    def __init__(self, diffeq: nn.Module) -> None:
        super().__init__()
        self.diffeq = diffeq
        self._e: torch.Tensor | None = None
        self.register_buffer("_num_evals", torch.tensor(0.0))

    def before_odeint(self, e: torch.Tensor | None = None) -> None:
        self._e = e
        self._num_evals.fill_(0)

    def forward(self, t: torch.Tensor, states: tuple[torch.Tensor, ...]
                ) -> tuple[torch.Tensor, ...]:
        y = states[0]
        self._num_evals += 1
        t = t.detach().clone().type_as(y)  # torch.tensor(t) in the source: a detached copy
        batchsize = y.shape[0]
        if self._e is None:  # the Hutchinson noise, drawn though brute force does not use it
            self._e = torch.randn_like(y)
        with torch.set_grad_enabled(True):
            y.requires_grad_(True)
            t.requires_grad_(True)
            dy = self.diffeq(t, y)
            divergence = divergence_bf(dy, y).view(batchsize, 1)
        return dy, -divergence


class CNF(nn.Module):
    def __init__(self, odefunc: nn.Module, T: float = 0.5, atol: float = 1e-5,
                 rtol: float = 1e-5, stack: bool = False) -> None:
        super().__init__()
        self.register_parameter("sqrt_end_time", nn.Parameter(torch.sqrt(torch.tensor(T))))
        self.odefunc, self.atol, self.rtol, self.stack = odefunc, atol, rtol, stack

    def forward(self, z: torch.Tensor, logpz: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        odeint = _torchdiffeq().odeint_adjoint
        if self.stack:
            integration_times = torch.stack(
                [torch.tensor(0.0).to(z), self.sqrt_end_time * self.sqrt_end_time]).to(z)
        else:
            integration_times = torch.tensor(  # audit: fix here [ffjord_toy]
                [0.0, self.sqrt_end_time * self.sqrt_end_time]).to(z)
        self.odefunc.before_odeint()
        state_t = odeint(self.odefunc, (z, logpz), integration_times.to(z), atol=self.atol,
                         rtol=self.rtol, method="dopri5", options={})
        z_t, logpz_t = (s[1] for s in state_t)
        return z_t, logpz_t


class SequentialFlow(nn.Module):
    def __init__(self, layers: list[nn.Module]) -> None:
        super().__init__()
        self.chain = nn.ModuleList(layers)

    def forward(self, x: torch.Tensor, logpx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        for layer in self.chain:
            x, logpx = layer(x, logpx)
        return x, logpx


def ffjord_toy(seed: int, *, stack: bool = False, batch_size: int = 4,
               hidden_dims: tuple[int, ...] = (4, 4)) -> RealCase:
    _torchdiffeq()
    torch.manual_seed(seed)
    model = SequentialFlow([CNF(FFJORDODEfunc(ODEnet(hidden_dims, 2)), stack=stack)])
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-5)
    model.train()

    def step() -> torch.Tensor:
        x = torch.randn(batch_size, 2) * 2.0
        zero = torch.zeros(x.shape[0], 1).to(x)
        z, delta_logp = model(x, zero)
        logpz = (-0.5 * math.log(2 * math.pi) - z.pow(2) / 2).sum(1, keepdim=True)
        return -torch.mean(logpz - delta_logp)

    return RealCase("ffjord_toy_stack" if stack else "ffjord_toy", "rtqichen/ffjord "
                    "lib/layers/cnf.py@994864ad0517db3549717c25170f9b71e96788b1",
                    "https://github.com/stevenygd/PointFlow/blob/4e6795a4d9b45a433068fd57b99ea9"
                    "09a9c58a96/models/cnf.py (torch.stack keeps sqrt_end_time on the graph; "
                    "https://github.com/rtqichen/torchdiffeq/issues/87 for the gradient of t1)",
                    "correct" if stack else "dead", step, optimizer, {"model": model})


CASES: dict[str, Callable[[int], RealCase]] = {
    "ode_demo_adjoint": ode_demo,
    "ode_demo_external_a": lambda s: ode_demo(s, external_a=True),
    "ode_demo_external_a_fixed": lambda s: ode_demo(s, external_a=True, fixed=True),
    "latent_ode_adjoint": latent_ode,
    "nerf_pytorch": nerf_pytorch,
    "ffjord_toy": ffjord_toy,
    "ffjord_toy_stack": lambda s: ffjord_toy(s, stack=True),
}

TWINS: dict[str, str] = {"ode_demo_external_a": "ode_demo_external_a_fixed",
                         "ffjord_toy": "ffjord_toy_stack"}
