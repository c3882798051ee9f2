"""iBOT, self-distillation with an online tokenizer, of a tiny vision transformer on synthetic
patch sequences, written after Zhou, Wei, Wang, Shen, Xie, Yuille and Kong, "iBOT: Image BERT
Pre-Training with Online Tokenizer" (ICLR 2022, arXiv:2111.07832): a student network sees two
augmented views with some patches replaced by a learnt [MASK] embedding, a teacher network, an
exponential moving average of the student, sees the same views unmasked and serves as the
online tokenizer; the student is trained on the cross-entropy between the teacher's and its own
[CLS] distributions across views (the DINO term) plus, on the masked patches of each view, the
cross-entropy between the teacher's patch distributions and the student's (masked image
modelling), the teacher's outputs centred by running means and sharpened by a low temperature,
and not differentiated. With the authors' code, bytedance/ibot (https://github.com/bytedance/ibot,
main_ibot.py: train_ibot builds student and teacher separately, loads the student's weights into
the teacher and sets requires_grad = False on all the teacher's parameters, and builds AdamW
over utils.get_params_groups(student), which skips frozen parameters and exempts biases and norms
from weight decay; train_one_epoch runs the teacher on the global views, the student on the same
views with their masks, iBOTLoss, then optimizer.zero_grad(), loss.backward(), per-parameter
gradient clipping, utils.cancel_gradients_last_layer during the first freeze_last_layer epochs,
optimizer.step(), and the teacher's EMA update param_k.mul_(m).add_((1 - m) * param_q) under
torch.no_grad(); iBOTLoss.forward takes softmax((teacher - center) / temp) and
softmax((teacher_patch - center2) / temp2), detached, the [CLS] loss over pairs of different
views and the patch loss over the masked tokens of the same view, averaged with weights lambda1
and lambda2, and update_center, under torch.no_grad(), moves center and center2 towards the
teacher's batch means with momentum 0.9; models/vision_transformer.py
VisionTransformer.prepare_tokens calls mask_model, which writes the learnt masked_embed
parameter into the masked patch embeddings; the teacher temperatures warm up linearly and the
EMA momentum follows a cosine schedule to 1). Here the views are two noisy rescalings of a
sequence of nine six-dimensional patches drawn around one of four prototypes, the masks mask a
random 10-50 % of each view's patches, there are no local crops, the mask token is written with
torch.where, and the transformer has one block; the head, as iBOTHead with shared_head off, has
an MLP, L2 normalisation and separate last layers for [CLS] and patch tokens.
Bug: optimizer.zero_grad() is called once per epoch, at the top of the epoch loop, instead of
before each backward as train_one_epoch does: from the second iteration of every epoch each
backward adds its gradient to those of all the earlier iterations of the epoch, so the per-
parameter clipping and AdamW act on a running sum of stale gradients from student weights that
no longer exist; only the last layers, whose gradients cancel_gradients_last_layer sets to None
in the first epoch, escape the pile-up there."""

import argparse
import copy
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--epochs", type=int, default=6)
parser.add_argument("--iters-per-epoch", type=int, default=8)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--lr", type=float, default=2e-3)
parser.add_argument("--weight-decay", type=float, default=0.04)
parser.add_argument("--momentum-teacher", type=float, default=0.99)
parser.add_argument("--student-temp", type=float, default=0.1)
parser.add_argument("--warmup-teacher-temp", type=float, default=0.04)
parser.add_argument("--teacher-temp", type=float, default=0.07)
parser.add_argument("--warmup-teacher-temp-epochs", type=int, default=3)
parser.add_argument("--center-momentum", type=float, default=0.9)
parser.add_argument("--lambda1", type=float, default=1.0, help="weight of the [CLS] loss")
parser.add_argument("--lambda2", type=float, default=1.0, help="weight of the patch loss")
parser.add_argument("--clip-grad", type=float, default=3.0)
parser.add_argument("--freeze-last-layer", type=int, default=1)
parser.add_argument("--out", default=None, help="where to save student, teacher and centres")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_patches, patch_dim, embed_dim, out_dim, patch_out_dim = 9, 6, 16, 32, 32
n_train = 512
prototypes = torch.randn(4, n_patches, patch_dim)
images_all = prototypes[torch.randint(0, 4, (n_train,))] + 0.5 * torch.randn(n_train, n_patches,
                                                                              patch_dim)


def augment(x):
    gain = 0.8 + 0.4 * torch.rand(x.shape[0], 1, 1)
    return gain * x + 0.3 * torch.randn_like(x)


def random_masks(batch):
    ratio = 0.1 + 0.4 * torch.rand(batch, 1)
    return torch.rand(batch, n_patches) < ratio


class TinyViT(nn.Module):
    def __init__(self):
        super().__init__()
        self.patch_embed = nn.Linear(patch_dim, embed_dim)
        self.cls_token = nn.Parameter(0.02 * torch.randn(1, 1, embed_dim))
        self.pos_embed = nn.Parameter(0.02 * torch.randn(1, n_patches + 1, embed_dim))
        self.masked_embed = nn.Parameter(torch.zeros(1, embed_dim))
        self.norm1 = nn.LayerNorm(embed_dim)
        self.attn = nn.MultiheadAttention(embed_dim, 2, batch_first=True)
        self.norm2 = nn.LayerNorm(embed_dim)
        self.mlp = nn.Sequential(nn.Linear(embed_dim, 2 * embed_dim), nn.GELU(),
                                 nn.Linear(2 * embed_dim, embed_dim))
        self.norm = nn.LayerNorm(embed_dim)

    def forward(self, x, mask=None):
        tokens = self.patch_embed(x)
        if mask is not None:
            tokens = torch.where(mask.unsqueeze(-1), self.masked_embed, tokens)
        tokens = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), tokens], 1)
        tokens = tokens + self.pos_embed
        h = self.norm1(tokens)
        tokens = tokens + self.attn(h, h, h, need_weights=False)[0]
        tokens = tokens + self.mlp(self.norm2(tokens))
        return self.norm(tokens)


