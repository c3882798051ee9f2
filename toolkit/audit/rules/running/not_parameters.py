"""Learned tensors torch does not register as parameters of a network an optimizer steps, so that
the optimizer built from ``parameters()`` never holds them though a loss trains them
(``unstepped`` failures, called at the end of each audited iteration by
:func:`~toolkit.audit.rules.running.unstepped.end_of_iteration`):

- A learned tensor made a plain tensor: a leaf that requires grad and is no ``Parameter``
  (``torch.empty(n, requires_grad=True)``), held as an attribute of a module of a network an
  optimizer steps, reached by a loss, held by no optimizer and not moved by the script itself
  (a perturbation it steps by hand). The failure is at the line that makes it; its edit makes
  it a ``Parameter`` there, in the file's own spelling (``nn.Parameter(torch.empty(n))``), so
  that the optimizer built from ``parameters()`` steps it. A perturbation of the input made to
  require grad (FGSM) is held by no module; a tensor an optimizer built over a list holds is
  stepped: no finding (:func:`plain_tensors`).
- A parameter of no module, trained beside stepped tensors (:func:`free_parameters`).
- Tensors or modules a module keeps in a plain ``list`` or ``dict``
  (:func:`in_plain_containers`).
- A layer's tensor kept a buffer or a plain tensor beside a learned sibling of its role
  (``unlearned``, :func:`beside_learned_siblings`), or one only a clamp of the script's writes
  (:func:`bounded_constants`)."""

from __future__ import annotations

import ast
import inspect
import os
import re

import torch
from torch import nn

from toolkit.audit.findings import ScriptFinding
from toolkit.audit.record import syntax as S
from toolkit.audit.record.frames import Site, is_user
from toolkit.audit.record.sites import Line
from toolkit.audit.record.unregistered import KeptIn, unregistered
from toolkit.audit.result import plural
from toolkit.audit.rules.running.param_group import group
from toolkit.audit.rules.running.state import WatchState

__all__ = ["beside_learned_siblings", "bounded_constants", "free_parameters",
           "in_plain_containers", "made_at", "plain_tensors"]


def free_parameters(w: WatchState, stepped: dict[int, int]) -> None:
    """A parameter of no module (``log_z = nn.Parameter(torch.zeros(1))``, a GFlowNet's
    partition function; a learned temperature) that a loss trains in a term of its own beside
    terms that train stepped tensors, or through them (``nn.Parameter`` only: gSDE's log
    standard deviation, the scale of the policy's distribution whose mean the actor makes),
    held by no optimizer, not moved by the script itself and not made after an optimizer
    was built (a replacement, :mod:`~toolkit.audit.rules.running.replaced`'s):
    unstepped, a failure at the line that builds the optimizer of those terms, with the
    parameter group that adds it (its learning rate is the optimizer's: the script may want
    its own, as trajectory balance's does)."""
    held_in: dict[str, list[torch.Tensor]] = {}
    for key, (tensor, before) in w.plain_values.items():
        # or a plain leaf the script keeps across iterations (MPO's Lagrange multipliers,
        # ``torch.full(..., requires_grad=True)``), not one made afresh for each (a gradient
        # penalty's interpolates)
        kept = tensor.is_leaf and tensor.requires_grad and \
            w.reached_in.get(key, (0, 0))[1] > w.reached_in.get(key, (0, 0))[0]
        # made after an optimizer of its terms was built: a replacement's, if any (a leaf
        # made for a later phase, before that phase's optimizer, is none: a Gaussian
        # process's likelihood made with the model it is fitted with)
        replacing = key in w.made_leaves and \
            w.made_in.get(key, (0,))[0] > min(w.between.get(key) or {0})
        if not (isinstance(tensor, nn.Parameter) or kept) or key in stepped or replacing or \
                not w.between.get(key) or not w.ledger.live.get(key) or \
                w.owner(key) is not None or not torch.equal(before, tensor.detach()):
            continue
        name = w.bound_name(tensor)
        if name is not None and (key in w.beside or isinstance(tensor, nn.Parameter)):
            # in a term of its own, or, made a parameter, between the loss and stepped
            # tensors (gSDE's exploration scale, beside the actor's mean in the likelihood)
            _report_free(w, name, f"[{name}]", [tensor])
        elif name is None and (holder := _container_of(w, tensor)) is not None:
            # held by a module the script never calls, between the loss and stepped tensors
            # (Meta-SGD's learned learning rates in an ``nn.ParameterList``, scaling the
            # inner step of the parameters the outer loss trains), or in a term beside them
            # (a Gaussian process's likelihood, whose noise the marginal likelihood reads
            # through its methods): one finding for the container
            held_in.setdefault(holder, []).append(tensor)
    for name, tensors in held_in.items():
        # a parameter of a network called by parts is named by its path: a list of itself
        one = len(tensors) == 1 and "." in name
        _report_free(w, name, f"[{name}]" if one else f"list({name}.parameters())", tensors)


