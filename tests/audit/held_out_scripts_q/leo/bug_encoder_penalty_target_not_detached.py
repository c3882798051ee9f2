"""Latent embedding optimization (LEO) for few-shot classification at a tiny size, written after
Rusu, Rao, Sygnowski, Vinyals, Pascanu, Osindero and Hadsell, "Meta-Learning with Latent
Embedding Optimization" (ICLR 2019, arXiv:1807.05960): an encoder and a relation network map a
task's training examples to a Gaussian over per-class latent codes, a decoder maps a code to
the weights of a linear classifier, the inner loop adapts the codes by a few gradient steps of
the training loss in latent space and then fine-tunes the decoded weights directly, and the
outer loop meta-trains encoder, relation network, decoder and both inner learning rates on the
validation loss of the adapted classifier, differentiating through the unrolled inner steps.
With google-deepmind/leo (https://github.com/google-deepmind/leo, model.py: LEO.forward_encoder
(encoder without bias, relation_network over all pairs of encoded training examples averaged
over the second, average_codes_per_class, possibly_sample with the KL to a unit Gaussian);
LEO.forward_decoder (decoder, weights sampled with a Glorot offset on the stddev);
LEO.leo_inner_loop (tf.gradients of the training loss in the latents, a step with the learnt
per-latent inner_lr, a decode, repeated; then the encoder penalty, the mean squared error
between the starting latents and tf.stop_gradient of the adapted ones);
LEO.finetuning_inner_loop (steps of the decoded weights with the learnt finetuning_lr);
LEO._build adds kl_weight * KL and encoder_penalty_weight * penalty to the validation loss, and
the decoder's orthogonality penalty; runner.py construct_graph: gradients of the batch-mean loss
in every trainable variable, clipped by value and then by norm, applied by Adam). Here
tf.gradients becomes torch.autograd.grad with create_graph=True, the classifier has one weight
vector per class, there is no dropout and no l2 penalty, the inner learning rate starts at 0.3
rather than 1.0, and the encoder penalty weight is larger than the reference's 1-shot default
so that it matters at this size. The data: few-shot tasks whose classes are Gaussian blobs
around centres drawn from a fixed low-dimensional subspace of the embedding space, made in the
script.
Bug: the encoder penalty's target is the adapted latents as they are, target_latents = latents,
where a fixed target, cut from the graph, is meant (LEO.leo_inner_loop in model.py takes the
mean squared error against tf.stop_gradient(latents)), so the penalty's gradient also flows
back through the unrolled latent steps into the decoder, the inner learning rate and, a second
time, into encoder and relation network: besides pulling the encoder's codes towards their
adapted values it now pushes the inner loop to adapt less."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=30, help="outer (meta-training) steps")
parser.add_argument("--meta-batch", type=int, default=4, help="tasks per outer step")
parser.add_argument("--inner-steps", type=int, default=3, help="latent adaptation steps")
parser.add_argument("--finetune-steps", type=int, default=2, help="weight fine-tuning steps")
parser.add_argument("--out", default=None, help="where to save the meta-trained model")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_way, k_shot, k_val, emb_dim, n_latent = 3, 2, 5, 16, 8
kl_weight, encoder_penalty_weight, ortho_weight = 1e-3, 1e-1, 1e-3
class_basis = torch.randn(emb_dim, 4) / 2.0


def sample_tasks(batch):
    """Few-shot tasks: class centres in a fixed 4-d subspace, examples around them."""
    centres = torch.randn(batch, n_way, 4) @ class_basis.t()
    x = centres.unsqueeze(2) + 0.5 * torch.randn(batch, n_way, k_shot + k_val, emb_dim)
    return x[:, :, :k_shot], x[:, :, k_shot:]


class LEO(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(emb_dim, n_latent, bias=False)
        self.relation = nn.Sequential(
            nn.Linear(2 * n_latent, 2 * n_latent, bias=False), nn.ReLU(),
            nn.Linear(2 * n_latent, 2 * n_latent, bias=False), nn.ReLU(),
            nn.Linear(2 * n_latent, 2 * n_latent, bias=False))
        self.decoder = nn.Linear(n_latent, 2 * emb_dim, bias=False)
        self.inner_lr = nn.Parameter(torch.full((n_latent,), 0.3))
        self.finetune_lr = nn.Parameter(torch.full((emb_dim,), 1e-3))

    @staticmethod
    def sample(params, stddev_offset=0.0):
        mean, raw_std = params.chunk(2, -1)
        std = (raw_std.exp() - (1.0 - stddev_offset)).clamp(min=1e-10)
        sample = mean + std * torch.randn_like(std)
        log_q = torch.distributions.Normal(mean, std).log_prob(sample)
        log_p = torch.distributions.Normal(0.0, 1.0).log_prob(sample)
        return sample, (log_q - log_p).mean()

    def encode(self, tr_x):
        b = tr_x.shape[0]
        codes = self.encoder(tr_x).reshape(b, n_way * k_shot, n_latent)
        pairs = torch.cat([codes.unsqueeze(2).expand(-1, -1, n_way * k_shot, -1),
                           codes.unsqueeze(1).expand(-1, n_way * k_shot, -1, -1)], -1)
        rel = self.relation(pairs).mean(2).reshape(b, n_way, k_shot, 2 * n_latent)
        return self.sample(rel.mean(2))  # one latent per class

    def decode(self, latents):
        offset = math.sqrt(2.0 / (n_way + emb_dim))
        weights, _ = self.sample(self.decoder(latents), stddev_offset=offset)
        return weights


def task_loss(x, weights):
    """Cross-entropy per task of the linear classifier weights (B x N x D) on x (B x N x K x D)."""
    logits = torch.einsum("bnkd,bcd->bnkc", x, weights)
    labels = torch.arange(n_way).view(1, n_way, 1).expand(x.shape[0], -1, x.shape[2])
    loss = F.cross_entropy(logits.reshape(-1, n_way), labels.reshape(-1), reduction="none")
    acc = (logits.argmax(-1) == labels).float().mean()
    return loss.view(x.shape[0], -1).mean(1), acc


def orthogonality(weight):
    w = weight.t()  # n_latent x 2 emb_dim
    norms = w.norm(dim=1, keepdim=True) + 1e-32
    corr = (w @ w.t()) / (norms @ norms.t())
    return (corr - torch.eye(w.shape[0])).pow(2).mean()


leo = LEO()
meta_opt = torch.optim.Adam(leo.parameters(), lr=1e-3)

for step in range(args.steps):
    tr_x, val_x = sample_tasks(args.meta_batch)
    meta_opt.zero_grad()
    # latent adaptation: steps in the space of the codes, through the decoder
    latents, kl = leo.encode(tr_x)
    starting_latents = latents
    tr_loss, _ = task_loss(tr_x, leo.decode(latents))
    for _ in range(args.inner_steps):
        grad_z = torch.autograd.grad(tr_loss.sum(), latents, create_graph=True)[0]
        latents = latents - leo.inner_lr * grad_z
        weights = leo.decode(latents)
        tr_loss, _ = task_loss(tr_x, weights)
    target_latents = latents  # the adapted codes: a fixed target for the encoder
    encoder_penalty = F.mse_loss(starting_latents, target_latents)
    # fine-tuning of the decoded weights themselves
    for _ in range(args.finetune_steps):
        grad_w = torch.autograd.grad(tr_loss.sum(), weights, create_graph=True)[0]
        weights = weights - leo.finetune_lr * grad_w
        tr_loss, _ = task_loss(tr_x, weights)
    val_loss, val_acc = task_loss(val_x, weights)
    meta_loss = (val_loss.mean() + kl_weight * kl + encoder_penalty_weight * encoder_penalty
                 + ortho_weight * orthogonality(leo.decoder.weight))
    meta_loss.backward()
    for p in leo.parameters():
        p.grad.clamp_(-0.1, 0.1)
        torch.nn.utils.clip_grad_norm_([p], 0.1)
    meta_opt.step()
    if step % 10 == 0:
        print(f"step {step} meta loss {meta_loss.item():.4f} val acc {val_acc.item():.3f} "
              f"penalty {encoder_penalty.item():.4f}")

if args.out:
    torch.save({f"leo.{k}": v.detach().clone() for k, v in leo.state_dict().items()}, args.out)
