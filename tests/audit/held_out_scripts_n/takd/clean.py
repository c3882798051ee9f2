"""Teacher assistant knowledge distillation at a tiny size, written after Mirzadeh, Farajtabar, Li,
Levine, Matsukawa and Ghasemzadeh, "Improved Knowledge Distillation via Teacher Assistant" (AAAI
2020, arXiv:1902.03393), sections 3-4: a large teacher is trained on the labels, a teacher
assistant of intermediate size is distilled from it, and the small student is distilled from the
assistant, each distillation minimising (1 - lambda) L_SL + lambda T^2 L_KD with the KL divergence
between the softened outputs. With imirzadeh/Teacher-Assistant-Knowledge-Distillation
(https://github.com/imirzadeh/Teacher-Assistant-Knowledge-Distillation, train.py TrainManager:
__init__, an SGD with momentum and weight decay over self.student.parameters() and the teacher
put in eval mode; train, self.optimizer.zero_grad() at the top of each iteration, loss_SL =
criterion(output, target), and with a teacher nn.KLDivLoss()(F.log_softmax(output / T, dim=1),
F.softmax(teacher_outputs / T, dim=1)) mixed by lambda_student; the __main__ block, run once with
the teacher and the assistant as --student and once with the assistant's checkpoint as
--teacher-checkpoint and the student). The three runs are three phases of one script; the
teacher's logits are detached in the KD term (the reference takes them with their graph and never
steps the teacher). Without the learning-rate schedule and the best-checkpoint reload. A
four-class problem over 10 inputs made in the script; MLPs of three widths. As published: clean."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--epochs", type=int, default=8)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--learning-rate", type=float, default=0.1)
parser.add_argument("--momentum", type=float, default=0.9)
parser.add_argument("--weight-decay", type=float, default=1e-4)
parser.add_argument("--T-student", type=float, default=4.0)
parser.add_argument("--lambda-student", type=float, default=0.5)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

in_dim, n_classes, n_train = 10, 4, 256
rule = torch.randn(in_dim, 16), torch.randn(16, n_classes)


def make_data(n):
    x = torch.randn(n, in_dim)
    return x, (torch.tanh(x @ rule[0]) @ rule[1]).argmax(dim=1)


train_x, train_y = make_data(n_train)
test_x, test_y = make_data(512)


def create_model(width):
    return nn.Sequential(nn.Linear(in_dim, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                         nn.Linear(width, n_classes))


def make_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=args.learning_rate, momentum=args.momentum,
                           weight_decay=args.weight_decay)


def train(student, optimizer, teacher=None):
    """TrainManager.train: cross-entropy, plus the KD term when a teacher is given."""
    if teacher is not None:
        teacher.eval()
    T, lambda_ = args.T_student, args.lambda_student
    for epoch in range(args.epochs):
        student.train()
        perm = torch.randperm(n_train)
        for start in range(0, n_train, args.batch_size):
            idx = perm[start:start + args.batch_size]
            data, target = train_x[idx], train_y[idx]
            optimizer.zero_grad()
            output = student(data)
            loss_sl = F.cross_entropy(output, target)
            loss = loss_sl
            if teacher is not None:
                teacher_outputs = teacher(data)
                loss_kd = F.kl_div(F.log_softmax(output / T, dim=1),
                                   F.softmax(teacher_outputs.detach() / T, dim=1),
                                   reduction="batchmean")
                loss = (1 - lambda_) * loss_sl + lambda_ * T * T * loss_kd
            loss.backward()
            optimizer.step()
        print(f"  epoch {epoch} loss {loss.item():.4f} val acc {validate(student):.3f}")


def validate(model):
    model.eval()
    with torch.no_grad():
        return (model(test_x).argmax(dim=1) == test_y).float().mean().item()


# phase 1: the teacher, on the labels alone
teacher = create_model(64)
print("teacher")
train(teacher, make_optimizer(teacher))

# phase 2: the teacher assistant, distilled from the teacher
ta = create_model(24)
ta_optimizer = make_optimizer(ta)
print("teacher assistant")
train(ta, ta_optimizer, teacher=teacher)

# phase 3: the student, distilled from the teacher assistant
student = create_model(8)
student_optimizer = make_optimizer(student)
print("student")
train(student, student_optimizer, teacher=ta)

if args.out:
    weights = {}
    for name, model in (("teacher", teacher), ("ta", ta), ("student", student)):
        weights.update({f"{name}.{k}": v.detach().clone() for k, v in model.state_dict().items()})
    torch.save(weights, args.out)