def _container_of(w: WatchState, tensor: torch.Tensor) -> str | None:
    """The name the script's frames hold a module by that holds ``tensor`` and that the
    script never calls (a ``ParameterList``), or ``None``. Where the script calls parts of
    that module (a policy used through its methods, whose actor and critic it calls), the
    tensor is one parameter of it, named by its path there (``policy.log_std``)."""
    called = {id(m) for m, _ in w.called_networks()}
    for name, value in w.scope.items():
        if not isinstance(value, nn.Module) or name.startswith("_"):
            continue
        path = next((n for n, p in value.named_parameters() if p is tensor), None)
        if path is not None:
            if any(id(m) in called for m in value.modules()):
                return f"{name}{S.attribute_path(path)}"
            return name
    return None


def _report_free(w: WatchState, name: str, params: str, tensors: list[torch.Tensor]) -> None:
    """The ``unstepped`` finding of :func:`free_parameters`: ``name`` (the one tensor's, or the
    container's of ``tensors``) added to the optimizer of its siblings' terms as ``params``."""
    key = id(tensors[0])
    # the optimizer of the term's siblings: one that holds parameters of no module as
    # this is (MPO's dual optimizer, beside the policy's), else the first
    plain = [i for i in sorted(w.between[key]) if all(
        w.owner(id(p)) is None for g in w.optimizers[i].param_groups for p in g["params"])]
    opt = w.optimizers[(plain or sorted(w.between[key]))[0]]
    built = w.built_at.get(id(opt))
    opt_name = w.assigned(built)
    edits: tuple = ()
    # one tensor, into the list the optimizer was built over (as the published line has
    # it), where its one group is that list; else a group of its own
    e = w.fixes.listed_with(built.path, built.line, name) if built is not None and \
        params == f"[{name}]" and len(opt.param_groups) == 1 else None
    if e is None and built is not None and opt_name:
        e = w.fixes.insert_after(built.path, built.line, f"{opt_name}.add_param_group("
                                 f"{group(w, opt, params, tensors)})")
    edits = (e,) if e is not None else ()
    srcs = {s.site.shown() for s in w.ledger.live[key] if s.site is not None}
    w.add(ScriptFinding(
        "unstepped", w.iteration,
        f"`{name}` gets gradient and no optimizer steps it, though the same loss trains "
        + ("through it tensors an optimizer steps" if tensors[1:] or key not in w.beside else
           "in terms beside its own tensors an optimizer steps"),
        (name,), (name,), ((built.shown(),) if built is not None else ()) + tuple(
            sorted(srcs)), edits,
        advice=f"add it to {('`' + opt_name + '`') if opt_name else 'the optimizer'}"
               f" (optimizer.add_param_group({{'params': {params}}}), with its own "
               f"learning rate if the method gives it one)", step=w.step_events - 1,
        concerned=(name,)))