class IBOTHead(nn.Module):
    def __init__(self, bottleneck=16):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(embed_dim, 32), nn.GELU(), nn.Linear(32, bottleneck))
        self.last_layer = nn.Linear(bottleneck, out_dim, bias=False)
        self.last_layer2 = nn.Linear(bottleneck, patch_out_dim, bias=False)

    def forward(self, tokens):
        z = F.normalize(self.mlp(tokens), dim=-1)
        return self.last_layer(z[:, 0]), self.last_layer2(z[:, 1:])


def ibot_loss(student_cls, student_patch, teacher_cls, teacher_patch, masks, temp, temp2):
    """[CLS] loss across views and patch loss on the masked tokens of the same view."""
    s_cls = (student_cls / args.student_temp).chunk(2)
    s_patch = (student_patch / args.student_temp).chunk(2)
    t_cls = F.softmax((teacher_cls - center) / temp, dim=-1).detach().chunk(2)
    t_patch = F.softmax((teacher_patch - center2) / temp2, dim=-1).detach().chunk(2)
    m = masks.float().chunk(2)
    loss_cls, loss_patch = 0.0, 0.0
    for q in range(2):
        for v in range(2):
            if v == q:
                per_token = torch.sum(-t_patch[q] * F.log_softmax(s_patch[v], dim=-1), dim=-1)
                per_image = (per_token * m[v]).sum(-1) / m[v].sum(-1).clamp(min=1.0)
                loss_patch = loss_patch + per_image.mean()
            else:
                loss_cls = loss_cls + torch.sum(-t_cls[q] * F.log_softmax(s_cls[v], dim=-1),
                                                dim=-1).mean()
    return args.lambda1 * loss_cls / 2, args.lambda2 * loss_patch / 2


student_backbone, student_head = TinyViT(), IBOTHead()
teacher_backbone = copy.deepcopy(student_backbone)
teacher_head = copy.deepcopy(student_head)
for p in list(teacher_backbone.parameters()) + list(teacher_head.parameters()):
    p.requires_grad = False
center = torch.zeros(1, out_dim)
center2 = torch.zeros(1, 1, patch_out_dim)

student_params = [(n, p) for module in (student_backbone, student_head)
                  for n, p in module.named_parameters() if p.requires_grad]
regularized = [p for n, p in student_params if not n.endswith(".bias") and p.ndim > 1]
not_regularized = [p for n, p in student_params if n.endswith(".bias") or p.ndim <= 1]
optimizer = torch.optim.AdamW([{"params": regularized, "weight_decay": args.weight_decay},
                               {"params": not_regularized, "weight_decay": 0.0}], lr=args.lr)

total_iters = args.epochs * args.iters_per_epoch
for epoch in range(args.epochs):
    optimizer.zero_grad()
    frac = min(epoch / args.warmup_teacher_temp_epochs, 1.0)
    temp = args.warmup_teacher_temp + frac * (args.teacher_temp - args.warmup_teacher_temp)
    for it in range(args.iters_per_epoch):
        global_it = epoch * args.iters_per_epoch + it
        idx = torch.randint(0, n_train, (args.batch_size,))
        views = torch.cat([augment(images_all[idx]), augment(images_all[idx])])
        masks = random_masks(2 * args.batch_size)
        teacher_cls, teacher_patch = teacher_head(teacher_backbone(views))
        student_cls, student_patch = student_head(student_backbone(views, mask=masks))
        loss_cls, loss_patch = ibot_loss(student_cls, student_patch, teacher_cls, teacher_patch,
                                         masks, temp, temp)
        loss = loss_cls + loss_patch

        loss.backward()
        for _, p in student_params:
            if p.grad is not None:
                nn.utils.clip_grad_norm_([p], args.clip_grad)
        if epoch < args.freeze_last_layer:
            for n, p in student_head.named_parameters():
                if "last_layer" in n:
                    p.grad = None
        optimizer.step()

        # EMA update of the teacher and of the centres
        m = 1 - (1 - args.momentum_teacher) * (math.cos(math.pi * global_it / total_iters) + 1) / 2
        with torch.no_grad():
            for student_part, teacher_part in ((student_backbone, teacher_backbone),
                                               (student_head, teacher_head)):
                for p_s, p_t in zip(student_part.parameters(), teacher_part.parameters()):
                    p_t.mul_(m).add_(p_s.detach(), alpha=1 - m)
            center = (args.center_momentum * center
                      + (1 - args.center_momentum) * teacher_cls.mean(0, keepdim=True))
            center2 = (args.center_momentum * center2 + (1 - args.center_momentum)
                       * teacher_patch.mean(1).mean(0, keepdim=True).unsqueeze(1))
    print(f"epoch {epoch} loss cls {loss_cls.item():.4f} patch {loss_patch.item():.4f}"
          f" temp {temp:.3f} momentum {m:.4f}")

if args.out:
    torch.save({"student_backbone": student_backbone.state_dict(),
                "student_head": student_head.state_dict(),
                "teacher_backbone": teacher_backbone.state_dict(),
                "teacher_head": teacher_head.state_dict(),
                "center": center, "center2": center2}, args.out)
