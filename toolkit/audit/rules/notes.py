"""The step audit's notes: what the step writes in place, an inner loop made first order by an
``autograd.grad`` without ``create_graph``, and the leaves of the step itself that receive
gradient. Information, never a failure.

A write is called an average only when it is one: the new value mixes the old value with other
tensors (``lerp_``, ``mul_`` then ``add_``, ``p.data = m * p.data + (1 - m) * q.data``). A copy
of one tensor (``load_state_dict``, ``p.copy_(q)``) is called a copy; anything else (a
power-iteration vector written with ``out=``, ``clamp_``) is named by the function that wrote it.
"""

from __future__ import annotations

from torch import nn

from toolkit.audit.record.recording import Recording, Write
from toolkit.audit.result import listing
from toolkit.lens.backward_graph import ShortestPaths

__all__ = ["describe_write", "notes_of", "write_kind"]


def write_kind(rec: Recording, write: Write) -> tuple[str, str, list[str]]:
    """``(what kind of write, the functions, the other tensors it read)``."""
    ops = ", ".join(".data =" if op == "set" else f"{op}_" for op in dict.fromkeys(write.ops))
    name = rec.names.tensors.get
    if write.copy_of is not None:
        return "a copy of", ops, [name(write.copy_of, "a tensor")]
    sources = sorted(name(i, "a tensor") for i in write.sources)
    if write.is_average:
        return "an average of itself and", ops, sources
    if sources:
        return "recomputed from", ops, sources
    return "written in place", ops, []


def describe_write(rec: Recording, write: Write) -> str:
    """``"an average of itself and q.0.weight (lerp_)"``, ``"a copy of q.0.weight (copy_)"``,
    ``"recomputed from D.weight_orig (normalize)"``, ``"written in place (clamp_)"``."""
    kind, ops, sources = write_kind(rec, write)
    return f"{kind} {listing(sources, 3)} ({ops})" if sources else f"{kind} ({ops})"


def notes_of(rec: Recording, searches: dict[str, ShortestPaths], stepped: set[int],
             frozen: set[str], twice: set[int]) -> list[str]:
    """The notes of one audit: in-place writes of parameters no optimizer steps, writes that
    only constrain stepped tensors (``twice``: the stepped tensors whose writes are findings),
    and the step's own leaves that receive gradient."""
    notes = []
    described: dict[tuple[bool, str, str], tuple[list[str], list[str]]] = {}
    for key, write in rec.writes.items():
        tensor = rec.names.objects.get(key)
        name = rec.names.tensors.get(key)
        if tensor is None or name is None or (key in stepped and key in twice) or name in frozen \
                or not isinstance(tensor, nn.Parameter):
            continue
        kind, ops, sources = write_kind(rec, write)
        names, read = described.setdefault((key in stepped, kind, ops), ([], []))
        names.append(name)
        read += [s for s in sources if s not in read]
    for (constrained, kind, ops), (names, read) in described.items():
        what = f"{kind} {listing(read, 4)}" if read else kind
        if constrained:
            notes.append(f"the step writes {listing(names, 4)}, which an optimizer steps, in "
                         f"place: {what} ({ops}), a constraint on the stepped values (weight "
                         f"clipping, a projection), not a second update")
        else:
            notes.append(f"the step writes {listing(names, 4)} in place: {what} ({ops}), not "
                         f"a gradient step")
    for grad_line, update in rec.first_order_used.items():
        at = "" if grad_line is None else f" at {grad_line.file}:{grad_line.number}"
        used = "" if update is None else f" ({update.file}:{update.number})"
        notes.append(f"the gradient taken{at} by torch.autograd.grad without "
                     f"create_graph=True updates tensors the loss reads{used}: the loss's "
                     f"gradient through that update is first order (MAML's second-order term "
                     f"is dropped); pass create_graph=True there, unless first order (FOMAML) "
                     f"is meant")
    ran: dict[str, list[str]] = {}
    for threads in rec.threads.values():
        for thread, what in threads.items():
            ran.setdefault(thread, []).extend(w for w in what if w not in ran.get(thread, ()))
    if ran:
        where = "; ".join(f"{name!r}" + (f" ({listing([w for w in what if w], 3)})"
                                         if any(what) else "")
                          for name, what in list(ran.items())[:3])
        more = f"; … (+{len(ran) - 3} threads)" if len(ran) > 3 else ""
        notes.append(f"the step ran work in other threads ({where}{more}): autograd numbers "
                     f"each thread's nodes apart and the audit records only its own thread, so "
                     f"graphs carried across calls are not checked and cuts, no_grad reads and "
                     f"in-place writes made there are not seen; run the forward in the calling "
                     f"thread to audit them")
    known = rec.names.tensors
    others = {}
    for search in searches.values():
        for i, key in search.leaf_node.items():
            variable = search.nodes[key].variable
            if i not in known and not isinstance(variable, nn.Parameter):
                others.setdefault(i, variable)
    if others:
        named = []
        for i, tensor in others.items():
            origin = rec.origin.get(i)
            made = (f"made to require grad by {origin[1]}" if origin is not None
                    and origin[0] is tensor else "a leaf made outside the modules found")
            named.append(f"a tensor of shape {tuple(tensor.shape)}, {made}")
        count = "1 leaf" if len(others) == 1 else f"{len(others)} leaves"
        notes.append(f"{count} of the step that require grad receive "
                     f"gradient (no parameter of a module or optimizer found): "
                     f"{'; '.join(named[:4])}" + ("; …" if len(named) > 4 else ""))
    return notes
