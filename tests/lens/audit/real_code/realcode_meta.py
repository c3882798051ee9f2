"""Meta-learning from public code: MAML's inner loop written by hand with fast weights, with the
``higher`` library's differentiable inner loop, and with torchmeta's parameter dictionaries.

Each builder takes ``seed`` and returns a :class:`RealCase`; the text is ours, the structure
(modules, optimizers, order of calls, bug) is the repository's, at tiny sizes (a few channels,
two tasks of three classes, two inner steps). Each step returns the meta-loss the source
backpropagates into its meta-optimizer.

The ``higher`` cases call the real library (``higher`` 0.2.1 from PyPI) and are skipped where it
is not installed.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable, Iterator

import pytest
import torch
from realcode_common import RealCase
from torch import nn
from torch.nn import functional as F

# --- dragen1860/MAML-Pytorch meta.py, learner.py@98a00d41724c133bd29619a2fb2cc46dd128a368:
# Meta.forward adapts a functional Learner (its weights in a ParameterList, BatchNorm running
# statistics kept as Parameters with requires_grad=False) to each task with fast weights
# (theta - update_lr * grad, grad from torch.autograd.grad), evaluates the query loss before
# and after the first update under torch.no_grad(), takes update_step inner steps, and steps
# one Adam on the last query loss averaged over tasks. torch.autograd.grad is called without
# create_graph: the inner gradients are constants, so the meta-gradient is MAML's first-order
# approximation (dragen1860/MAML-Pytorch#17, #26, #32, #63), but every meta-parameter still
# gets its gradient through theta - update_lr * grad: the step trains what it steps. The
# second case is the same step with create_graph=True, as #26 proposes (second order).


class Learner(nn.Module):
    """A network run from a config list, with weights that can be passed in (fast weights)."""

    def __init__(self, config: list[tuple[str, list[int]]]) -> None:
        super().__init__()
        self.config = config
        self.vars = nn.ParameterList()
        self.vars_bn = nn.ParameterList()
        for name, param in config:
            if name == "conv2d":
                weight = nn.Parameter(torch.ones(*param[:4]))
                nn.init.kaiming_normal_(weight)
                self.vars.extend([weight, nn.Parameter(torch.zeros(param[0]))])
            elif name == "linear":
                weight = nn.Parameter(torch.ones(*param))
                nn.init.kaiming_normal_(weight)
                self.vars.extend([weight, nn.Parameter(torch.zeros(param[0]))])
            elif name == "bn":
                self.vars.extend([nn.Parameter(torch.ones(param[0])),
                                  nn.Parameter(torch.zeros(param[0]))])
                self.vars_bn.extend([nn.Parameter(torch.zeros(param[0]), requires_grad=False),
                                     nn.Parameter(torch.ones(param[0]), requires_grad=False)])

    def forward(self, x: torch.Tensor, vars: list[torch.Tensor] | None = None,
                bn_training: bool = True) -> torch.Tensor:
        if vars is None:
            vars = list(self.vars)
        idx = bn_idx = 0
        for name, param in self.config:
            if name == "conv2d":
                x = F.conv2d(x, vars[idx], vars[idx + 1], stride=param[4], padding=param[5])
                idx += 2
            elif name == "linear":
                x = F.linear(x, vars[idx], vars[idx + 1])
                idx += 2
            elif name == "bn":
                x = F.batch_norm(x, self.vars_bn[bn_idx], self.vars_bn[bn_idx + 1],
                                 weight=vars[idx], bias=vars[idx + 1], training=bn_training)
                idx += 2
                bn_idx += 2
            elif name == "relu":
                x = F.relu(x)
            elif name == "flatten":
                x = x.view(x.size(0), -1)
        return x

    def parameters(self, recurse: bool = True) -> Iterator[nn.Parameter]:
        """Only the weights, as the source's override returns ``self.vars``."""
        return iter(self.vars)


