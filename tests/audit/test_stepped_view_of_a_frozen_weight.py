"""A soft prompt made from the frozen embedding's first rows without a copy
(``nn.Parameter(embed.weight[:n].detach())``, for ``.detach().clone()``): the prompt shares its
storage with the embedding, so every step of the prompt writes into the frozen embedding too.
``aliased`` at the prompt's assignment, the copy taken there, and the fixed script trains as the
published one. Views of one buffer that are all trained (a flat parameter's parts) are no
finding."""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, cli, twins

pytestmark = pytest.mark.slow

SCRIPT = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default="")
args = parser.parse_args()
torch.manual_seed(0)
embed = nn.Embedding(10, 8)
head = nn.Linear(8, 2)
embed.requires_grad_(False)
head.requires_grad_(False)
prompt = nn.Parameter(PROMPT)
optimizer = torch.optim.SGD([prompt], lr=0.5)
tokens, labels = torch.randint(0, 10, (16, 5)), torch.randint(0, 2, (16,))
for step in range(4):
    states = torch.cat([prompt.expand(16, -1, -1), embed(tokens)], 1)
    loss = F.cross_entropy(head(states.mean(1)), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save({"prompt": prompt.detach(), "embed": embed.state_dict()}, args.out)
"""

FLAT = """\
import torch
from torch import nn

torch.manual_seed(0)
flat = torch.randn(12)
layer = nn.Linear(2, 4)
layer.weight = nn.Parameter(flat[:8].view(4, 2))
layer.bias = nn.Parameter(flat[8:])
optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
x = torch.randn(8, 2)
for step in range(3):
    loss = layer(x).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_a_prompt_sharing_the_frozen_embedding_is_copied_where_it_is_made(tmp_path):
    folder = twins(tmp_path, SCRIPT.replace("PROMPT", "embed.weight[:3].detach().clone()"),
                   SCRIPT.replace("PROMPT", "embed.weight[:3].detach()"))
    done = applied_and_trains(folder, "aliased", "--watch", "1")
    assert "`prompt` shares its storage with `embed.weight`" in done.stdout
    assert "train.py:14: prompt = nn.Parameter(embed.weight[:3].detach())" in done.stdout


def test_views_of_one_buffer_all_trained_are_no_finding(tmp_path):
    (tmp_path / "flat.py").write_text(FLAT, encoding="utf-8")
    done = cli("--watch", "1", "flat.py", cwd=tmp_path)
    assert done.returncode == 0, done.stdout
