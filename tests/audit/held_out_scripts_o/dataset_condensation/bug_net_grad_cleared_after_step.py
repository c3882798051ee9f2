"""Dataset condensation with gradient matching at a tiny size, written after Zhao, Mopuri and
Bilen, "Dataset Condensation with Gradient Matching" (ICLR 2021, arXiv:2006.05929), algorithm 1:
a small synthetic set S is learnt so that, for networks drawn at random and trained on S, the
gradient of the training loss on S matches, class by class, the gradient on a real batch of the
same class. With VICO-UoE/DatasetCondensation (https://github.com/VICO-UoE/DatasetCondensation,
main.py: image_syn a leaf tensor made with requires_grad=True and stepped by optimizer_img, an
SGD with momentum 0.5 built once; at the iterations of eval_it_pool a fresh network trained by
evaluate_synset on copy.deepcopy(image_syn.detach()); every iteration a new random network from
get_network with an optimizer_net of its own; in each outer loop the real gradient
gw_real = torch.autograd.grad(loss_real, net_parameters), detached and cloned, the synthetic
gradient gw_syn taken with create_graph=True, optimizer_img.zero_grad() just before
loss.backward() of the summed match_loss; then the network trained for inner_loop epochs on
copy.deepcopy(image_syn.detach()); utils.py: distance_wb, the sum over output rows of
1 - cosine, zero for biases, and epoch, with optimizer.zero_grad() before each loss.backward()).
Four classes of one-channel 6x6 images made in the script from class templates and noise; an
MLP for the network.
Bug: epoch clears the gradients after optimizer.step() instead of before loss.backward() (the
reference's utils.epoch calls optimizer.zero_grad() just before loss.backward()), so the gradient
that the match loss's backward leaves in the network's .grad, through gw_syn taken with
create_graph=True, is still there at the first inner step of every outer loop: the network is
stepped on its cross-entropy on the synthetic set plus the gradient of the match loss with
respect to its weights, and the next matching step reads that network."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iterations", type=int, default=4)
parser.add_argument("--eval-every", type=int, default=2)
parser.add_argument("--ipc", type=int, default=2, help="synthetic images per class")
parser.add_argument("--outer-loop", type=int, default=3)
parser.add_argument("--inner-loop", type=int, default=2)
parser.add_argument("--batch-real", type=int, default=16)
parser.add_argument("--batch-train", type=int, default=4)
parser.add_argument("--epoch-eval-train", type=int, default=5)
parser.add_argument("--lr-img", type=float, default=0.1)
parser.add_argument("--lr-net", type=float, default=0.01)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

num_classes, channel, im_size, n_per_class = 4, 1, 6, 64
templates = torch.randn(num_classes, channel, im_size, im_size)


def make_real(n):
    images = torch.cat([templates[c] + 0.8 * torch.randn(n, channel, im_size, im_size)
                        for c in range(num_classes)])
    return images, torch.arange(num_classes).repeat_interleave(n)


images_all, labels_all = make_real(n_per_class)
images_test, labels_test = make_real(32)
indices_class = [torch.nonzero(labels_all == c).flatten() for c in range(num_classes)]
eval_it_pool = list(range(args.eval_every, args.iterations + 1, args.eval_every))


def get_images(c, n):
    """n random real images of class c."""
    return images_all[indices_class[c][torch.randperm(len(indices_class[c]))[:n]]]


def get_network():
    return nn.Sequential(nn.Flatten(), nn.Linear(channel * im_size * im_size, 32), nn.ReLU(),
                         nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, num_classes))


def distance_wb(gwr, gws):
    if gwr.dim() == 1:  # biases are not matched
        return torch.tensor(0.0)
    return torch.sum(1 - torch.sum(gwr * gws, dim=-1)
                     / (gwr.norm(dim=-1) * gws.norm(dim=-1) + 0.000001))


def match_loss(gw_syn, gw_real):
    dis = torch.tensor(0.0)
    for gws, gwr in zip(gw_syn, gw_real):
        dis = dis + distance_wb(gwr, gws)
    return dis


def epoch(net, optimizer, images, labels):
    perm = torch.randperm(len(labels))
    for start in range(0, len(labels), args.batch_train):
        idx = perm[start:start + args.batch_train]
        loss = F.cross_entropy(net(images[idx]), labels[idx])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return loss.item()


def evaluate_synset(net, images_train, labels_train):
    optimizer = torch.optim.SGD(net.parameters(), lr=args.lr_net, momentum=0.9, weight_decay=5e-4)
    for _ in range(args.epoch_eval_train):
        epoch(net, optimizer, images_train, labels_train)
    with torch.no_grad():
        return (net(images_test).argmax(1) == labels_test).float().mean().item()


image_syn = torch.randn(num_classes * args.ipc, channel, im_size, im_size, requires_grad=True)
label_syn = torch.arange(num_classes).repeat_interleave(args.ipc)
optimizer_img = torch.optim.SGD([image_syn], lr=args.lr_img, momentum=0.5)
optimizer_img.zero_grad()

for it in range(args.iterations + 1):
    if it in eval_it_pool:
        net_eval = get_network()
        image_syn_eval, label_syn_eval = copy.deepcopy(image_syn.detach()), copy.deepcopy(label_syn)
        acc = evaluate_synset(net_eval, image_syn_eval, label_syn_eval)
        print(f"it {it} evaluation accuracy {acc:.3f}")
    if it == args.iterations:
        break

    net = get_network()
    net.train()
    net_parameters = list(net.parameters())
    optimizer_net = torch.optim.SGD(net.parameters(), lr=args.lr_net, momentum=0.5)
    optimizer_net.zero_grad()
    loss_avg = 0.0
    for ol in range(args.outer_loop):
        # update the synthetic data: match the gradients of every class
        loss = torch.tensor(0.0)
        for c in range(num_classes):
            img_real = get_images(c, args.batch_real)
            lab_real = torch.full((len(img_real),), c)
            loss_real = F.cross_entropy(net(img_real), lab_real)
            gw_real = torch.autograd.grad(loss_real, net_parameters)
            gw_real = [g.detach().clone() for g in gw_real]
            img_syn = image_syn[c * args.ipc:(c + 1) * args.ipc]
            lab_syn = torch.full((args.ipc,), c)
            loss_syn = F.cross_entropy(net(img_syn), lab_syn)
            gw_syn = torch.autograd.grad(loss_syn, net_parameters, create_graph=True)
            loss = loss + match_loss(gw_syn, gw_real)
        optimizer_img.zero_grad()
        loss.backward()
        optimizer_img.step()
        loss_avg += loss.item()
        if ol == args.outer_loop - 1:
            break

        # update the network on the synthetic data, without its graph
        image_syn_train, label_syn_train = copy.deepcopy(image_syn.detach()), label_syn.clone()
        for il in range(args.inner_loop):
            epoch(net, optimizer_net, image_syn_train, label_syn_train)
    print(f"it {it} match loss {loss_avg / (num_classes * args.outer_loop):.4f}")

if args.out:
    torch.save({"image_syn": image_syn.detach().clone(),
                **{f"net.{k}": v for k, v in net.state_dict().items()},
                **{f"net_eval.{k}": v for k, v in net_eval.state_dict().items()}},
               args.out)