def dragen_maml(seed: int, *, create_graph: bool = False, n_way: int = 3, k_spt: int = 1,
                k_qry: int = 2, task_num: int = 2, update_step: int = 2,
                imgsz: int = 9) -> RealCase:
    torch.manual_seed(seed)
    config = [("conv2d", [4, 1, 3, 3, 2, 0]), ("relu", [1]), ("bn", [4]),
              ("conv2d", [4, 4, 3, 3, 2, 0]), ("relu", [1]), ("bn", [4]),
              ("flatten", []), ("linear", [n_way, 4])]
    net = Learner(config)
    meta_optim = torch.optim.Adam(net.parameters(), lr=1e-3)
    update_lr = 0.4
    x_spt = torch.randn(task_num, n_way * k_spt, 1, imgsz, imgsz)
    y_spt = torch.randint(0, n_way, (task_num, n_way * k_spt))
    x_qry = torch.randn(task_num, n_way * k_qry, 1, imgsz, imgsz)
    y_qry = torch.randint(0, n_way, (task_num, n_way * k_qry))

    def step() -> torch.Tensor:
        losses_q: list[torch.Tensor | float] = [0.0 for _ in range(update_step + 1)]
        for i in range(task_num):
            logits = net(x_spt[i], vars=None, bn_training=True)
            loss = F.cross_entropy(logits, y_spt[i])
            grad = torch.autograd.grad(loss, list(net.parameters()), create_graph=create_graph)
            fast_weights = [w - update_lr * g for g, w in zip(grad, net.parameters())]
            with torch.no_grad():
                logits_q = net(x_qry[i], list(net.parameters()), bn_training=True)
                losses_q[0] += F.cross_entropy(logits_q, y_qry[i])
            with torch.no_grad():
                logits_q = net(x_qry[i], fast_weights, bn_training=True)
                losses_q[1] += F.cross_entropy(logits_q, y_qry[i])
            for k in range(1, update_step):
                logits = net(x_spt[i], fast_weights, bn_training=True)
                loss = F.cross_entropy(logits, y_spt[i])
                grad = torch.autograd.grad(loss, fast_weights, create_graph=create_graph)
                fast_weights = [w - update_lr * g for g, w in zip(grad, fast_weights)]
                logits_q = net(x_qry[i], fast_weights, bn_training=True)
                losses_q[k + 1] += F.cross_entropy(logits_q, y_qry[i])
        loss_q = losses_q[-1] / task_num
        assert isinstance(loss_q, torch.Tensor)
        return loss_q

    return RealCase("dragen_maml_second_order" if create_graph else "dragen_maml",
                    "dragen1860/MAML-Pytorch meta.py@98a00d41724c133bd29619a2fb2cc46dd128a368",
                    "https://github.com/dragen1860/MAML-Pytorch/issues/26" if create_graph else
                    "https://github.com/dragen1860/MAML-Pytorch/issues/32", "correct", step,
                    meta_optim, {"net": net})


# --- facebookresearch/higher examples/maml-omniglot.py@15a247ac06cac0d22601322677daff0dcfff062e:
# train() builds an SGD inner optimizer over net.parameters() and, for each task, enters
# higher.innerloop_ctx(net, inner_opt, copy_initial_weights=False), takes n_inner_iter
# differentiable steps (diffopt.step) on the support loss with the patched fnet, and
# backpropagates the query loss of the adapted fnet into net (its .grad summed over the tasks,
# as the step's sum does here); meta_opt (Adam) steps net. The default copy_initial_weights=True
# starts the unrolled loop from copies of the weights that are not on the tape: the
# meta-parameters get no gradient (facebookresearch/higher#69 "Grad of model parameters is
# None", the docstring of innerloop_ctx, #30). track_higher_grads=False (meant as first-order
# MAML) detaches the fast weights at every step: again no meta-gradient
# (facebookresearch/higher#129, #63; the example itself keeps it True for training).


class Flatten(nn.Module):
    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return input.view(input.size(0), -1)