def plain_tensors(w: WatchState, stepped: dict[int, int]) -> None:
    """Learned tensors made plain tensors (see the module's docstring): per network, a failure
    at the lines that make them, with the edits that make them parameters there, or, where
    a line is not found, the parameter group that adds them to the network's optimizer."""
    seen, w.plain_values = w.plain_values, {}
    found: dict[int, list[tuple[int, torch.Tensor, str, nn.Module, str]]] = {}
    networks: dict[int, tuple[nn.Module, str]] = {}
    for key, (tensor, before) in seen.items():
        if key in stepped or not w.ledger.live.get(key) or not tensor.is_leaf or \
                not tensor.requires_grad or not torch.equal(before, tensor.detach()):
            continue   # stepped, its gradient not there, or moved by the script itself
        held = next((k for k in w.kept_plainly() if k.value is tensor and not k.item), None)
        if held is None:
            continue
        network, root, path, module, attr = held[:5]
        if not any(id(p) in stepped for p in network.parameters()):
            continue
        networks[id(network)] = (network, root)
        found.setdefault(id(network), []).append((key, tensor, path, module, attr))
    for net_id, tensors in found.items():
        network, root = networks[net_id]
        rank = {id(m): i for i, m in enumerate(network.modules())}
        tensors.sort(key=lambda x: (rank.get(id(x[3]), len(rank)), x[4]))
        index = min(stepped[id(p)] for p in network.parameters() if id(p) in stepped)
        opt = w.optimizers[index]
        built = w.built_at.get(id(opt))
        shown = tuple(f"{root}.{path}" for _, _, path, _, _ in tensors)
        made = [made_at(type(module), attr) for _, _, _, module, attr in tensors]
        places = sorted((m for m in dict.fromkeys(made) if m is not None),
                        key=lambda m: (m[0], m[1].lineno))
        edits: list = []
        at: list[str] = []
        if None not in made:
            for m in places:
                edit = w.fixes.as_parameter(m[0], m[1], m[2])
                if edit is None:
                    edits = []
                    break
                edits.append(edit)
                at.append(Site(m[0], m[1].lineno, None).shown())
        opt_name = w.assigned(built)
        concerned: tuple[str, ...] = shown
        step = w.step_events - 1
        if not edits:
            at = [built.shown()] if built is not None else []
            if built is not None and opt_name:
                params = "[" + ", ".join(f"{root}{S.attribute_path(path)}"
                                         for _, _, path, _, _ in tensors) + "]"
                added = group(w, opt, params, [t for _, t, _, _, _ in tensors])
                e = w.fixes.insert_after(built.path, built.line,
                                   f"{opt_name}.add_param_group({added})")
                edits = [e] if e is not None else []
        else:
            # the edit puts them in the network's parameters, among the tensors the
            # optimizer holds: from its first step the positions of those tensors move
            concerned = ("*",)
            step = _first_step(w, index)
        srcs = {s for k, _, _, _, _ in tensors for s in w.ledger.live[k] if s.site is not None}
        at += sorted({s.site.shown() for s in srcs})
        holders = sorted({type(m).__name__ for _, _, _, m, _ in tensors})
        get, them, plain = ("gets", "it", "a plain tensor that requires grad") \
            if len(tensors) == 1 else ("get", "them", "plain tensors that require grad")
        if any(f.kind == "unstepped" and f.tensors == shown for f in w.findings.values()):
            continue   # found at an earlier iteration
        w.add(ScriptFinding(
            "unstepped", w.iteration,
            f"{plural(len(tensors), 'tensor')} of {root} {get} gradient and no optimizer "
            f"steps {them}: {', '.join(holders)} holds {them} as {plain}, not as "
            f"nn.Parameter, so {root}.parameters() does not hold {them}, though an optimizer "
            f"steps the rest of {root}",
            shown, shown, tuple(at), tuple(edits),
            advice="make them parameters where they are made (nn.Parameter(...)), or add them "
                   f"to {('`' + opt_name + '`') if opt_name else 'the optimizer'}",
            step=step, concerned=concerned))


#: a layer's tensor of a role, for its weight or for its bias: ``weight_sigma``, ``sigma_bias``
_OF_A_HALF = re.compile(r"^(weight|bias)(_\w+)$|^(\w+_)(weight|bias)$")


