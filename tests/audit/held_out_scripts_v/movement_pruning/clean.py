"""Movement pruning of a small MLP classifier with a top-k mask on learned importance scores and
distillation from the dense model, written after Sanh, Wolf and Rush, "Movement Pruning: Adaptive
Sparsity by Fine-Tuning" (NeurIPS 2020, arXiv:2005.07683): every pruned weight matrix W gets a
score matrix S of the same shape, the layer computes with W * M where the mask M = Top_v(S) keeps
the v% highest scores, and the scores are learned through a straight-through estimator of the
mask, dL/dS = dL/dM = (dL/dW') * W, so that weights moving away from zero gain score and weights
moving towards zero lose it; the kept fraction v follows a cubic schedule from 100% (after a
warm-up without pruning) down to the final sparsity, and the fine-pruned student is also distilled
from a fine-tuned dense teacher. With the authors' code, huggingface/transformers
examples/research_projects/movement-pruning (https://github.com/huggingface/transformers,
emmental/modules/binarizer.py TopKBinarizer: an autograd Function whose forward sorts the scores
and sets the top threshold-fraction to 1 and the rest to 0 and whose backward returns the incoming
gradient unchanged; emmental/modules/masked_nn.py MaskedLinear: mask_scores = nn.Parameter of the
weight's shape, initialised constant (mask_scale 0), forward F.linear(input, mask * weight, bias)
with mask = TopKBinarizer.apply(mask_scores, threshold); masked_run_glue.py: schedule_threshold,
threshold 1.0 for initial_warmup * warmup_steps steps, then final + (initial - final) * (1 -
progress)^3, then final for the last final_warmup * warmup_steps steps; train: AdamW over three
groups, the "mask_score" parameters with mask_scores_learning_rate and the others with
learning_rate and weight decay except biases; the teacher's logits under torch.no_grad(), loss =
alpha_distil * T^2 * KL(softmax(teacher / T) || log_softmax(student / T)) + alpha_ce * CE, then
loss.backward(), optimizer.step(), model.zero_grad()), whose steps this script follows (without
the learning-rate schedule). Two phases: a dense MLP is fine-tuned on the task (it stands for the
fine-tuned BERT teacher and, here, for the pre-trained weights the student starts from), then a
student with masked hidden layers copied from it is fine-pruned to 15% of the hidden weights,
the classifier head staying dense as in masked BERT. The data are 32-D Gaussians, 4 classes.
As published: clean."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--teacher-steps", type=int, default=120)
parser.add_argument("--prune-steps", type=int, default=160)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--warmup-steps", type=int, default=20)
parser.add_argument("--initial-warmup", type=int, default=1)
parser.add_argument("--final-warmup", type=int, default=2)
parser.add_argument("--initial-threshold", type=float, default=1.0)
parser.add_argument("--final-threshold", type=float, default=0.15, help="fraction of weights kept")
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--mask-scores-lr", type=float, default=1e-2)
parser.add_argument("--temperature", type=float, default=2.0)
parser.add_argument("--alpha-distil", type=float, default=0.5)
parser.add_argument("--alpha-ce", type=float, default=0.5)
parser.add_argument("--out", default=None, help="where to save the teacher and the pruned student")
args = parser.parse_args()
torch.manual_seed(args.seed)

n, x_dim, n_classes, hidden = 1024, 32, 4, 64

# synthetic data: labels from a random network that reads only 8 of the 32 inputs
x_all = torch.randn(n, x_dim)
label_net = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, n_classes))
with torch.no_grad():
    y_all = label_net(x_all[:, :8]).argmax(1)


class TopKBinarizer(torch.autograd.Function):
    """Mask of the top `keep` fraction of the scores; straight-through gradient to the scores."""

    @staticmethod
    def forward(ctx, scores, keep):
        order = torch.argsort(scores.flatten(), descending=True, stable=True)
        mask = torch.zeros(scores.numel(), dtype=scores.dtype)
        mask[order[:int(keep * scores.numel())]] = 1.0
        return mask.view_as(scores)

    @staticmethod
    def backward(ctx, grad_mask):
        return grad_mask, None


class MaskedLinear(nn.Linear):
    def __init__(self, in_features, out_features, mask_scale=0.0):
        super().__init__(in_features, out_features)
        self.mask_scores = nn.Parameter(torch.full_like(self.weight, mask_scale))

    def forward(self, x, threshold):
        mask = TopKBinarizer.apply(self.mask_scores, threshold)
        return F.linear(x, mask * self.weight, self.bias)


def masked_from_dense(linear):
    masked = MaskedLinear(linear.in_features, linear.out_features)
    masked.weight.data.copy_(linear.weight.data)
    masked.bias.data.copy_(linear.bias.data)
    return masked


class DenseNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(x_dim, hidden), nn.Linear(hidden, hidden)
        self.classifier = nn.Linear(hidden, n_classes)

    def forward(self, x):
        return self.classifier(F.relu(self.fc2(F.relu(self.fc1(x)))))


class MaskedNet(nn.Module):
    def __init__(self, dense):
        super().__init__()
        self.fc1, self.fc2 = masked_from_dense(dense.fc1), masked_from_dense(dense.fc2)
        self.classifier = nn.Linear(hidden, n_classes)
        self.classifier.load_state_dict(dense.classifier.state_dict())

    def forward(self, x, threshold):
        return self.classifier(F.relu(self.fc2(F.relu(self.fc1(x, threshold)), threshold)))


def schedule_threshold(step, total_step):
    initial_steps = args.initial_warmup * args.warmup_steps
    final_steps = args.final_warmup * args.warmup_steps
    if step <= initial_steps:
        return args.initial_threshold
    if step > total_step - final_steps:
        return args.final_threshold
    progress = (step - initial_steps) / (total_step - initial_steps - final_steps)
    return args.final_threshold + (args.initial_threshold - args.final_threshold) * (1 - progress) ** 3


# phase 1: fine-tune the dense model (the teacher)
teacher = DenseNet()
teacher_optimizer = torch.optim.AdamW(teacher.parameters(), lr=1e-2, weight_decay=0.0)
for step in range(args.teacher_steps):
    idx = torch.randint(0, n, (args.batch_size,))
    teacher_loss = F.cross_entropy(teacher(x_all[idx]), y_all[idx])
    teacher_optimizer.zero_grad()
    teacher_loss.backward()
    teacher_optimizer.step()
    if step % 50 == 0:
        print(f"teacher {step} loss {teacher_loss.item():.4f}")

# phase 2: movement pruning of a masked copy, distilled from the teacher
student = MaskedNet(teacher)
optimizer = torch.optim.AdamW([
    {"params": [p for name, p in student.named_parameters() if "mask_scores" in name],
     "lr": args.mask_scores_lr, "weight_decay": 0.0},
    {"params": [p for name, p in student.named_parameters()
                if "mask_scores" not in name and not name.endswith("bias")],
     "lr": args.lr, "weight_decay": 0.01},
    {"params": [p for name, p in student.named_parameters()
                if "mask_scores" not in name and name.endswith("bias")],
     "lr": args.lr, "weight_decay": 0.0},
])
for step in range(args.prune_steps):
    threshold = schedule_threshold(step, args.prune_steps)
    idx = torch.randint(0, n, (args.batch_size,))
    x, y = x_all[idx], y_all[idx]
    logits_stu = student(x, threshold)
    with torch.no_grad():
        logits_tea = teacher(x)
    loss_logits = F.kl_div(F.log_softmax(logits_stu / args.temperature, dim=-1),
                           F.softmax(logits_tea / args.temperature, dim=-1),
                           reduction="batchmean") * args.temperature ** 2
    loss = args.alpha_distil * loss_logits + args.alpha_ce * F.cross_entropy(logits_stu, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 50 == 0:
        acc = (logits_stu.argmax(1) == y).float().mean().item()
        print(f"prune {step} keep {threshold:.3f} loss {loss.item():.4f} acc {acc:.3f}")

if args.out:
    torch.save({"teacher": teacher.state_dict(), "student": student.state_dict()}, args.out)
