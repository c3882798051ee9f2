"""Audit a whole training step against its optimizers: every leak, dead parameter, carried graph.

The lens (:func:`~toolkit.lens.gradient_path`, :func:`~toolkit.lens.assert_no_gradient`)
answers questions one already knows to ask. :func:`audit_step` asks them all at once, for a
step written as a function that returns its loss (or a dict of losses) and the optimizers that
will step each loss's parameters:

- **leaks**: tensors a loss's gradient reaches that its optimizer does not step (a DQN target
  network, a generator in the discriminator's step, an EMA or distillation teacher, a critic
  trained by the actor's loss), each with its shortest path, the gradient's bytes and the cut
  that removes it;
- **dead parameters**: what an optimizer steps that none of its losses reaches, with the cut
  that stops it (a named block, ``detach``, ``no_grad``, ``requires_grad=False``);
- **carried graphs**: the step's graph reaching graph made by its previous call (a recurrent
  state kept without a cut: memory grows every step, or backward fails "a second time").

Nothing is differentiated: the audit walks the backward graph from each loss's ``grad_fn``
(``AccumulateGrad`` nodes identify the leaves), never calls ``backward()`` or
``optimizer.step()`` and never reads or writes ``.grad``.

Limits: a network *in* the optimizer is taken as meant to be trained (a target network stepped
by the same optimizer is no leak); one optimizer over several losses cannot tell which loss
trains what unless each loss is paired with its own param group; graphs built in other threads
(``nn.DataParallel``) are outside what the carried-graph check numbers.

References:
    PyTorch, "Autograd mechanics", https://pytorch.org/docs/stable/notes/autograd.html ;
    ``torch.autograd.graph.Node``, https://pytorch.org/docs/stable/autograd.html#autograd-graph
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import nn

from toolkit._utils.formatting import fmt
from toolkit.lens.audit_graph import (
    CarriedGraph,
    DeadParameter,
    Labeller,
    Leak,
    find_carried,
    find_dead,
    find_leaks,
)
from toolkit.lens.audit_record import Names, Recording, find_modules
from toolkit.lens.audit_state import StateSnapshot
from toolkit.lens.backward_graph import ShortestPaths
from toolkit.lens.flow import GradientLeakError
from toolkit.lens.graph_walk import output_roots

__all__ = ["CarriedGraph", "DeadParameter", "Leak", "StepAudit", "assert_clean_step",
           "audit_step"]


def _bytes(n: int) -> str:
    return fmt(n, "B")


def _short(path: Iterable[str], keep: int = 10) -> str:
    nodes = list(path)
    if len(nodes) > keep:
        nodes = [*nodes[:3], f"… {len(nodes) - 8} nodes …", *nodes[-5:]]
    return " -> ".join(nodes)


def _listing(names: list[str], keep: int = 6) -> str:
    shown = ", ".join(names[:keep])
    return shown + (f", … (+{len(names) - keep})" if len(names) > keep else "")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


@dataclass(frozen=True)
class StepAudit:
    """What :func:`audit_step` found; ``str()`` prints it grouped, one block per problem.

    ``ok`` is ``True`` when there is no leak, no dead parameter and no carried graph.
    ``notes`` are remarks that are not problems (state restored, in-place writes seen, leaves
    that receive gradient but belong to no module or optimizer found).
    """

    losses: tuple[str, ...]
    leaks: tuple[Leak, ...] = ()
    dead: tuple[DeadParameter, ...] = ()
    carried: tuple[CarriedGraph, ...] = ()
    n_stepped: int = 0
    notes: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return not (self.leaks or self.dead or self.carried)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: losses, ok, leaks, dead, carried (as dicts) and notes."""
        return {"losses": list(self.losses), "ok": self.ok, "n_stepped": self.n_stepped,
                "leaks": [asdict(x) for x in self.leaks], "dead": [asdict(x) for x in self.dead],
                "carried": [asdict(x) for x in self.carried], "notes": list(self.notes)}

    def _leak_lines(self) -> list[str]:
        groups: dict[tuple[str, str, str], list[Leak]] = {}
        for leak in self.leaks:
            groups.setdefault((leak.loss, leak.reason, leak.fix), []).append(leak)
        lines = []
        for (loss, reason, fix), leaks in groups.items():
            shortest = min(leaks, key=lambda x: len(x.path))
            size = _bytes(sum(x.grad_bytes for x in leaks))
            lines += [f"LEAK    loss {loss!r} reaches {_plural(len(leaks), 'tensor')} {reason} "
                      f"({size} of gradient): {_listing([x.parameter for x in leaks])}",
                      f"        path: {_short(shortest.path)}",
                      f"        fix:  {fix}"]
        return lines

    def _dead_lines(self) -> list[str]:
        groups: dict[tuple[str, str], list[DeadParameter]] = {}
        for dead in self.dead:
            groups.setdefault((dead.optimizer, dead.cut), []).append(dead)
        lines = []
        for (optimizer, cut), items in groups.items():
            losses = ", ".join(repr(x) for x in items[0].losses)
            lines += [f"DEAD    optimizer {optimizer!r} steps {_plural(len(items), 'tensor')} "
                      f"that no gradient of {losses} reaches: "
                      f"{_listing([x.parameter for x in items])}",
                      f"        cut:  {cut}"]
            with_path = [x for x in items if x.path]
            if with_path:
                lines.append(f"        path: {_short(min(with_path, key=lambda x: len(x.path or ())).path or ())}")
        return lines

    def _carried_lines(self) -> list[str]:
        lines = []
        for c in self.carried:
            shape = "" if c.shape is None else f" of shape {c.shape}"
            lines += [f"CARRIED loss {c.loss!r} reaches {_plural(c.n_nodes, 'node')} made "
                      f"{c.created}: {c.source}{shape}, entering at {c.entered}",
                      f"        path: {_short(c.path)}",
                      f"        fix:  {c.fix}"]
        return lines

    def __str__(self) -> str:
        losses = ", ".join(repr(n) for n in self.losses)
        ran = "the step ran twice, nothing was differentiated"
        if self.ok:
            head = (f"audit_step: clean; {_plural(len(self.losses), 'loss').replace('losss', 'losses')}"
                    f" ({losses}), {self.n_stepped} stepped tensors all reached, no leak, no "
                    f"carried graph ({ran})")
            return "\n".join([head, *[f"note: {n}" for n in self.notes]])
        counts = (f"{_plural(len(self.leaks), 'leaking tensor')}, "
                  f"{_plural(len(self.dead), 'dead parameter')}, "
                  f"{_plural(len(self.carried), 'carried graph')}")
        head = f"audit_step: {counts} (losses {losses}; {ran})"
        return "\n".join([head, *self._leak_lines(), *self._dead_lines(), *self._carried_lines(),
                          *[f"note: {n}" for n in self.notes]])