def _sibling(name: str) -> str | None:
    """The name of the tensor of the same role for the layer's other half (``bias_rho`` for
    ``weight_rho``, ``sigma_weight`` for ``sigma_bias``), or ``None`` for a name of no role."""
    m = _OF_A_HALF.match(name)
    if m is None:
        return None
    half, role = (m[1], m[2]) if m[1] else (m[4], m[3])
    other = "bias" if half == "weight" else "weight"
    return f"{other}{role}" if m[1] else f"{role}{other}"


def beside_learned_siblings(w: WatchState, stepped: dict[int, int]) -> None:
    """A learned tensor kept out of ``parameters()`` beside its sibling: a layer's weight and
    its bias each carry a tensor of one role (Bayes by Backprop's ``weight_rho`` and
    ``bias_rho``, NoisyNet's ``weight_sigma`` and ``bias_sigma``), and one is a parameter an
    optimizer steps, which got gradient, while the other is a buffer, or a plain tensor, that
    does not require grad and that nothing wrote between two audited iterations. No gradient
    reaches it and no optimizer holds it: the layer learns one half of the role and keeps the
    other at its first values (Blundell et al. 2015 and Fortunato et al. 2018 learn every
    scale, as the published layers make them parameters). A tensor of a role of one half
    only (a spectral norm's ``weight_u``), written during the run (a noise buffer drawn
    afresh), or a buffer beside a buffer (a fixed prior for both halves) is none.

    A failure per layer class and tensor, found at the second audited iteration that sees
    it, at the line that makes it; the edit makes it a parameter there
    (``self.register_buffer("b", v)`` -> ``self.b = nn.Parameter(v)``)."""
    found: dict[tuple[type, str], list[tuple[str, str, int, str]]] = {}
    for network, root in w.called_networks():
        if not any(id(p) in stepped for p in network.parameters()):
            continue
        for path, module in network.named_modules():
            for name, (tensor, how) in _kept(module).items():
                sibling = _sibling(name)
                learned = module._parameters.get(sibling) if sibling is not None else None
                if learned is None or id(learned) not in stepped or \
                        not w.ledger.live.get(id(learned)) or not _unwritten(w, tensor):
                    continue
                found.setdefault((type(module), name), []).append(
                    (_path(root, path, name), how, stepped[id(learned)], sibling))
    for (cls, name), tensors in found.items():
        how, index, sibling = tensors[0][1:]
        _unlearned(w, cls, name, tensors, index,
                   f"`{cls.__name__}.{name}` is {how} that nothing writes, beside `{sibling}`, "
                   f"a parameter {{stepper}} steps: the layer learns the role for one half and "
                   f"keeps the other at its first values",
                   f"if it is meant to stay fixed, keep {sibling} fixed as well")


def bounded_constants(w: WatchState, stepped: dict[int, int]) -> None:
    """A learned scalar kept as a plain tensor or a buffer, which the script bounds in place
    (``model.logit_scale.clamp_(0, math.log(100))`` after each step, CLIP's in open_clip;
    ``self.temp.clamp_(0.001, 0.5)`` in the forward, ALBEF's): a tensor of a network an
    optimizer steps, no gradient reaches it, and between two audited iterations only a clamp
    wrote it (its values did not change). A bound is for a value that moves: the method learns
    it (the published models make it an ``nn.Parameter``). A clamp of data (an adversarial
    example) or of a buffer something else moves (a running variance, floored after its
    update) is none. A failure at the line that makes it and at the clamp; the edit makes it
    a parameter where it is made."""
    rec = w.staged.rec
    bounds = [] if rec is None else [(t, line) for ref, line in rec.bounded.values()
                                      if (t := ref()) is not None]
    if not bounds:
        return
    found: dict[tuple[type, str], list[tuple[str, str, int, object]]] = {}
    for network, root in w.called_networks():
        held = [stepped[id(p)] for p in network.parameters() if id(p) in stepped]
        if not held:
            continue
        for path, module in network.named_modules():
            for name, (tensor, how) in _kept(module).items():
                line = next((line for t, line in bounds if t.data_ptr() == tensor.data_ptr()
                             and t.shape == tensor.shape), None)
                if line is not None and _unwritten(w, tensor):
                    found.setdefault((type(module), name), []).append(
                        (_path(root, path, name), how, min(held), line))
    for (cls, name), tensors in found.items():
        how, index, line = tensors[0][1:]
        _unlearned(w, cls, name, tensors, index,
                   f"`{cls.__name__}.{name}` is {how} that only the script's clamp writes "
                   f"(line {line.number}), in a network {{stepper}} steps: a bound is for a "
                   f"value that learns", "if it is meant to stay fixed, the clamp does nothing",
                   (Site(line.path, line.number, None).shown(),))


