"""Neural style transfer at a tiny size, written after Gatys, Ecker and Bethge, "Image Style
Transfer Using Convolutional Neural Networks" (CVPR 2016; the method of arXiv:1508.06576),
sections 2 and 3: a content loss on the feature maps of one layer and a style loss on the Gram
matrices of the feature maps of several layers, minimised over the pixels of the image, with the
PyTorch tutorial pytorch/tutorials (https://github.com/pytorch/tutorials,
advanced_source/neural_style_tutorial.py: ContentLoss and StyleLoss, which keep their targets as
target.detach() and gram_matrix(target_feature).detach(); Normalization;
get_style_model_and_losses, which copies the network's layers into a new nn.Sequential and puts the
loss modules after the chosen convolutions; get_input_optimizer, LBFGS over [input_img] alone;
run_style_transfer, whose closure clamps the image under torch.no_grad(), clears the optimizer and
backpropagates the weighted sum of the losses, with model.requires_grad_(False) on the network).
Two phases: a small convolutional network, standing in for the pretrained VGG, is first trained
briefly as a classifier of striped textures by its own Adam; it is then frozen (eval() and
requires_grad_(False)), the content target (one layer) and the style targets (Gram matrices of three
layers) are computed once from the content and the style images and detached, and the image,
started from a copy of the content image, is optimised by LBFGS, clamped to [0, 1]. Images made in
the script. Saved: the image and the network. Injected bug: the stop-gradient of the style loss is
put on the wrong side: StyleLoss keeps its target as gram_matrix(target_feature) (no graph: the
network is frozen and the style image a constant) and its forward compares gram_matrix(x).detach()
with it, so the style losses give the image no gradient and the image is optimised by the content
loss alone, where the tutorial detaches the target Gram matrix and differentiates the image's."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--pretrain-steps", type=int, default=20)
parser.add_argument("--num-steps", type=int, default=20)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--style-weight", type=float, default=1e3)
parser.add_argument("--content-weight", type=float, default=1.0)
parser.add_argument("--out", default=None, help="where to save the image and the network")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_kinds, size = 4, 20
coords = torch.linspace(-1, 1, size)
yy, xx = torch.meshgrid(coords, coords, indexing="ij")


def stripes(angle, freq, phase, colour):
    wave = 0.5 + 0.5 * torch.sin(freq * (xx * torch.cos(angle) + yy * torch.sin(angle)) + phase)
    return colour.view(3, 1, 1) * wave


def texture_batch(n):
    kinds = torch.randint(0, n_kinds, (n,))
    images = torch.stack([stripes(k * torch.pi / n_kinds, 6 + 2 * torch.rand(()),
                                  6.3 * torch.rand(()), 0.3 + 0.7 * torch.rand(3)) for k in kinds])
    return (images + 0.05 * torch.randn_like(images)).clamp(0, 1), kinds


def gram_matrix(features):
    b, c, h, w = features.shape
    flat = features.view(b * c, h * w)
    return flat @ flat.t() / (b * c * h * w)


class Normalization(nn.Module):
    def __init__(self, mean, std):
        super().__init__()
        self.register_buffer("mean", mean.view(-1, 1, 1))
        self.register_buffer("std", std.view(-1, 1, 1))

    def forward(self, image):
        return (image - self.mean) / self.std


class ContentLoss(nn.Module):
    def __init__(self, target):
        super().__init__()
        self.target = target.detach()
        self.loss = torch.zeros(())

    def forward(self, x):
        self.loss = F.mse_loss(x, self.target)
        return x


class StyleLoss(nn.Module):
    def __init__(self, target_feature):
        super().__init__()
        self.target = gram_matrix(target_feature)
        self.loss = torch.zeros(())

    def forward(self, x):
        self.loss = F.mse_loss(gram_matrix(x).detach(), self.target)
        return x


def build_model(cnn, normalization, style_img, content_img, content_layers, style_layers):
    """The network's layers copied into a new Sequential, a loss module after each chosen conv."""
    model, content_losses, style_losses, i = nn.Sequential(normalization), [], [], 0
    for layer in cnn.children():
        if isinstance(layer, nn.Conv2d):
            i += 1
            name = f"conv_{i}"
        elif isinstance(layer, nn.ReLU):
            name, layer = f"relu_{i}", nn.ReLU(inplace=False)
        else:
            name = f"pool_{i}"
        model.add_module(name, layer)
        if name in content_layers:
            content_losses.append(ContentLoss(model(content_img)))
            model.add_module(f"content_loss_{i}", content_losses[-1])
        if name in style_layers:
            style_losses.append(StyleLoss(model(style_img)))
            model.add_module(f"style_loss_{i}", style_losses[-1])
    return model, content_losses, style_losses


cnn = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 16, 3, padding=1),
                    nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU())
head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, n_kinds))
normalization = Normalization(torch.full((3,), 0.4), torch.full((3,), 0.3))

# phase 1: the feature network trained briefly as a texture classifier (the stand-in for VGG)
pretrain_optimizer = torch.optim.Adam([*cnn.parameters(), *head.parameters()], lr=1e-2)
for step in range(args.pretrain_steps):
    images, kinds = texture_batch(args.batch_size)
    loss = F.cross_entropy(head(cnn(normalization(images))), kinds)
    pretrain_optimizer.zero_grad()
    loss.backward()
    pretrain_optimizer.step()
    print(f"pretrain step {step} loss {loss.item():.4f}")

# phase 2: the network frozen, the image optimised against the detached targets
cnn.eval()
cnn.requires_grad_(False)
content_img = (0.2 + 0.6 * ((xx ** 2 + yy ** 2) < 0.4).float() * torch.stack([xx, yy, -xx]).abs())
content_img = content_img.unsqueeze(0).clamp(0, 1)
style_img = stripes(torch.tensor(0.8), torch.tensor(9.0), torch.tensor(0.0),
                    torch.tensor([0.9, 0.5, 0.1])).unsqueeze(0)
model, content_losses, style_losses = build_model(cnn, normalization, style_img, content_img,
                                                  ["conv_3"], ["conv_1", "conv_2", "conv_3"])
input_img = content_img.clone()
input_img.requires_grad_(True)
optimizer = torch.optim.LBFGS([input_img])
run = [0]
while run[0] < args.num_steps:

    def closure():
        with torch.no_grad():
            input_img.clamp_(0, 1)
        optimizer.zero_grad()
        model(input_img)
        style_score = sum(sl.loss for sl in style_losses)
        content_score = sum(cl.loss for cl in content_losses)
        loss = args.style_weight * style_score + args.content_weight * content_score
        loss.backward()
        run[0] += 1
        print(f"run {run[0]} style {style_score.item():.6f} content {content_score.item():.6f}")
        return loss

    optimizer.step(closure)
with torch.no_grad():
    input_img.clamp_(0, 1)

if args.out:
    torch.save({"image": input_img.detach(), "cnn": cnn.state_dict(),
                "head": head.state_dict()}, args.out)
