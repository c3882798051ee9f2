"""Neural Turing Machine trained on the copy task with a two-stage length curriculum.

Paper: Alex Graves, Greg Wayne and Ivo Danihelka, "Neural Turing Machines", arXiv:1410.5401,
2014 (sections 3.1-3.3: reading, writing, content and location addressing; section 4.1: copy).
Reference implementation: loudinthecloud/pytorch-ntm -- ntm/memory.py (NTMMemory.reset, read,
write, address with _similarity, _interpolate, _shift, _sharpen), ntm/head.py (NTMReadHead,
NTMWriteHead, _address_memory), ntm/controller.py (LSTMController with the learned initial
state lstm_h_bias / lstm_c_bias, here one parameter init_state), ntm/ntm.py (NTM.forward, the
init_r read biases kept as buffers), tasks/copytask.py (CopyTaskNTM.init_sequence, dataloader,
RMSprop with momentum 0.9 and alpha 0.95, BCELoss) and train.py (train_batch, clip_grads).
The length curriculum follows the spirit of MarkPKCollier/NeuralTuringMachine, run_tasks.py
(--curriculum, where the curriculum point grows once short sequences are copied).

Random 4-bit vectors are copied: the NTM reads a sequence and a delimiter on a fifth channel,
then gets zero inputs and must emit the sequence again. One LSTM controller (32 units, learned
initial state), one read head and one write head (content focus by cosine similarity and key
strength, interpolation with the previous weighting, a 3-way circular shift and sharpening;
erase and add vectors for the write head) address a 16 x 8 memory. Memory, read vector, head
weightings and controller state are reset at the start of every sequence (init_sequence),
and the whole sequence is back-propagated through the controller, the heads and every memory
write. All parameters are in one RMSprop optimizer; gradients are clamped to [-10, 10] after
backward. Stage 1 warms up on sequences of length 1-2, stage 2 continues on lengths 1-5 with
the same optimizer. The learning rate is raised from 1e-4 to 3e-3 for this short run.
Bug: the learned initial controller state init_state is created as a plain tensor with
requires_grad=True instead of an nn.Parameter, so it is not in net.parameters() and RMSprop never
updates it; it only accumulates .grad.
"""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--warmup_steps", type=int, default=15)
parser.add_argument("--steps", type=int, default=25)
parser.add_argument("--lr", type=float, default=3e-3)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)

SEQ_WIDTH = 4
N, M = 16, 8
CTRL = 32
BATCH = 8


class NTMMemory(nn.Module):
    def __init__(self, n, m):
        super().__init__()
        self.n, self.m = n, m
        stdev = 1.0 / math.sqrt(n + m)
        self.register_buffer("mem_bias", torch.empty(n, m).uniform_(-stdev, stdev))

    def reset(self, batch_size):
        self.memory = self.mem_bias.clone().repeat(batch_size, 1, 1)

    def read(self, w):
        return torch.bmm(w.unsqueeze(1), self.memory).squeeze(1)

    def write(self, w, e, a):
        prev_mem = self.memory
        erase = w.unsqueeze(-1) * e.unsqueeze(1)
        add = w.unsqueeze(-1) * a.unsqueeze(1)
        self.memory = prev_mem * (1 - erase) + add

    def address(self, k, beta, g, s, gamma, w_prev):
        # content focus
        sim = F.cosine_similarity(self.memory + 1e-16, k.unsqueeze(1) + 1e-16, dim=-1)
        wc = F.softmax(beta * sim, dim=1)
        # location focus: interpolation, circular shift by -1/0/+1, sharpening
        wg = g * wc + (1 - g) * w_prev
        w_hat = (s[:, 0:1] * torch.roll(wg, -1, dims=1) + s[:, 1:2] * wg
                 + s[:, 2:3] * torch.roll(wg, 1, dims=1))
        w = w_hat ** gamma
        return w / (w.sum(1, keepdim=True) + 1e-16)


class NTMHead(nn.Module):
    def __init__(self, memory, ctrl_size, write):
        super().__init__()
        self.memory = memory
        self.write_head = write
        self.lengths = [memory.m, 1, 1, 3, 1] + ([memory.m, memory.m] if write else [])
        self.fc = nn.Linear(ctrl_size, sum(self.lengths))
        nn.init.xavier_uniform_(self.fc.weight, gain=1.4)
        nn.init.normal_(self.fc.bias, std=0.01)

    def forward(self, h, w_prev):
        parts = torch.split(self.fc(h), self.lengths, dim=1)
        k, beta, g, s, gamma = parts[:5]
        w = self.memory.address(k, F.softplus(beta), torch.sigmoid(g), F.softmax(s, dim=1),
                                1 + F.softplus(gamma), w_prev)
        if self.write_head:
            self.memory.write(w, torch.sigmoid(parts[5]), parts[6])
            return None, w
        return self.memory.read(w), w


