"""Policy distillation at a tiny size, written after Rusu et al., "Policy Distillation"
(arXiv:1511.06295), section 4: a teacher Q-network, then a smaller student trained on states
the teacher visits with the KL loss ``sum softmax(q_T / tau) * log(softmax(q_T / tau) /
softmax(q_S))``, the teacher's Q-values computed under ``torch.no_grad()``. The teacher learns
by semi-gradient Q-iteration with a target network, its bootstrapped target under
``torch.no_grad()`` as in the PyTorch DQN tutorial (pytorch/tutorials
intermediate_source/reinforcement_q_learning.py). The environment (a walk on seven cells,
reward at the right end) lives in the script. Two phases: the teacher's loop, then the
student's. As published: clean."""

import argparse
import random

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--teacher-steps", type=int, default=40)
parser.add_argument("--student-steps", type=int, default=30)
parser.add_argument("--gamma", type=float, default=0.9)
parser.add_argument("--tau", type=float, default=0.1)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
random.seed(args.seed)
torch.manual_seed(args.seed)

n_states = 7
states = torch.eye(n_states)


def transition(s, a):
    s2 = min(n_states - 1, s + 1) if a == 1 else max(0, s - 1)
    return s2, float(s2 == n_states - 1), s2 == n_states - 1


teacher = nn.Sequential(nn.Linear(n_states, 64), nn.ReLU(), nn.Linear(64, 2))
target_net = nn.Sequential(nn.Linear(n_states, 64), nn.ReLU(), nn.Linear(64, 2))
target_net.load_state_dict(teacher.state_dict())
teacher_optimizer = torch.optim.Adam(teacher.parameters(), lr=5e-3)
pairs = [(s, a) for s in range(n_states - 1) for a in range(2)]
for step in range(args.teacher_steps):
    batch = random.sample(pairs, 8)
    s = torch.tensor([p[0] for p in batch])
    a = torch.tensor([p[1] for p in batch])
    s2, r, done = (torch.tensor(x, dtype=torch.float32) for x in zip(*(transition(*p)
                                                                        for p in batch)))
    with torch.no_grad():
        target = r + args.gamma * target_net(states[s2.long()]).max(1).values * (1 - done)
    q = teacher(states[s]).gather(1, a[:, None]).squeeze(1)
    loss = F.smooth_l1_loss(q, target)
    teacher_optimizer.zero_grad()
    loss.backward()
    teacher_optimizer.step()
    if step % 10 == 9:
        target_net.load_state_dict(teacher.state_dict())
print(f"teacher loss {loss.item():.4f}")

student = nn.Sequential(nn.Linear(n_states, 8), nn.ReLU(), nn.Linear(8, 2))
student_optimizer = torch.optim.RMSprop(student.parameters(), lr=1e-2)
memory = []
state = 0
for _step in range(args.student_steps):
    with torch.no_grad():
        action = int(teacher(states[state]).argmax()) if random.random() > 0.3 else \
            random.randrange(2)
    memory.append(state)
    state, _, done = transition(state, action)
    if done:
        state = 0
    batch = states[torch.tensor(random.choices(memory, k=8))]
    with torch.no_grad():
        teacher_q = teacher(batch)
    soft_targets = F.softmax(teacher_q / args.tau, dim=1)
    loss = F.kl_div(F.log_softmax(student(batch), dim=1), soft_targets, reduction="batchmean")
    student_optimizer.zero_grad()
    loss.backward()
    student_optimizer.step()
print(f"student loss {loss.item():.4f}")

if args.out:
    torch.save({"teacher": teacher.state_dict(), "student": student.state_dict()}, args.out)