def higher_maml(seed: int, *, bug: str | None = None, n_way: int = 3, k_spt: int = 1,
                k_qry: int = 2, task_num: int = 2, n_inner_iter: int = 2, ch: int = 4,
                imgsz: int = 22) -> RealCase:
    higher = pytest.importorskip("higher", reason="the corpus extra (higher) is not installed")
    torch.manual_seed(seed)
    net = nn.Sequential(
        nn.Conv2d(1, ch, 3), nn.BatchNorm2d(ch, momentum=1, affine=True), nn.ReLU(inplace=True),
        nn.MaxPool2d(2, 2),
        nn.Conv2d(ch, ch, 3), nn.BatchNorm2d(ch, momentum=1, affine=True), nn.ReLU(inplace=True),
        nn.MaxPool2d(2, 2),
        nn.Conv2d(ch, ch, 3), nn.BatchNorm2d(ch, momentum=1, affine=True), nn.ReLU(inplace=True),
        nn.MaxPool2d(2, 2),
        Flatten(), nn.Linear(ch, n_way))
    meta_opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    x_spt = torch.randn(task_num, n_way * k_spt, 1, imgsz, imgsz)
    y_spt = torch.randint(0, n_way, (task_num, n_way * k_spt))
    x_qry = torch.randn(task_num, n_way * k_qry, 1, imgsz, imgsz)
    y_qry = torch.randint(0, n_way, (task_num, n_way * k_qry))

    def inner_loop(i: int, fnet: nn.Module, diffopt: object) -> torch.Tensor:
        for _ in range(n_inner_iter):
            spt_logits = fnet(x_spt[i])
            spt_loss = F.cross_entropy(spt_logits, y_spt[i])
            diffopt.step(spt_loss)  # type: ignore[attr-defined]
        qry_logits = fnet(x_qry[i])
        return F.cross_entropy(qry_logits, y_qry[i])

    def step() -> torch.Tensor:
        net.train()
        inner_opt = torch.optim.SGD(net.parameters(), lr=1e-1)
        qry_losses = []
        for i in range(task_num):
            if bug == "copy":
                with higher.innerloop_ctx(  # audit: fix here [higher_maml_copy]
                        net, inner_opt) as (fnet, diffopt):
                    qry_losses.append(inner_loop(i, fnet, diffopt))
            elif bug == "no_track":
                with higher.innerloop_ctx(  # audit: fix here [higher_maml_no_track]
                        net, inner_opt, copy_initial_weights=False,
                        track_higher_grads=False) as (fnet, diffopt):
                    qry_losses.append(inner_loop(i, fnet, diffopt))
            else:
                with higher.innerloop_ctx(
                        net, inner_opt, copy_initial_weights=False) as (fnet, diffopt):
                    qry_losses.append(inner_loop(i, fnet, diffopt))
        return torch.stack(qry_losses).sum()

    name = "higher_maml" if bug is None else f"higher_maml_{bug}"
    confirms = {None: "https://github.com/facebookresearch/higher/issues/69",
                "copy": "https://github.com/facebookresearch/higher/issues/69",
                "no_track": "https://github.com/facebookresearch/higher/issues/129"}[bug]
    return RealCase(name, "facebookresearch/higher examples/maml-omniglot.py"
                    "@15a247ac06cac0d22601322677daff0dcfff062e", confirms,
                    "correct" if bug is None else "dead", step, meta_opt, {"net": net})


# --- tristandeleu/pytorch-maml maml/metalearners/maml.py, maml/model.py
# @44104272a0140b35e2223ba68750e7e715315653, with torchmeta's MetaModule and
# gradient_update_parameters (tristandeleu/pytorch-meta torchmeta/utils/gradient_based.py
# @d55d89ebd47f340180267106bde3e4b723f23762): get_outer_loss adapts the model to each task
# (adapt: params=None, so the first inner gradient is taken on the model's own parameters,
# tristandeleu/pytorch-maml#5), each inner step autograd.grad with create_graph=not
# first_order and params[name] - step_size * grad; the query loss runs the model with the
# adapted dictionary and the mean over tasks is backpropagated into Adam. Only the MetaModule
# layers (conv, linear) are adapted; the plain BatchNorm2d (track_running_stats=False) keeps
# its own affine weights, trained by the outer loss only. learn_step_size with
# per_param_step_size adds one step size per parameter to the meta-optimizer (Meta-SGD).