def _kept(module: nn.Module) -> dict[str, tuple[torch.Tensor, str]]:
    """The tensors ``module`` keeps out of its parameters, floating and not requiring grad:
    its buffers and its plain tensor attributes, by name, with which they are."""
    kept = {n: (b, "a buffer") for n, b in module._buffers.items() if b is not None}
    kept.update({n: (v, "a plain tensor") for n, v in vars(module).items()
                 if isinstance(v, torch.Tensor) and not isinstance(v, nn.Parameter)
                 and not n.startswith("_")})
    return {n: (t, how) for n, (t, how) in kept.items()
            if t.is_floating_point() and not t.requires_grad}


def _unwritten(w: WatchState, tensor: torch.Tensor) -> bool:
    """Whether ``tensor`` was seen at an earlier audited iteration with the values it holds
    now (first seen now: not yet)."""
    seen = w.kept_seen.setdefault(id(tensor), (tensor, tensor.detach().clone(), w.iteration))
    return seen[0] is tensor and seen[2] != w.iteration and torch.equal(seen[1], tensor.detach())


def _first_step(w: WatchState, index: int) -> int:
    """The number of optimizer ``index``'s first step of the run (the last step's, where it
    never stepped)."""
    return next((i for i, e in enumerate(sorted(w.step_optimizer))
                 if w.step_optimizer[e] == index), w.step_events - 1)


def _path(root: str, path: str, name: str) -> str:
    return f"{root}.{path}.{name}" if path else f"{root}.{name}"


def _unlearned(w: WatchState, cls: type, name: str, tensors: list, index: int, why: str,
               otherwise: str, at: tuple[str, ...] = ()) -> None:
    """The ``unlearned`` failure of ``cls.name`` (``tensors``: the layers' paths first, then
    how it is kept), made a parameter where it is made; ``why`` has a ``{stepper}`` for the
    optimizer ``index`` (of the network it belongs to) and ``otherwise`` says what keeping
    it fixed asks."""
    shown = tuple(t[0] for t in tensors)
    if any(f.kind == "unlearned" and f.tensors == shown for f in w.findings.values()):
        return   # found at an earlier iteration
    how = tensors[0][1]
    made = _registered_at(cls, name) if how == "a buffer" else made_at(cls, name)
    edit = None if made is None else w.fixes.buffer_as_parameter(*made) \
        if how == "a buffer" else w.fixes.as_parameter(*made)
    # the edit puts it among the tensors the optimizer holds: from that optimizer's first
    # step on, the positions of those tensors move
    step = _first_step(w, index)
    opt = w.assigned(w.built_at.get(id(w.optimizers[index])))
    w.add(ScriptFinding(
        "unlearned", w.iteration,
        why.format(stepper=f"`{opt}`" if opt else "an optimizer")
        + f" (no gradient reaches {how}, and parameters() does not hold it)",
        shown, shown,
        (() if made is None else (Site(made[0], made[1].lineno, None).shown(),)) + at,
        () if edit is None else (edit,),
        advice=f"make {name} a parameter where it is made (nn.Parameter(...)); {otherwise}",
        step=step, concerned=("*",)))