# --- arguments ---------------------------------------------------------------------------------------


def _params_of(value: Any, where: str, arg: str) -> list[tuple[str, torch.Tensor]]:
    """``(position name, tensor)`` for an optimizer, a param group, a module or tensors."""
    if hasattr(value, "param_groups"):
        return [(f"param_groups[{g}][{i}]", p) for g, group in enumerate(value.param_groups)
                for i, p in enumerate(group["params"])]
    if isinstance(value, Mapping) and "params" in value:
        params = value["params"]
        params = [params] if isinstance(params, torch.Tensor) else list(params)
        return [(f"[{i}]", p) for i, p in enumerate(params)]
    if isinstance(value, nn.Module):
        return list(value.named_parameters())
    if isinstance(value, torch.Tensor):
        return [("", value)]
    if isinstance(value, Iterable) and not isinstance(value, (str, bytes, Mapping)):
        return [(f"[{i}]{k}", p) for i, v in enumerate(value)
                for k, p in _params_of(v, where, arg)]
    raise TypeError(f"{where}: {arg} must be an optimizer, one of its param groups, an nn.Module "
                    f"or tensors (or a dict loss name -> one of these), got {type(value).__name__}")


def _pairings(optimizers: Any, where: str) -> dict[str | None, Any]:
    """``loss name -> optimizer-like``; the key ``None`` pairs every loss with one optimizer."""
    if isinstance(optimizers, Mapping) and "params" not in optimizers:
        if not optimizers:
            raise ValueError(f"{where}: optimizers is an empty dict; pass an optimizer or a dict "
                             f"loss name -> optimizer")
        return {str(k): v for k, v in optimizers.items()}
    return {None: optimizers}


