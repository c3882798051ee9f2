"""What a script's module calls record while the watch records an iteration (the module hook's
side of :class:`~toolkit.audit.script.session.Watch`): which networks the user's code calls and
by which names, what a call under ``no_grad`` makes, what a network that trains reads, which
call's output feeds another's, and the networks that hold the modules called."""

from __future__ import annotations

import ast
import sys
from types import FrameType

import torch
from torch import nn

from toolkit.audit.record import syntax as S
from toolkit.audit.record.backward import sequence
from toolkit.audit.record.frames import is_user, site_of, user_file_lines
from toolkit.audit.record.handed import handed_as
from toolkit.audit.record.tensors import storage_of, tensors_in
from toolkit.audit.rules.running import drawn, hard
from toolkit.audit.rules.running.feedback import Feed, fed
from toolkit.audit.rules.running.state import WatchState

__all__ = ["ModuleCalls"]


class ModuleCalls(WatchState):
    """The module hook's bookkeeping (on only while an iteration is recorded)."""

    def module_called(self, module: nn.Module, args: tuple, output: object) -> None:
        if not self.recording() or not self.here():
            return
        self.ran.setdefault(id(module), set()).add(self.events)
        # the watch's own reads of tensors (``t.grad_fn``) are not the script's calls: no
        # torch-function mode sees them (the recording's would note them, at a dispatch each)
        with torch._C.DisableTorchFunction():
            if torch.is_grad_enabled() and any(t.grad_fn is not None
                                               for t in tensors_in(output)):
                self.ran_with_graph.setdefault(id(module), set()).add(self.events)
            if torch.is_grad_enabled() and (self.no_grad_out or self.constants.sources):
                self._reads_constants(module, args)
            self._called(module, args, output, sys._getframe(1))

    def _reads_constants(self, module: nn.Module, args: tuple) -> None:
        """A layer that trains reads what a no_grad call made, or a value computed from it
        without a graph: that call is on the path of the prediction (a backbone under a head,
        an embedding concatenated to a network's input), not a target's. Any layer, called
        by the user's code or inside a container's forward."""
        if isinstance(module, nn.modules.loss._Loss) or not any(
                p.requires_grad for p in module.parameters(recurse=False)):
            return
        for a in args:
            for t in tensors_in(a):
                where = storage_of(t)
                made = self.no_grad_out.get(where)
                if made is not None:
                    self.feeds_trained.add(made[0])
                # or a value computed from it without a graph (a clone of an inference-mode
                # output, a crop of the features)
                for key in self.constants.sources.get(where, ()):
                    if not isinstance(key, drawn.Drawn):   # a draw is no call's output
                        self.feeds_trained.add(key[0])

    def _called(self, module: nn.Module, args: tuple, output: object,
                frame: FrameType | None) -> None:
        # only calls made by the user's code itself: past torch's frames that run the hooks,
        # the caller is the user's innermost frame
        while frame is not None and frame.f_code.co_name in (
                "inner", "_call_impl", "_wrapped_call_impl") and \
                not is_user(frame.f_code.co_filename):
            frame = frame.f_back
        if frame is None or not is_user(frame.f_code.co_filename):
            return
        site = site_of(frame)
        outs = tensors_in(output)
        self.sync.saw(frame)
        made = self.copies_by_id.get(id(module))
        if made is not None and made.module is not None and made.module() is module and \
                made.first_step is not None:
            made.called_after = True
        if not torch.is_grad_enabled() and outs:
            inputs = [t.grad_fn for a in args for t in tensors_in(a) if t.grad_fn is not None]
            self.no_grad_calls.append((module, site, user_file_lines(frame), inputs,
                                       self.events))
            for t in outs:   # held, so that no later tensor takes its storage's address
                self.no_grad_out[storage_of(t)] = (id(module), t, self.events)
        if torch.is_grad_enabled():
            hard.called(self, module, args, outs, site)
        if torch.is_grad_enabled() and any(p.requires_grad for p in module.parameters()):
            # what a network that trains reads (a detached value it reads is no target),
            # through the modules with no parameters on the way (a dropout, an activation)
            # (each held while noted, so that no later tensor takes its storage's address)
            todo = [t for a in args for t in tensors_in(a)]
            while todo:
                t = todo.pop()
                key = storage_of(t)
                if key not in self.trained_reads:
                    self.trained_reads[key] = (self.events, t)
                    todo.extend(self.passed_on.get(key, ((), []))[1])
        elif torch.is_grad_enabled() and next(module.parameters(), None) is None:
            for t in outs:
                self.passed_on.setdefault(storage_of(t), (t, []))[1].extend(
                    x for a in args for x in tensors_in(a))
        if outs and 0 not in self.start_seq and any(t.grad_fn is not None for t in outs):
            self.start_seq[0] = min(sequence(t.grad_fn) for t in outs if t.grad_fn is not None)
        found = S.call_at(site.path, site.span)
        spelled = self._once(("called", site), lambda: S.segment(found[1], found[0].func)
                             if found else None)
        called = spelled if spelled is not None else type(module).__name__
        if spelled is not None and spelled.isidentifier():
            # a network handed to a helper (``def log_probs(model, x)``) is called by the
            # name its caller hands it by (``log_probs(ref_model, x)``)
            called = handed_as(frame, spelled) or called
        if id(module) not in self.roots:
            self.roots[id(module)] = (module, called)
            self.forget_names()
            if found is not None:
                self._holder(found[0].func, found[1], frame, module)
        # each name the user's code calls this network by, with or without gradients
        self.called_as.setdefault(id(module), {}).setdefault(called, set()).add(
            (torch.is_grad_enabled(), site, self.iteration))
        if not torch.is_grad_enabled() and outs:
            # by the name too: one helper's line calls every network handed to it
            self.constants.made(outs, (id(module), site, called))
        for t in outs:
            if t.grad_fn is not None:
                self.call_outputs.append((t.grad_fn, site, self.events))
        if torch.is_grad_enabled():
            self._feeds(module, args, outs, frame)
            self.recycling.called(module, args, outs, site, self.events)

    def _feeds(self, module: nn.Module, args: tuple, outs: list[torch.Tensor],
               frame: FrameType) -> None:
        """Each argument that is an earlier call's output (a feed, with the binding that
        passed it on), then this call's outputs by their node."""
        self.call_order += 1
        for t in (t for a in args for t in tensors_in(a)):
            made = self.made_by.get(id(t.grad_fn)) if t.grad_fn is not None else None
            if made is None or made[0] is not t.grad_fn or made[1] == id(module) or any(
                    f.node is t.grad_fn for f, _ in self.feeds):
                continue
            name, site, edit = fed(self.fixes, t, frame)
            self.feeds.append((Feed(t.grad_fn, t.output_nr, made[1], made[2], name, site, edit),
                               self.events))
        for t in outs:
            if t.grad_fn is not None and id(t.grad_fn) not in self.made_by:
                self.made_by[id(t.grad_fn)] = (t.grad_fn, id(module), self.call_order,
                                               self.events)


    def _holder(self, func: ast.expr, text: str, frame: FrameType, module: nn.Module) -> None:
        """The network a call's module is part of, as the script names it (``model`` of
        ``model[0](x)``, ``self.net`` of ``self.net.fc(h)``): its tensors are named from it."""
        base = func
        while isinstance(base, ast.Subscript | ast.Attribute):
            base = base.value
            if base is func or not isinstance(base, ast.Name | ast.Attribute):
                continue
            name = S.segment(text, base)
            head, _, rest = name.partition(".")
            code = frame.f_code
            if code.co_argcount and code.co_varnames[0] == head:
                return   # a method's receiver: the name its caller holds it by is elsewhere
            value = frame.f_locals.get(head, frame.f_globals.get(head))
            for part in rest.split(".") if rest else ():
                value = getattr(value, part, None)
            if isinstance(value, nn.Module) and value is not module and any(
                    m is module for m in value.modules()):
                if id(value) not in self.holders:
                    self.holders[id(value)] = (value, name)
                    self.forget_names()