def _registered_at(cls: type, name: str) -> tuple[str, ast.Call, str] | None:
    """Where the user's class ``cls`` (or a class of the user's it derives from) registers its
    buffer ``name`` (``self.register_buffer("name", value)``, a statement of its own in a
    method): the file, the call and how that file spells ``nn.Parameter``; ``None`` when it
    is not one such call, or the file imports no name for ``Parameter``."""
    found = _user_class(cls)
    if found is None:
        return None
    klass, path, tree, _ = found
    calls = [st.value for node in ast.walk(tree)
             if isinstance(node, ast.ClassDef) and node.name == klass.__name__
             for st in ast.walk(node) if isinstance(st, ast.Expr)
             and isinstance(st.value, ast.Call) and isinstance(st.value.func, ast.Attribute)
             and st.value.func.attr == "register_buffer" and st.value.args
             and isinstance(st.value.args[0], ast.Constant) and st.value.args[0].value == name]
    spelled = _parameter_name(tree)
    return (path, calls[0], spelled) if len(calls) == 1 and spelled is not None else None


def _user_class(cls: type) -> tuple[type, str, ast.Module, str] | None:
    """The first class of the user's in ``cls``'s bases, itself first, whose file parses: the
    class, its file, the file's tree and text; ``None`` where none is."""
    for klass in cls.__mro__:
        if klass in (nn.Module, object):
            break
        try:
            path = inspect.getsourcefile(klass)
        except (TypeError, OSError):
            continue
        parsed = S.syntax_tree(path) if path is not None and is_user(path) else None
        if parsed is not None:
            return klass, path, *parsed
    return None


def in_plain_containers(w: WatchState, stepped: set[int]) -> set[int]:
    """Learned tensors a module of the model keeps in a plain ``list`` or ``dict`` (or modules
    kept so), which torch does not register: the loss trains them, and the optimizer built
    from ``model.parameters()`` never holds them (a hypernetwork's layer embeddings appended
    to ``self.z_list = []``). A failure at the line that keeps them and the optimizer's, whose
    edit registers the container where it is made (``torch.nn.ParameterList([])``), as the
    step audit writes it (:func:`~toolkit.audit.record.unregistered.unregistered`)."""
    unstepped = [k for k, live in w.ledger.live.items()
                 if live and k not in stepped and k in w.ledger.tensors
                 and w.ledger.tensors[k].is_leaf]
    # tensors of no module the script calls, then those of modules it calls itself that the
    # model keeps in a plain container (bootstrapped DQN's heads in a list, each called)
    for keys in ([k for k in unstepped if w.owner(k) is None],
                 [k for k in unstepped if w.owner(k) is not None]):
        if keys and _report_container(w, [w.ledger.tensors[k] for k in keys]):
            return set(keys)
    return set()


def _report_container(w: WatchState, joining: list[torch.Tensor]) -> bool:
    """The failure of :func:`in_plain_containers` for the tensors ``joining``, when an
    optimizer's model keeps every one of them in plain containers; whether it was made."""
    names = w.names()
    for index, opt in enumerate(w.optimizers):
        built = w.built_at.get(id(opt))
        if built is None:
            continue
        line = Line(os.path.basename(built.path), built.line, "", built.text(), built.path)
        found = unregistered(opt, line, w.built_scope.get(id(opt), {}), None, joining)
        if found is None or not all(isinstance(f, KeptIn) and f.kind != "Parameter"
                                    for f in found.found):
            continue
        edits = w.fixes.registered(found).edits
        keys = tuple(f"{found.model}:{i}" for i in range(len(joining)))
        srcs = {s for t in joining for s in w.ledger.live[id(t)] if s.site is not None}
        at = (*(str(x) for x in found.lines), built.shown(),
              *sorted({s.site.shown() for s in srcs}))
        shown = tuple(dict.fromkeys(found.kept))
        wanted = {id(t) for t in joining}
        named: dict[int, str] = {}
        for kept in w.kept_plainly():
            if kept.item and id(kept.value) in wanted and not kept.attr.startswith("_"):
                named.setdefault(id(kept.value), kept.name)
        # a module kept in the container: its tensors by the container's name
        # (``policy_net.net_list.0.fc1.weight``), not the name the code calls it by
        in_module: dict[int, str] = {}
        for place in found.found:
            items = place.value.items() if isinstance(place.value, dict) else \
                enumerate(place.value) if isinstance(place.value, (list, tuple)) else ()
            for i, item in items:
                if isinstance(item, nn.Module):
                    for p_name, p in item.named_parameters():
                        if id(p) in wanted:
                            in_module.setdefault(id(p), f"{place.label}.{i}.{p_name}")
        order = {k: n for n, k in enumerate(in_module)}   # as the container holds them
        joining = sorted(joining, key=lambda t: order.get(id(t), len(order)))
        w.add(ScriptFinding(
            "unstepped", w.iteration,
            f"{plural(len(joining), 'tensor')} the loss trains, kept in "
            f"{', '.join(shown)} (a plain container torch does not register), are in no "
            f"optimizer: {w.optimizer_text(index, built) or 'the optimizer'} steps "
            f"{found.model}.parameters(), which never holds them",
            keys, tuple(in_module.get(id(t)) or names.get(id(t), named.get(id(t), shown[0]))
                        for t in joining), at, edits,
            advice=f"register {', '.join(shown)} where it is made (torch.nn.ParameterList, "
                   f"torch.nn.ModuleList), or requires_grad_(False) if it is meant to stay "
                   f"fixed", step=w.step_events - 1, concerned=("*",)))
        return True
    return False


