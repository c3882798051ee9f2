"""A sample drawn without its path (``drawn``): ``Distribution.sample()`` draws under
``no_grad``, so its value is a constant to autograd. A draw from a distribution whose
parameters carry a graph (an encoder's mean and scale), which a loss that trains then reads (a
decoder's reconstruction, a neural process's likelihood), never trains what made the
distribution through that loss: the reparameterisation trick (Kingma and Welling 2014, §2.4)
is ``rsample()``, which draws ``loc + scale * eps`` with the path kept. The VAE of BCQ
(Fujimoto et al. 2019) and the latent path of a neural process (Garnelo et al. 2018) draw so.

A draw whose log-probability the script takes (``dist.log_prob(action)``: REINFORCE, PPO, a
score-function estimator) is the method's: the gradient goes through the log-probability, not
the value. So is a draw from parameters with no graph (exploration noise, a prior), one made
under ``no_grad`` (a rollout), or one no loss's graph meets (a sample for a metric).

:func:`note` marks each draw at ``sample()`` (followed as a constant, as the values of
``no_grad`` calls are: :class:`~toolkit.audit.rules.running.kept_in_sync.Constants`);
:func:`scored` notes the values a ``log_prob`` reads; :func:`fed`, at a ``backward()`` whose
graph a draw met, makes the finding, whose edit writes ``rsample`` for ``sample``."""

from __future__ import annotations

import ast
import itertools
from dataclasses import dataclass

import torch

from toolkit.audit.findings import ScriptFinding
from toolkit.audit.record import syntax as S
from toolkit.audit.record.backward import read_graph
from toolkit.audit.record.frames import Site
from toolkit.audit.record.tensors import storage_of
from toolkit.audit.result import plural
from toolkit.audit.rules.running.state import WatchState

__all__ = ["Drawn", "fed", "note", "rsample_edit", "scored", "weighed"]

_serial = itertools.count()


@dataclass(frozen=True)
class Drawn:
    """The key a draw is followed by: where the script drew it, and which draw it was."""

    site: Site
    serial: int


def note(w: WatchState, dist: object, out: torch.Tensor, site: Site) -> None:
    """``out = dist.sample()`` ran at ``site`` with gradients on: followed when ``dist`` could
    have drawn it with its path (``has_rsample``) and a parameter of it carries a graph."""
    if not getattr(dist, "has_rsample", False):
        return
    made = [v.grad_fn for v in vars(dist).values()
            if isinstance(v, torch.Tensor) and v.grad_fn is not None]
    if not made:
        return
    key = Drawn(site, next(_serial))
    w.draws[key] = (out, made)
    w.constants.made([out], key, term=True)


def scored(w: WatchState, value: object) -> None:
    """A ``log_prob`` read ``value``: a draw that it is, is weighed by its log-probability."""
    if isinstance(value, torch.Tensor):
        w.log_prob_reads[storage_of(value)] = value


def weighed(w: WatchState, key: Drawn) -> bool:
    """Whether a ``log_prob`` read the draw ``key``: a score-function estimator's, whose
    gradient goes through the log-probability."""
    out = w.draws.get(key, (None, []))[0]
    return out is not None and storage_of(out) in w.log_prob_reads


def fed(w: WatchState, key: Drawn, site: Site | None) -> None:
    """The draw ``key`` met the graph of the loss whose ``backward()`` is at ``site``: a
    ``drawn`` failure unless a ``log_prob`` read it or it was found at its line already."""
    out, made = w.draws.get(key, (None, []))
    if out is None or weighed(w, key):
        return
    held = w.stepped_map()
    reached = [k for k in read_graph(made).leaves if k in held]
    if not reached or any(f.kind == "drawn" and f.at and f.at[0] == key.site.shown()
                          for f in w.findings.values()):
        return
    names = w.names()
    tensors = tuple(names.get(k, "?") for k in reached)
    shown = tuple(sorted(S.assigned_names(key.site.path, key.site.line))) + tensors
    edit = rsample_edit(w, key.site)
    at = (key.site.shown(),) + ((site.shown(),) if site is not None else ())
    w.add(ScriptFinding(
        "drawn", w.iteration,
        f"a sample drawn with sample(), which keeps no path to the distribution's parameters, "
        f"is read by the loss: its gradient never reaches the "
        f"{plural(len(reached), 'tensor')} that made the distribution, which the "
        f"reparameterised draw (rsample()) trains through it",
        tensors, shown, at,
        (edit,) if edit is not None else (),
        advice="draw with rsample() where the loss is meant to train through the sample; if "
               "it is weighed by its log-probability instead, take log_prob of it",
        step=w.step_events, concerned=("*",)))


def rsample_edit(w: WatchState, site: Site):
    """The edit that writes ``rsample`` for the ``sample`` of the call at ``site``."""
    found = S.call_at(site.path, site.span)
    if found is None:
        return None
    call = found[0]
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr == "sample"
            and func.end_lineno is not None and func.end_col_offset is not None):
        return None
    end = (func.end_lineno, func.end_col_offset)
    return w.fixes.edit_at(site.path, (end[0], end[1] - len("sample")), end, "rsample")
