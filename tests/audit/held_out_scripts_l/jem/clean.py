"""Joint energy-based model training at a tiny size, written after Grathwohl, Wang, Jacobsen,
Duvenaud, Norouzi and Swersky, "Your Classifier is Secretly an Energy Based Model and You Should
Treat it Like One" (ICLR 2020, arXiv:1912.03263), section 4 and algorithm 1, with wgrathwohl/JEM
(https://github.com/wgrathwohl/JEM, train_wrn_ebm.py: class F with its backbone f.f and its head
f.class_output, CCF.forward, which returns logsumexp of the logits as -E(x); get_sample_q's
sample_p_0, which draws the chain's starts from the replay buffer and re-initialises a fraction
reinit_freq of them uniformly, and sample_q, whose SGLD steps x += sgld_lr * dlogsumexp/dx +
sgld_std * noise and which stores x_k.detach() back into the buffer; main, where
L = -(f(x_data).mean() - f(x_q).mean()) + cross_entropy(f.classify(x_lab), y_lab)) and the SGLD
sampler of phlippe/uvadlc_notebooks (https://github.com/phlippe/uvadlc_notebooks,
docs/tutorial_notebooks/tutorial8/Deep_Energy_Models.ipynb, Sampler.generate_samples, which takes
the input gradient by a backward of the energy with every parameter of the model set to
requires_grad = False during the chain and set back to True after it). The chain's sample is cut
after every Langevin step and when it is stored, so the samples are constants of the model's loss;
the one Adam over the whole model is cleared at the top of each iteration. Points of four classes
in the plane, made in the script. As published: clean."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=20)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--buffer-size", type=int, default=256)
parser.add_argument("--n-sgld-steps", type=int, default=8)
parser.add_argument("--sgld-lr", type=float, default=1.0)
parser.add_argument("--sgld-std", type=float, default=0.01)
parser.add_argument("--reinit-freq", type=float, default=0.05)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_classes, dim, hidden_dim = 4, 2, 32
centres = torch.tensor([[0.5, 0.5], [-0.5, 0.5], [-0.5, -0.5], [0.5, -0.5]])
labels = torch.randint(0, n_classes, (512,))
data = centres[labels] + 0.15 * torch.randn(512, dim)


class CCF(nn.Module):
    """A classifier whose logsumexp of the logits is the negative energy -E(x)."""

    def __init__(self):
        super().__init__()
        self.f = nn.Sequential(nn.Linear(dim, hidden_dim), nn.SiLU(),
                               nn.Linear(hidden_dim, hidden_dim), nn.SiLU())
        self.class_output = nn.Linear(hidden_dim, n_classes)

    def classify(self, x):
        return self.class_output(self.f(x))

    def forward(self, x):
        return self.classify(x).logsumexp(1)


def init_random(n):
    return 2 * torch.rand(n, dim) - 1


def sample_p_0(buffer, n):
    inds = torch.randint(0, len(buffer), (n,))
    choose_random = (torch.rand(n) < args.reinit_freq).float()[:, None]
    return choose_random * init_random(n) + (1 - choose_random) * buffer[inds], inds


def sample_q(f, buffer, n):
    """Short-run SGLD from the replay buffer; the final samples are written back."""
    x_k, inds = sample_p_0(buffer, n)
    f.eval()
    f.requires_grad_(False)
    x_k = x_k.requires_grad_(True)
    for _ in range(args.n_sgld_steps):
        f(x_k).sum().backward()
        x_k = x_k + args.sgld_lr * x_k.grad + args.sgld_std * torch.randn_like(x_k)
        x_k = x_k.detach().requires_grad_(True)
    f.requires_grad_(True)
    f.train()
    final_samples = x_k.detach()
    buffer[inds] = final_samples
    return final_samples


f = CCF()
replay_buffer = init_random(args.buffer_size)
optimizer = torch.optim.Adam(f.parameters(), lr=args.lr)
for step in range(args.steps):
    optimizer.zero_grad()
    idx = torch.randint(0, len(data), (args.batch_size,))
    x_p_d, x_lab, y_lab = data[idx], data[idx], labels[idx]
    x_q = sample_q(f, replay_buffer, args.batch_size)
    fp = f(x_p_d).mean()
    fq = f(x_q).mean()
    l_p_x = -(fp - fq)
    l_p_y_given_x = F.cross_entropy(f.classify(x_lab), y_lab)
    loss = l_p_x + l_p_y_given_x
    loss.backward()
    optimizer.step()
    print(f"step {step} f(x_p_d) {fp.item():.4f} f(x_q) {fq.item():.4f} "
          f"ce {l_p_y_given_x.item():.4f}")

with torch.no_grad():
    accuracy = (f.classify(data).argmax(1) == labels).float().mean()
print(f"train accuracy {accuracy.item():.3f}")

if args.out:
    torch.save({k: v.detach().clone() for k, v in f.state_dict().items()}, args.out)
