"""Torch function modes put on and taken off the mode stack wherever they are: the watch's
modes enter and leave as a script's events come, not in the stack's order."""

from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode

__all__ = ["insert_mode", "remove_mode"]


def insert_mode(mode: TorchFunctionMode, depth: int) -> None:
    """Put ``mode`` on the torch function mode stack at ``depth``: below the modes entered
    since (they leave from the top, as they would had it been there before them)."""
    above = []
    while torch._C._len_torch_function_stack() > depth:
        above.append(torch._C._pop_torch_function_stack())
    torch._C._push_on_torch_function_stack(mode)
    for m in reversed(above):
        torch._C._push_on_torch_function_stack(m)


def remove_mode(mode: TorchFunctionMode) -> bool:
    """Take ``mode`` off the torch function mode stack, wherever it is, the modes above it
    kept in their order; ``False`` when it is not there (it is dispatching a call: torch takes
    it off for the while)."""
    depth = torch._C._len_torch_function_stack()
    at = next((i for i in range(depth) if torch._C._get_function_stack_at(i) is mode), None)
    if at is None:
        return False
    above = [torch._C._pop_torch_function_stack() for _ in range(depth - at - 1)]
    torch._C._pop_torch_function_stack()
    for m in reversed(above):
        torch._C._push_on_torch_function_stack(m)
    return True