class LSTMController(nn.Module):
    def __init__(self, num_inputs, num_outputs):
        super().__init__()
        self.lstm = nn.LSTM(num_inputs, num_outputs)
        # learned initial (h, c) of the single LSTM layer
        self.init_state = (torch.randn(2, 1, 1, num_outputs) * 0.05).requires_grad_()
        stdev = 5.0 / math.sqrt(num_inputs + num_outputs)
        for p in self.lstm.parameters():
            if p.dim() == 1:
                nn.init.zeros_(p)
            else:
                nn.init.uniform_(p, -stdev, stdev)

    def create_new_state(self, batch_size):
        h0, c0 = self.init_state.repeat(1, 1, batch_size, 1).unbind(0)
        return h0, c0

    def forward(self, x, state):
        out, state = self.lstm(x.unsqueeze(0), state)
        return out.squeeze(0), state


class CopyNTM(nn.Module):
    def __init__(self, num_inputs, num_outputs):
        super().__init__()
        self.num_inputs = num_inputs
        self.memory = NTMMemory(N, M)
        self.controller = LSTMController(num_inputs + M, CTRL)
        self.read_head = NTMHead(self.memory, CTRL, write=False)
        self.write_head = NTMHead(self.memory, CTRL, write=True)
        self.register_buffer("read_bias", torch.randn(1, M) * 0.01)
        self.fc = nn.Linear(CTRL + M, num_outputs)
        nn.init.xavier_uniform_(self.fc.weight, gain=1.0)
        nn.init.normal_(self.fc.bias, std=0.01)

    def init_sequence(self, batch_size):
        self.batch_size = batch_size
        self.memory.reset(batch_size)
        self.state = (self.read_bias.clone().repeat(batch_size, 1),
                      self.controller.create_new_state(batch_size),
                      torch.zeros(batch_size, N), torch.zeros(batch_size, N))

    def forward(self, x=None):
        if x is None:
            x = torch.zeros(self.batch_size, self.num_inputs)
        prev_read, ctrl_state, w_read, w_write = self.state
        h, ctrl_state = self.controller(torch.cat([x, prev_read], 1), ctrl_state)
        read, w_read = self.read_head(h, w_read)
        _, w_write = self.write_head(h, w_write)
        self.state = (read, ctrl_state, w_read, w_write)
        return torch.sigmoid(self.fc(torch.cat([h, read], 1)))


def copy_batch(batch_size, min_len, max_len):
    seq_len = int(torch.randint(min_len, max_len + 1, (1,)))
    seq = torch.bernoulli(torch.full((seq_len, batch_size, SEQ_WIDTH), 0.5))
    inp = torch.zeros(seq_len + 1, batch_size, SEQ_WIDTH + 1)
    inp[:seq_len, :, :SEQ_WIDTH] = seq
    inp[seq_len, :, SEQ_WIDTH] = 1.0
    return inp, seq


def train_batch(net, criterion, optimizer, x, y):
    optimizer.zero_grad()
    net.init_sequence(y.size(1))
    for t in range(x.size(0)):
        net(x[t])
    y_out = torch.stack([net() for _ in range(y.size(0))])
    loss = criterion(y_out, y)
    loss.backward()
    torch.nn.utils.clip_grad_value_(net.parameters(), 10.0)
    optimizer.step()
    cost = ((y_out.detach() > 0.5).float() - y).abs().sum() / y.size(1)
    return loss.item(), cost.item()


net = CopyNTM(SEQ_WIDTH + 1, SEQ_WIDTH)
criterion = nn.BCELoss()
optimizer = torch.optim.RMSprop(net.parameters(), lr=args.lr, momentum=0.9, alpha=0.95)

# stage 1: warm-up on short sequences
for step in range(args.warmup_steps):
    x, y = copy_batch(BATCH, 1, 2)
    loss, cost = train_batch(net, criterion, optimizer, x, y)
    if step % 5 == 0:
        print(f"warm-up {step:3d} len {y.size(0)} bce {loss:.4f} bit errors/seq {cost:.2f}")

# stage 2: the full range of lengths
for step in range(args.steps):
    x, y = copy_batch(BATCH, 1, 5)
    loss, cost = train_batch(net, criterion, optimizer, x, y)
    if step % 5 == 0 or step == args.steps - 1:
        print(f"step {step:3d} len {y.size(0)} bce {loss:.4f} bit errors/seq {cost:.2f}")

if args.out:
    torch.save({"net": {k: v for k, v in net.state_dict().items()
                        if k != "controller.init_state"},
                "init_state": net.controller.init_state.detach().clone()}, args.out)