class MetaModule(nn.Module):
    """torchmeta's base: ``forward(inputs, params)`` with a dictionary of tensors."""

    def meta_named_parameters(self) -> Iterator[tuple[str, nn.Parameter]]:
        for prefix, module in self.named_modules():
            if isinstance(module, MetaModule):
                for name, p in module._parameters.items():
                    if p is not None:
                        yield (f"{prefix}.{name}" if prefix else name), p

    def get_subdict(self, params: OrderedDict[str, torch.Tensor] | None, key: str
                    ) -> OrderedDict[str, torch.Tensor] | None:
        if params is None:
            return None
        key_re = re.compile(rf"^{re.escape(key)}\.(.+)")
        names = [key_re.sub(r"\1", k) for k in params if key_re.match(k)]
        return OrderedDict((name, params[f"{key}.{name}"]) for name in names) or None


class MetaConv2d(nn.Conv2d, MetaModule):
    def forward(self, input: torch.Tensor,  # type: ignore[override]
                params: OrderedDict[str, torch.Tensor] | None = None) -> torch.Tensor:
        if params is None:
            params = OrderedDict(self.named_parameters())
        return self._conv_forward(input, params["weight"], params.get("bias"))


class MetaLinear(nn.Linear, MetaModule):
    def forward(self, input: torch.Tensor,  # type: ignore[override]
                params: OrderedDict[str, torch.Tensor] | None = None) -> torch.Tensor:
        if params is None:
            params = OrderedDict(self.named_parameters())
        return F.linear(input, params["weight"], params.get("bias"))


class MetaSequential(nn.Sequential, MetaModule):
    def forward(self, input: torch.Tensor,  # type: ignore[override]
                params: OrderedDict[str, torch.Tensor] | None = None) -> torch.Tensor:
        for name, module in self._modules.items():
            if isinstance(module, MetaModule):
                input = module(input, params=self.get_subdict(params, name))
            else:
                input = module(input)
        return input


def conv_block(in_channels: int, out_channels: int) -> MetaSequential:
    return MetaSequential(OrderedDict([
        ("conv", MetaConv2d(in_channels, out_channels, kernel_size=3, stride=1, padding=1,
                            bias=True)),
        ("norm", nn.BatchNorm2d(out_channels, momentum=1.0, track_running_stats=False)),
        ("relu", nn.ReLU()),
        ("pool", nn.MaxPool2d(2))]))


class MetaConvModel(MetaModule):
    def __init__(self, in_channels: int, out_features: int, hidden_size: int) -> None:
        super().__init__()
        self.features = MetaSequential(OrderedDict(
            (f"layer{i + 1}", conv_block(in_channels if i == 0 else hidden_size, hidden_size))
            for i in range(4)))
        self.classifier = MetaLinear(hidden_size, out_features, bias=True)

    def forward(self, inputs: torch.Tensor,  # type: ignore[override]
                params: OrderedDict[str, torch.Tensor] | None = None) -> torch.Tensor:
        features = self.features(inputs, params=self.get_subdict(params, "features"))
        features = features.view((features.size(0), -1))
        return self.classifier(features, params=self.get_subdict(params, "classifier"))


def gradient_update_parameters(model: MetaModule, loss: torch.Tensor,
                               params: OrderedDict[str, torch.Tensor] | None = None,
                               step_size: torch.Tensor | dict[str, torch.Tensor] | float = 0.5,
                               first_order: bool = False) -> OrderedDict[str, torch.Tensor]:
    if params is None:
        params = OrderedDict(model.meta_named_parameters())
    grads = torch.autograd.grad(loss, list(params.values()), create_graph=not first_order)
    updated: OrderedDict[str, torch.Tensor] = OrderedDict()
    for (name, param), grad in zip(params.items(), grads):
        size = step_size[name] if isinstance(step_size, dict) else step_size
        updated[name] = param - size * grad
    return updated


