"""tree_map: the one definition of a structure's leaves, shared by the primitive and the lens."""

from __future__ import annotations

import collections
import dataclasses
import importlib
from typing import NamedTuple

import torch

from toolkit._utils.trees import tree_map


class Pair(NamedTuple):
    a: object
    b: object


@dataclasses.dataclass(frozen=True)
class Frozen:
    x: object
    y: object


def test_containers_keep_their_types_and_leaves_are_visited_in_order():
    t = [torch.tensor(float(i)) for i in range(6)]
    tree = {"d": collections.OrderedDict(z=t[0], a=t[1]), "p": Pair(t[2], [t[3], "s"]),
            "f": Frozen(t[4], (t[5], None))}
    visited = []
    out = tree_map(lambda leaf: visited.append(leaf) or leaf, tree)
    assert visited[:4] == [t[0], t[1], t[2], t[3]] and visited[4] == "s"
    assert visited[5] is t[4] and visited[6] is t[5] and visited[7] is None
    assert type(out["d"]) is collections.OrderedDict and list(out["d"]) == ["z", "a"]
    assert type(out["p"]) is Pair and type(out["f"]) is Frozen
    assert out["f"] is not tree["f"] and tree["f"].x is t[4]  # rebuilt, the input untouched


def test_a_tensor_subclass_is_a_leaf():
    p = torch.nn.Parameter(torch.ones(2))
    assert tree_map(lambda leaf: "leaf", [p]) == ["leaf"]


def test_the_primitive_and_the_lens_share_it():
    # (``toolkit.core.stop_gradient`` the attribute is the function: the module by its name)
    core = importlib.import_module("toolkit.core.stop_gradient")
    graph_walk = importlib.import_module("toolkit.lens.graph_walk")
    assert core.tree_map is tree_map is graph_walk.tree_map
