"""A relaxation that moves a list of states down an energy's gradient (equilibrium
propagation, Scellier & Bengio 2017), each state's ``.grad`` read in a loop by one name, with
its backward taken over everything: the weights' ``.grad`` gathers every relaxation step's
gradient, which the step adds to the contrast's. The finding names the contrast's backward
beside it, and the edit takes the relaxation's backward over the states alone, as the list that
holds them (``inputs=[*states[1:]]``), after which the script trains as published."""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, twins

pytestmark = pytest.mark.slow

PUBLISHED = """\
import argparse
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default="")
args = parser.parse_args()
torch.manual_seed(0)
layers = nn.ModuleList([nn.Linear(4, 6), nn.Linear(6, 2)])
optimizer = torch.optim.SGD(layers.parameters(), lr=0.05)


def energy(states):
    e = 0.5 * sum((u ** 2).sum() for u in states[1:])
    for layer, pre, post in zip(layers, states, states[1:]):
        e = e - (layer(torch.tanh(pre)) * torch.tanh(post)).sum()
    return e


def relax(states, steps):
    for _ in range(steps):
        for u in states[1:]:
            u.grad = None
        energy(states).backward()
        with torch.no_grad():
            for u in states[1:]:
                u -= 0.2 * u.grad


for step in range(3):
    x = torch.randn(8, 4)
    states = [x, torch.zeros(8, 6, requires_grad=True), torch.zeros(8, 2, requires_grad=True)]
    relax(states, 3)
    free = [u.detach().clone() for u in states]
    loss = energy(free) - energy([x, *(u.detach() + 0.1 for u in states[1:])])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save(layers.state_dict(), args.out)
"""

CLEARED_FIRST = PUBLISHED.replace(
    "    x = torch.randn(8, 4)\n", "    optimizer.zero_grad()\n    x = torch.randn(8, 4)\n").replace(
    "    optimizer.zero_grad()\n    loss.backward()\n", "    loss.backward()\n")


def test_the_relaxation_is_taken_over_the_list_of_states(tmp_path):
    folder = twins(tmp_path, PUBLISHED, CLEARED_FIRST)
    done = applied_and_trains(folder, "leak", "--watch", "1")
    assert "backward(inputs=[*states[1:]])" in done.stdout, done.stdout
    assert "train.py:37: loss.backward()" in done.stdout, done.stdout
