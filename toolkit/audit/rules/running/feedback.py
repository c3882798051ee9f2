"""A prediction fed back: a network's output that the loss compares with a target, read again
as the input of a later call of the same network (an autoregressive decoder reading its own
prediction, scheduled sampling) without a cut. The loss of each later prediction is then also
differentiated through every earlier one: the graph carried along the sequence grows with it,
and the network is trained to make its earlier outputs help its later ones, not to match
their targets ("detach from history as input", as the PyTorch seq2seq tutorial writes it). A
state carried between calls that no comparison reads (an RNN's hidden state, truncated BPTT)
is no feedback.

While an audited iteration runs, :func:`fed` notes each call whose tensor argument is another
call's output, with the assignment in the user's code that bound the argument's name to it;
at a ``backward()``, :func:`feedbacks` keeps those whose output the loss compares (reached from
the loss through no other call's output) and whose maker was called again on a value computed
from it."""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from types import FrameType
from typing import Any

import torch

from toolkit.audit.edit import Edit
from toolkit.audit.record import syntax as S
from toolkit.audit.record.backward import places, reaches
from toolkit.audit.record.frames import Site, is_user
from toolkit.audit.rules.running.fix_writer import FixWriter
from toolkit.lens.graph_walk import walk

__all__ = ["Feed", "fed", "feedbacks"]


@dataclass
class Feed:
    """Output ``nr`` of ``node``, made by a call of module ``maker``, read by a later call: where, the name the
    script bound it to there, and the edit that cuts it at that binding."""

    node: Any
    nr: int
    maker: int
    order: int
    name: str | None
    site: Site | None
    edit: Edit | None


def fed(fixes: FixWriter, tensor: torch.Tensor,
        frame: FrameType | None) -> tuple[str | None, Site | None, Edit | None]:
    """Where the user's code bound the value read as ``tensor`` to the name it passed on: from
    ``frame`` outwards, the first function whose call passes a name bound to ``tensor`` and
    assigns that name, somewhere, from another name bound to it now (``decoder_input =
    decoder_output``): that assignment, and its value cut (``decoder_output.detach()``)."""
    node = tensor.grad_fn
    while frame is not None:
        if not is_user(frame.f_code.co_filename):
            frame = frame.f_back
            continue
        bound = {n for n, v in frame.f_locals.items()
                 if isinstance(v, torch.Tensor) and v.grad_fn is node}
        if bound:
            found = _assignment(fixes, frame, bound)
            if found is not None:
                return found
        frame = frame.f_back
    return None, None, None


def _assignment(fixes: FixWriter, frame: FrameType, bound: set[str]
                ) -> tuple[str, Site, Edit] | None:
    parsed = S.syntax_tree(frame.f_code.co_filename)
    if parsed is None:
        return None
    tree, text = parsed
    first, code = frame.f_code.co_firstlineno, frame.f_code
    function = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.Module)
                     and getattr(n, "name", None) == code.co_name
                     and (getattr(n, "decorator_list", None) or [n])[0].lineno == first), None) \
        if code.co_name != "<module>" else tree
    if function is None:
        return None
    for st in ast.walk(function):
        if (isinstance(st, ast.Assign) and len(st.targets) == 1
                and isinstance(st.targets[0], ast.Name) and st.targets[0].id in bound
                and isinstance(st.value, ast.Name) and st.value.id in bound
                and st.value.id != st.targets[0].id):
            value = st.value
            old = S.segment(text, value)
            path = frame.f_code.co_filename
            edit = fixes.edit_at(os.path.abspath(path), (value.lineno, value.col_offset),
                                 (value.end_lineno or value.lineno, value.end_col_offset or 0),
                                 f"{old}.detach()")
            return old, Site(os.path.abspath(path), st.lineno, None), edit
    return None


def feedbacks(roots: list[Any], feeds: list[Feed], outputs: dict[int, tuple[Any, int, int]]
              ) -> list[Feed]:
    """The feeds whose output the loss (``roots``: its nodes) compares, reached from it
    through no other call's output (``outputs``: each call output's node by id -> the node,
    the module that made it, the call's order), and whose maker made a later output that
    reaches it."""
    if not feeds:
        return []
    # the outputs the loss compares: a walk from the roots that stops at the operations that
    # read a tensor of their own (a layer: what lies below is what the layer computes from)
    def expand(node: Any) -> bool:
        return not any(hasattr(n, "variable") for n, _ in node.next_functions if n is not None)

    compared = {(id(node), nr) for _, node, nr, _ in walk(places(roots), expand=expand)
                if id(node) in outputs}
    found = []
    for feed in feeds:
        if (id(feed.node), feed.nr) not in compared or outputs[id(feed.node)][0] is not feed.node:
            continue
        later = [n for n, m, order in outputs.values() if m == feed.maker and order > feed.order]
        if reaches(later, feed.node):
            found.append(feed)
    return found