def made_at(cls: type, attr: str) -> tuple[str, ast.expr, str] | None:
    """Where the user's class ``cls`` (or a class of the user's it derives from) makes its
    attribute ``attr`` (``self.bias = torch.empty(n, requires_grad=True)`` in a method): the
    file, the assigned expression and how that file spells ``nn.Parameter``; ``None`` when
    it is not one such assignment, or the file imports no name for ``Parameter``."""
    found = _user_class(cls)
    if found is None:
        return None
    klass, path, tree, text = found
    values = [v for node in ast.walk(tree)
              if isinstance(node, ast.ClassDef) and node.name == klass.__name__
              for v in _assigned(node, attr)]
    # the one that makes it require grad, where the class assigns it more than once
    made = [v for v in values if "requires_grad" in S.segment(text, v)] or values[:1]
    spelled = _parameter_name(tree)
    return (path, made[0], spelled) if len(made) == 1 and spelled is not None else None


def _assigned(node: ast.ClassDef, attr: str) -> list[ast.expr]:
    """The expressions the methods of ``node`` assign to ``self.attr``."""
    out = []
    for method in node.body:
        if not isinstance(method, ast.FunctionDef) or not method.args.args:
            continue
        me = method.args.args[0].arg
        for st in ast.walk(method):
            targets = st.targets if isinstance(st, ast.Assign) else [
                st.target] if isinstance(st, ast.AnnAssign) and st.value is not None else []
            if any(isinstance(t, ast.Attribute) and t.attr == attr
                   and isinstance(t.value, ast.Name) and t.value.id == me for t in targets):
                out.append(st.value)
    return [v for v in out if v is not None]


def _parameter_name(tree: ast.Module) -> str | None:
    """How a file spells ``torch.nn.Parameter`` by its top-level imports: ``Parameter``
    (imported by name), ``nn.Parameter`` (``from torch import nn``), ``torch.nn.Parameter``."""
    names = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module in ("torch.nn", "torch.nn.parameter"):
            for a in node.names:
                if a.name == "Parameter":
                    names.setdefault(0, a.asname or a.name)
        elif isinstance(node, ast.ImportFrom) and node.module == "torch":
            for a in node.names:
                if a.name == "nn":
                    names.setdefault(1, f"{a.asname or a.name}.Parameter")
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "torch.nn" and a.asname:
                    names.setdefault(1, f"{a.asname}.Parameter")
                elif a.name in ("torch", "torch.nn") and (a.asname is None or a.name == "torch"):
                    names.setdefault(2, f"{a.asname or 'torch'}.nn.Parameter")
    return names[min(names)] if names else None