def pytorch_maml(seed: int, *, first_order: bool = False, learn_step_size: bool = False,
                 num_ways: int = 3, num_shots: int = 1, num_shots_test: int = 2,
                 batch_size: int = 2, num_adaptation_steps: int = 2, hidden_size: int = 4,
                 imgsz: int = 16) -> RealCase:
    torch.manual_seed(seed)
    model = MetaConvModel(1, num_ways, hidden_size)
    meta_optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    step_size: torch.Tensor | OrderedDict[str, torch.Tensor]
    if learn_step_size:  # per_param_step_size=True, learn_step_size=True
        step_size = OrderedDict((name, torch.tensor(0.4, requires_grad=True))
                                for name, _ in model.meta_named_parameters())
        meta_optimizer.add_param_group({"params": list(step_size.values())})
    else:
        step_size = torch.tensor(0.4, requires_grad=False)
    train_inputs = torch.randn(batch_size, num_ways * num_shots, 1, imgsz, imgsz)
    train_targets = torch.randint(0, num_ways, (batch_size, num_ways * num_shots))
    test_inputs = torch.randn(batch_size, num_ways * num_shots_test, 1, imgsz, imgsz)
    test_targets = torch.randint(0, num_ways, (batch_size, num_ways * num_shots_test))

    def adapt(inputs: torch.Tensor, targets: torch.Tensor) -> OrderedDict[str, torch.Tensor]:
        params = None
        for _ in range(num_adaptation_steps):
            logits = model(inputs, params=params)
            inner_loss = F.cross_entropy(logits, targets)
            model.zero_grad()
            params = gradient_update_parameters(
                model, inner_loss, step_size=step_size, params=params,
                first_order=(not model.training) or first_order)
        assert params is not None
        return params

    def step() -> torch.Tensor:
        model.train()
        mean_outer_loss = torch.tensor(0.0)
        for task in zip(train_inputs, train_targets, test_inputs, test_targets):
            params = adapt(task[0], task[1])
            with torch.set_grad_enabled(model.training):
                test_logits = model(task[2], params=params)
                outer_loss = F.cross_entropy(test_logits, task[3])
                mean_outer_loss += outer_loss
        mean_outer_loss.div_(batch_size)
        return mean_outer_loss

    name = "pytorch_maml" + ("_first_order" if first_order else "") + (
        "_meta_sgd" if learn_step_size else "")
    tensors = ({f"step_size.{k}": v for k, v in step_size.items()}
               if isinstance(step_size, dict) else {})
    return RealCase(name, "tristandeleu/pytorch-maml maml/metalearners/maml.py"
                    "@44104272a0140b35e2223ba68750e7e715315653",
                    "https://github.com/tristandeleu/pytorch-maml/issues/5", "correct", step,
                    meta_optimizer, {"model": model}, tensors=tensors)


CASES: dict[str, Callable[[int], RealCase]] = {
    "dragen_maml": dragen_maml,
    "dragen_maml_second_order": lambda s: dragen_maml(s, create_graph=True),
    "higher_maml": higher_maml,
    "higher_maml_copy": lambda s: higher_maml(s, bug="copy"),
    "higher_maml_no_track": lambda s: higher_maml(s, bug="no_track"),
    "pytorch_maml": pytorch_maml,
    "pytorch_maml_first_order": lambda s: pytorch_maml(s, first_order=True),
    "pytorch_maml_meta_sgd": lambda s: pytorch_maml(s, learn_step_size=True),
}
TWINS: dict[str, str] = {"higher_maml_copy": "higher_maml", "higher_maml_no_track": "higher_maml"}