def _losses(out: Any, where: str) -> dict[str, torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return {"loss": out}
    if isinstance(out, Mapping) and out and all(isinstance(v, torch.Tensor)
                                                for v in out.values()):
        return {str(k): v for k, v in out.items()}
    raise TypeError(f"{where}: step() must return a loss tensor or a dict name -> loss tensor, "
                    f"got {type(out).__name__}")


def _pair(losses: dict[str, torch.Tensor], pairings: dict[str | None, Any], where: str
          ) -> dict[str, torch.Tensor]:
    if None in pairings:
        return losses
    if len(losses) == 1 and len(pairings) == 1 and "loss" in losses:
        return {next(iter(pairings)): losses["loss"]}  # a lone loss takes the optimizer's name
    if set(losses) != set(pairings):
        raise ValueError(f"{where}: optimizers must have the same names as the losses step() "
                         f"returns; losses {sorted(losses)}, optimizers {sorted(map(str, pairings))}")
    return losses


# --- the audit -----------------------------------------------------------------------------------------


def audit_step(step: Callable[[], Any], optimizers: Any, *,
               modules: nn.Module | Mapping[str, nn.Module] | None = None,
               restore_state: bool = True, allow_pass_through: bool = False) -> StepAudit:
    """Audit one training step: leaks, dead parameters and carried graphs, without a backward.

    ``step()`` computes the loss of one training step (or a dict name → loss) and returns it,
    without ``backward`` or ``optimizer.step()``. The audit calls it **twice**, inside a
    recording that names modules, marks cuts and notes in-place writes (see
    :mod:`toolkit.lens.audit_record`), and walks the backward graph of the second call:

    - a **leak** is a parameter (or any tensor of a module found) that a loss's gradient
      reaches while the optimizer paired with that loss does not step it, or steps it while
      the step also writes it in place (an EMA teacher updated by gradient *and* by averaging);
    - a **dead** parameter is stepped by an optimizer but reached by none of its losses;
    - a **carried** graph is a node of the second call's graph made before that call began.

    Running the step twice has the effects of two steps on everything the step touches: a
    BatchNorm's running statistics move twice, ``num_batches_tracked`` grows by 2, the random
    generators advance, an EMA update inside the step is applied twice, a data iterator or a
    replay buffer yields two batches. With ``restore_state=True`` (the default) the audit saves
    the parameters, buffers, train/eval and ``requires_grad`` flags of every module it names,
    the optimizers' parameters, and the ``random``, numpy and torch (CPU and CUDA) generators,
    and puts back whatever the two calls changed. What lives elsewhere (iterators, counters,
    a recurrent state kept in a plain attribute) is not restored.

    Modules are named from ``modules`` (an ``nn.Module`` or a dict name → module), then from
    what the step refers to: its closure, its bound ``self``, ``functools.partial``
    arguments and the globals its code reads (``q_target.2.bias``). Parameters found only in an
    optimizer are named by position (``opt.param_groups[0][3]``). Toolkit cuts
    (``stop_gradient(x, name=...)``, ``as_constant``) and disabled blocks appear by name in
    every path.

    Args:
        step: zero-argument callable returning a loss tensor or a dict name → loss.
        optimizers: the optimizer of the step's loss; or a dict with the same names as the
            losses. A value may also be one param group of an optimizer, a list of them, an
            ``nn.Module`` or tensors: what that loss is meant to train (one optimizer shared by
            several losses, each with its own param group).
        modules: modules to name first (e.g. ones the step reaches only through other objects).
        restore_state: put module state and random generators back after the two calls.
        allow_pass_through: do not report leaks that no cut can remove: parameters of a
            module the gradient passes through to reach the stepped ones (the discriminator in
            a generator step). Use it when the step differentiates with ``inputs=``.

    Returns:
        :class:`StepAudit` with ``ok``, ``leaks``, ``dead``, ``carried`` and a readable ``str``.

    >>> import copy, torch
    >>> from torch import nn
    >>> from toolkit import audit_step
    >>> q = nn.Linear(3, 2)
    >>> q_target = copy.deepcopy(q)
    >>> opt = torch.optim.SGD(q.parameters(), lr=0.1)
    >>> s, s2 = torch.ones(4, 3), torch.zeros(4, 3)
    >>> def td_step():   # the target is computed with gradients: a leak into q_target
    ...     return (q(s).max(1).values - 0.9 * q_target(s2).max(1).values).pow(2).mean()
    >>> audit = audit_step(td_step, opt)
    >>> audit.ok, sorted(leak.parameter for leak in audit.leaks)
    (False, ['q_target.bias', 'q_target.weight'])
    >>> print(audit.leaks[0].fix)
    cut at the output of Mul (shape (4,)), where Sub reads it (behind it: q_target): stop_gradient(x, name=...), x.detach() or torch.no_grad()
    """
    where = "audit_step"
    if not callable(step):
        raise TypeError(f"{where}: step must be a zero-argument callable returning the loss, got "
                        f"{type(step).__name__}")
    for flag, value in (("restore_state", restore_state),
                        ("allow_pass_through", allow_pass_through)):
        if not isinstance(value, bool):
            raise TypeError(f"{where}: {flag} must be a bool, got {type(value).__name__}")
    pairings = _pairings(optimizers, where)
    names = Names()
    if modules is not None:
        if isinstance(modules, nn.Module):
            names.add_module("", modules)
        elif isinstance(modules, Mapping) and all(isinstance(m, nn.Module)
                                                  for m in modules.values()):
            for key, module in modules.items():
                names.add_module(str(key), module)
        else:
            raise TypeError(f"{where}: modules must be an nn.Module or a dict name -> nn.Module, "
                            f"got {type(modules).__name__}")
    for path, obj in find_modules(step):
        if isinstance(obj, nn.Module):
            names.add_module(path, obj)
        else:
            names.add_tensor(path, obj)
    stepped: dict[str | None, dict[int, torch.Tensor]] = {}
    for key, value in pairings.items():
        arg = "optimizers" if key is None else f"optimizers[{key!r}]"
        params = _params_of(value, where, arg)
        if not params:
            raise ValueError(f"{where}: {arg} has no parameters to step")
        label = type(value).__name__ if key is None else key
        for position, p in params:
            names.add_tensor(f"{label}.{position}".rstrip("."), p)
        stepped[key] = {id(p): p for _, p in params}
    watched = {**names.objects, **{i: p for group in stepped.values() for i, p in group.items()}}
    snapshot = (StateSnapshot(names.roots, list(watched.values()), names.tensors)
                if restore_state else None)
    recording = Recording(names, watched, snapshot)
    try:
        with recording:
            recording.next_call()
            _pair(_losses(step(), where), pairings, where)
            recording.next_call()
            losses = _pair(_losses(step(), where), pairings, where)
        audit = _analyse(losses, pairings, stepped, recording, allow_pass_through)
    finally:
        restored, lost = snapshot.restore() if snapshot is not None else ([], [])
    notes = [*audit.notes]
    if restored:
        notes.append(f"restored what the two calls changed: {_listing(restored, 4)}")
    if lost:
        notes.append(f"could not restore {_listing(lost, 4)}: written where the recording "
                     f"does not see it")
    if notes != list(audit.notes):
        audit = StepAudit(audit.losses, audit.leaks, audit.dead, audit.carried, audit.n_stepped,
                          tuple(notes))
    return audit


def _analyse(losses: dict[str, torch.Tensor], pairings: dict[str | None, Any],
             stepped: dict[str | None, dict[int, torch.Tensor]], rec: Recording,
             allow_pass_through: bool) -> StepAudit:
    label = Labeller(rec)
    key_of = {name: (None if None in pairings else name) for name in losses}
    opt_name = {name: (type(pairings[None]).__name__ if None in pairings else name)
                for name in losses}
    searches = {name: ShortestPaths(output_roots(loss, "audit_step"))
                for name, loss in losses.items()}
    leaks = [leak for name, search in searches.items()
             for leak in find_leaks(name, opt_name[name], search, set(stepped[key_of[name]]),
                                    rec, label, allow_pass_through=allow_pass_through)]
    groups: dict[int, list[str]] = {}
    for name in losses:
        groups.setdefault(id(pairings[key_of[name]]), []).append(name)
    dead = []
    for members in groups.values():
        params = stepped[key_of[members[0]]]
        reached = {i for name in members for i in searches[name].leaf_node}
        missing = [p for i, p in params.items() if i not in reached]
        if missing:
            optimizer = (opt_name[members[0]] if len(members) == 1 or None in pairings
                         else "/".join(members))
            roots = [t for name in members for t in output_roots(losses[name], "audit_step")]
            dead += find_dead(optimizer, tuple(members), roots, missing, rec, label)
    carried: dict[tuple[Any, ...], CarriedGraph] = {}
    for name, search in searches.items():
        for c in find_carried(name, search, rec, label):
            carried.setdefault((c.source, c.entered, c.shape), c)
    notes = []
    all_stepped = {i for group in stepped.values() for i in group}
    averaged = [rec.names.tensors[i] for i in rec.written if i not in all_stepped
                and i in rec.names.tensors and isinstance(rec.names.objects[i], nn.Parameter)]
    if averaged:
        notes.append(f"the step writes {_listing(averaged, 4)} in place (an average?), "
                     f"not a gradient step")
    known = rec.names.tensors
    others = {i for s in searches.values() for i in s.leaf_node
              if i not in known and not isinstance(s.nodes[s.leaf_node[i]].variable,
                                                   nn.Parameter)}
    if others:
        notes.append(f"{_plural(len(others), 'other leaf tensor')} that require grad receive "
                     f"gradient (not a parameter of any module or optimizer found)")
    return StepAudit(tuple(losses), tuple(leaks), tuple(dead), tuple(carried.values()),
                     len(all_stepped), tuple(notes))


def assert_clean_step(step: Callable[[], Any], optimizers: Any, **kwargs: Any) -> StepAudit:
    """:func:`audit_step`, raising :class:`~toolkit.core.GradientLeakError` unless it is clean.

    The error's message is ``str(audit)``; ``err.paths`` maps each leaking tensor to its path
    and ``err.audit`` is the :class:`StepAudit`. Returns the audit when clean. Keyword arguments
    go to :func:`audit_step`. Also available in pytest as the ``clean_step`` fixture.

    >>> import torch
    >>> from toolkit import assert_clean_step
    >>> w = torch.nn.Parameter(torch.ones(3))
    >>> assert_clean_step(lambda: (w * 2).sum(), torch.optim.SGD([w], lr=0.1)).ok
    True
    """
    audit = audit_step(step, optimizers, **kwargs)
    if not audit.ok:
        err = GradientLeakError(str(audit), {leak.parameter: list(leak.path)
                                             for leak in audit.leaks})
        err.audit = audit  # type: ignore[attr-defined]
        raise err
    return audit
