"""Progressive distillation of a diffusion model at a tiny size, written after Salimans and Ho,
"Progressive Distillation for Fast Sampling of Diffusion Models" (ICLR 2022, arXiv:2202.00512),
Algorithm 2, with google-research/google-research diffusion_distillation
(https://github.com/google-research/google-research/tree/master/diffusion_distillation,
diffusion_distillation/dpm.py Model.training_losses and Model._run_model,
diffusion_distillation/schedules.py) and its PyTorch port Hramchenko/diffusion_distiller
(https://github.com/Hramchenko/diffusion_distiller, v_diffusion.py distill_loss, distillate.py).
Two phases: a denoiser (an MLP that predicts x from the noisy point z_t and its log-SNR) is
trained on the usual denoising loss, with an exponential moving average of its weights kept under
torch.no_grad(); the average is the teacher; then the student starts as a deep copy of the teacher
and is trained, with a student step of 1/N, so that one of its DDIM steps from z_t lands where two
teacher DDIM steps of 1/(2N) land: the target x~ implied by the teacher's z_s is computed under
torch.no_grad() from the teacher, which no optimizer holds and which stays fixed for the round; the
loss is max(x MSE, eps MSE) (the truncated SNR weighting). Points of a 2-D ring of Gaussian
clusters made in the script. As published: clean."""

import argparse
import copy
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--teacher-steps", type=int, default=15)
parser.add_argument("--distill-steps", type=int, default=12)
parser.add_argument("--batch-size", type=int, default=128)
parser.add_argument("--student-sampling-steps", type=int, default=4)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--ema-decay", type=float, default=0.8)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_points, n_modes = 1024, 6
angles = 2 * math.pi * torch.randint(0, n_modes, (n_points,)).float() / n_modes
data = torch.stack([angles.cos(), angles.sin()], 1) * 0.8 + 0.05 * torch.randn(n_points, 2)


def logsnr_schedule_cosine(u, logsnr_min=-10.0, logsnr_max=10.0):
    b = math.atan(math.exp(-0.5 * logsnr_max))
    a = math.atan(math.exp(-0.5 * logsnr_min)) - b
    return -2.0 * torch.log(torch.tan(a * u + b))


def alpha_sigma(logsnr):
    return torch.sigmoid(logsnr).sqrt().unsqueeze(1), torch.sigmoid(-logsnr).sqrt().unsqueeze(1)


class Denoiser(nn.Module):
    """x-prediction: returns (x, eps) for a noisy point z at log-SNR logsnr."""

    def __init__(self, hidden=64):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(3, hidden), nn.SiLU(), nn.Linear(hidden, hidden),
                                 nn.SiLU(), nn.Linear(hidden, 2))

    def forward(self, z, logsnr):
        model_x = self.net(torch.cat([z, logsnr.unsqueeze(1) / 10.0], 1))
        alpha, sigma = alpha_sigma(logsnr)
        model_eps = (z - alpha * model_x) / sigma
        return model_x, model_eps


def weighted_loss(model_x, model_eps, x_target, eps_target):
    x_mse = (model_x - x_target).pow(2).mean(1)
    eps_mse = (model_eps - eps_target).pow(2).mean(1)
    return torch.maximum(x_mse, eps_mse).mean()


# phase 1: the teacher, continuous-time denoising
denoiser = Denoiser()
ema = copy.deepcopy(denoiser)
denoiser_optimizer = torch.optim.Adam(denoiser.parameters(), lr=args.lr)
for step in range(args.teacher_steps):
    x = data[torch.randint(0, n_points, (args.batch_size,))]
    eps = torch.randn_like(x)
    logsnr = logsnr_schedule_cosine(torch.rand(args.batch_size))
    alpha, sigma = alpha_sigma(logsnr)
    model_x, model_eps = denoiser(alpha * x + sigma * eps, logsnr)
    loss = weighted_loss(model_x, model_eps, x, eps)
    denoiser_optimizer.zero_grad()
    loss.backward()
    denoiser_optimizer.step()
    with torch.no_grad():
        for p_ema, p in zip(ema.parameters(), denoiser.parameters()):
            p_ema.lerp_(p, 1.0 - args.ema_decay)
    print(f"teacher {step} loss {loss.item():.4f}")

# phase 2: one round of distillation, 2N teacher steps -> N student steps
num_steps = args.student_sampling_steps
teacher = ema
student = copy.deepcopy(teacher)
optimizer = torch.optim.Adam(student.parameters(), lr=args.lr)
for step in range(args.distill_steps):
    x = data[torch.randint(0, n_points, (args.batch_size,))]
    eps = torch.randn_like(x)
    i = torch.randint(0, num_steps, (args.batch_size,))
    u = (i + 1).float() / num_steps
    logsnr = logsnr_schedule_cosine(u)
    alpha, sigma = alpha_sigma(logsnr)
    z = alpha * x + sigma * eps
    with torch.no_grad():
        # two DDIM steps of the teacher, t -> t - 1/(2N) -> t - 1/N
        x_pred, eps_pred = teacher(z, logsnr)
        logsnr_mid = logsnr_schedule_cosine(u - 0.5 / num_steps)
        alpha_mid, sigma_mid = alpha_sigma(logsnr_mid)
        z_mid = alpha_mid * x_pred + sigma_mid * eps_pred
        x_pred, eps_pred = teacher(z_mid, logsnr_mid)
        logsnr_s = logsnr_schedule_cosine(u - 1.0 / num_steps)
        alpha_s, sigma_s = alpha_sigma(logsnr_s)
        z_teacher = alpha_s * x_pred + sigma_s * eps_pred
        # the x-target whose single DDIM step from z lands on z_teacher
        stdv_frac = torch.exp(0.5 * (F.softplus(logsnr) - F.softplus(logsnr_s))).unsqueeze(1)
        x_target = (z_teacher - stdv_frac * z) / (alpha_s - stdv_frac * alpha)
        x_target = torch.where((i == 0).unsqueeze(1), x_pred, x_target)
        eps_target = (z - alpha * x_target) / sigma
    model_x, model_eps = student(z, logsnr)
    loss = weighted_loss(model_x, model_eps, x_target, eps_target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"distill {step} loss {loss.item():.4f}")

if args.out:
    torch.save({"denoiser": denoiser.state_dict(), "teacher": teacher.state_dict(),
                "student": student.state_dict()}, args.out)
