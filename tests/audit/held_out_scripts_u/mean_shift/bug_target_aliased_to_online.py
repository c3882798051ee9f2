"""Mean Shift self-supervised learning (MSF) of a small MLP encoder on synthetic clustered
vectors, written after Koohpayegani, Tejankar and Pirsiavash, "Mean Shift for Self-Supervised
Learning" (ICCV 2021, arXiv:2105.07269): an online encoder with a projection head and a
prediction head embeds a strongly augmented view (the query), a target encoder, an exponential
moving average of the online encoder that gets no gradient, embeds a second view (the target),
the target is pushed into a memory bank of past target embeddings, and the loss pulls the
normalised query towards the k nearest neighbours of the target in the bank (the target itself
is one of them), as the mean squared distance 2 - 2 <q, b> over those neighbours. With the
authors' code, UMBCvision/MSF (https://github.com/UMBCvision/MSF, train_msf.py: the MeanShift
module builds encoder_q and encoder_t with get_mlp projection heads and a get_mlp predict_q,
copies the query encoder into the target encoder and sets requires_grad False on it;
forward embeds and normalises the query with gradient, then under torch.no_grad() runs
_momentum_update_target_encoder (param_t = m * param_t + (1 - m) * param_q), embeds and
normalises the target, and _dequeue_and_enqueue writes it over the oldest bank entries; the
bank is read as a detached clone, the k nearest neighbours are chosen by the target's distances
dist_t and the loss averages the query's distances dist_q at those indices; main builds SGD over
the parameters that require grad and train calls zero_grad, backward and step), whose steps
this script follows, with m = 0.99 and k = 5. ShuffleBN is left out (one process). The data are
noisy points around eight cluster centres in 16 dimensions, the views are made by noise,
feature dropout and scaling, and the cluster labels are used only for the neighbours' purity.
Bug: the target encoder is the online encoder itself (encoder_t = encoder_q), not a deep copy."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=60)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--momentum", type=float, default=0.99, help="m of the target encoder")
parser.add_argument("--mem-bank-size", type=int, default=256)
parser.add_argument("--topk", type=int, default=5)
parser.add_argument("--out", default=None, help="where to save the encoders and the bank")
args = parser.parse_args()
torch.manual_seed(args.seed)

in_dim, n_clusters, feat_dim, hidden_dim, proj_dim = 16, 8, 32, 64, 16
centres = 2.0 * torch.randn(n_clusters, in_dim)
n_points = 512
labels_all = torch.randint(0, n_clusters, (n_points,))
points_all = centres[labels_all] + 0.5 * torch.randn(n_points, in_dim)


def augment(x):
    """A random view: Gaussian noise, feature dropout and a random per-sample scale."""
    keep = (torch.rand_like(x) > 0.2).float()
    scale = 0.8 + 0.4 * torch.rand(x.shape[0], 1)
    return scale * (x + 0.3 * torch.randn_like(x)) * keep


def get_mlp(inp_dim, hid_dim, out_dim):
    return nn.Sequential(nn.Linear(inp_dim, hid_dim), nn.BatchNorm1d(hid_dim), nn.ReLU(),
                         nn.Linear(hid_dim, out_dim))


# online (query) encoder: backbone followed by the projection head; prediction head on top
backbone = [nn.Linear(in_dim, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, feat_dim)]
encoder_q = nn.Sequential(*backbone, get_mlp(feat_dim, 2 * feat_dim, proj_dim))
predict_q = get_mlp(proj_dim, hidden_dim, proj_dim)
# target encoder: a copy of the online encoder, updated only as its moving average
encoder_t = encoder_q
for param_t in encoder_t.parameters():
    param_t.requires_grad = False

queue = F.normalize(torch.randn(args.mem_bank_size, proj_dim), dim=1)
queue_labels = -torch.ones(args.mem_bank_size, dtype=torch.long)
queue_ptr = 0

optimizer = torch.optim.SGD(list(encoder_q.parameters()) + list(predict_q.parameters()),
                            lr=args.lr, momentum=0.9, weight_decay=1e-4)
encoder_q.train()
predict_q.train()
encoder_t.train()
for step in range(args.steps):
    idx = torch.randint(0, n_points, (args.batch_size,))
    x, labels = points_all[idx], labels_all[idx]
    im_q, im_t = augment(x), augment(x)

    # query: online encoder and predictor, with gradient
    query = F.normalize(predict_q(encoder_q(im_q)), dim=1)

    with torch.no_grad():
        # momentum update of the target encoder
        for param_q, param_t in zip(encoder_q.parameters(), encoder_t.parameters()):
            param_t.data = param_t.data * args.momentum + param_q.data * (1.0 - args.momentum)
        current_target = F.normalize(encoder_t(im_t), dim=1)
        # dequeue and enqueue: the newest targets replace the oldest bank entries
        queue[queue_ptr:queue_ptr + args.batch_size] = current_target
        queue_labels[queue_ptr:queue_ptr + args.batch_size] = labels
        queue_ptr = (queue_ptr + args.batch_size) % args.mem_bank_size

    # mean shift regression loss over the target's k nearest neighbours in the bank
    targets = queue.clone().detach()
    dist_t = 2 - 2 * current_target @ targets.t()
    dist_q = 2 - 2 * query @ targets.t()
    _, nn_index = dist_t.topk(args.topk, dim=1, largest=False)
    nn_dist_q = torch.gather(dist_q, 1, nn_index)
    loss = (nn_dist_q.sum(dim=1) / args.topk).mean()
    purity = (queue_labels[nn_index] == labels.unsqueeze(1)).float().mean()

    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 20 == 0:
        print(f"step {step} loss {loss.item():.4f} purity {purity.item():.3f}")

if args.out:
    torch.save({"encoder_q": encoder_q.state_dict(), "predict_q": predict_q.state_dict(),
                "encoder_t": encoder_t.state_dict(), "queue": queue}, args.out)
