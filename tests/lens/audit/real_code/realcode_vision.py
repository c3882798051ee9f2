"""Vision training steps from public code with frozen layers or a second network the step does
not train: fine-tuning a pretrained Inception as a feature extractor, knowledge distillation
from a teacher in no optimizer, and the mean teacher (an EMA model with detached parameters).

Each builder takes ``seed`` and returns a :class:`RealCase`; the text is ours, the structure
(modules, optimizers and their param groups, ``requires_grad`` flags, order of calls, in-place
writes, detach()es) is the repository's, at tiny sizes.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import torch
from realcode_common import RealCase
from torch import nn
from torch.nn import functional as F

# --- pytorch/tutorials beginner_source/finetuning_torchvision_models_tutorial.py@0019b9cdaccf5db
# 320d81238c202cebe9d876ca4 (model_name="inception", feature_extract=True) -----------------------
# Correct (the official tutorial): set_parameter_requires_grad(model, True) freezes every
# pretrained parameter, then model.AuxLogits.fc and model.fc are replaced (new layers,
# requires_grad=True); params_to_update = [p for p in model.parameters() if p.requires_grad];
# SGD(lr=0.001, momentum=0.9); the train phase runs model.train(), outputs, aux_outputs =
# model(inputs), loss = loss1 + 0.4 * loss2. Inception v3 shrunk to a stem, one mixed block, the
# auxiliary head and the final block (BasicConv2d = conv + BN(eps 0.001) + relu, as
# torchvision's); the frozen BatchNorms keep updating their running statistics in train mode, as
# in the tutorial.


class BasicConv2d(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, **kwargs: Any) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, bias=False, **kwargs)
        self.bn = nn.BatchNorm2d(out_channels, eps=0.001)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.bn(self.conv(x)), inplace=True)


class TinyInceptionA(nn.Module):
    def __init__(self, in_channels: int, pool_features: int = 2) -> None:
        super().__init__()
        self.branch1x1 = BasicConv2d(in_channels, 2, kernel_size=1)
        self.branch3x3_1 = BasicConv2d(in_channels, 2, kernel_size=1)
        self.branch3x3_2 = BasicConv2d(2, 4, kernel_size=3, padding=1)
        self.branch_pool = BasicConv2d(in_channels, pool_features, kernel_size=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b1 = self.branch1x1(x)
        b3 = self.branch3x3_2(self.branch3x3_1(x))
        bp = self.branch_pool(F.avg_pool2d(x, kernel_size=3, stride=1, padding=1))
        return torch.cat([b1, b3, bp], 1)


class InceptionAux(nn.Module):
    def __init__(self, in_channels: int, num_classes: int) -> None:
        super().__init__()
        self.conv0 = BasicConv2d(in_channels, 4, kernel_size=1)
        self.conv1 = BasicConv2d(4, 6, kernel_size=3)
        self.fc = nn.Linear(6, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.avg_pool2d(x, kernel_size=3, stride=2)
        x = self.conv1(self.conv0(x))
        x = torch.flatten(F.adaptive_avg_pool2d(x, (1, 1)), 1)
        return self.fc(x)


class TinyInception3(nn.Module):
    def __init__(self, num_classes: int = 1000, aux_logits: bool = True,
                 dropout: float = 0.5) -> None:
        super().__init__()
        self.aux_logits = aux_logits
        self.Conv2d_1a_3x3 = BasicConv2d(3, 4, kernel_size=3, stride=2)
        self.Mixed_6a = TinyInceptionA(4)
        self.AuxLogits = InceptionAux(8, num_classes) if aux_logits else None
        self.Mixed_7c = BasicConv2d(8, 8, kernel_size=3, padding=1)
        self.dropout = nn.Dropout(p=dropout)
        self.fc = nn.Linear(8, num_classes)

    def forward(self, x: torch.Tensor) -> Any:
        x = self.Mixed_6a(self.Conv2d_1a_3x3(x))
        aux = self.AuxLogits(x) if self.AuxLogits is not None and self.training else None
        x = self.Mixed_7c(x)
        x = torch.flatten(self.dropout(F.adaptive_avg_pool2d(x, (1, 1))), 1)
        x = self.fc(x)
        if self.training and self.aux_logits:
            return x, aux
        return x


def finetune_inception(seed: int, *, batch: int = 4, num_classes: int = 2) -> RealCase:
    torch.manual_seed(seed)
    model_ft = TinyInception3()  # models.inception_v3(pretrained=True)
    for param in model_ft.parameters():  # set_parameter_requires_grad(model_ft, True)
        param.requires_grad = False
    num_ftrs = model_ft.AuxLogits.fc.in_features
    model_ft.AuxLogits.fc = nn.Linear(num_ftrs, num_classes)
    num_ftrs = model_ft.fc.in_features
    model_ft.fc = nn.Linear(num_ftrs, num_classes)
    params_to_update = []
    for _name, param in model_ft.named_parameters():
        if param.requires_grad:
            params_to_update.append(param)
    optimizer_ft = torch.optim.SGD(params_to_update, lr=0.001, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    inputs = torch.randn(batch, 3, 16, 16)
    labels = torch.randint(0, num_classes, (batch,))

    def step() -> torch.Tensor:
        model_ft.train()
        outputs, aux_outputs = model_ft(inputs)
        loss1 = criterion(outputs, labels)
        loss2 = criterion(aux_outputs, labels)
        return loss1 + 0.4 * loss2

    return RealCase(
        "finetune_inception_feature_extract", "pytorch/tutorials beginner_source/finetuning_"
        "torchvision_models_tutorial.py@0019b9cdaccf5db320d81238c202cebe9d876ca4",
        "https://pytorch.org/tutorials/beginner/finetuning_torchvision_models_tutorial.html "
        "(the official tutorial, feature_extract=True, model_name='inception')", "correct",
        step, optimizer_ft, {"model": model_ft})


# --- haitongli/knowledge-distillation-pytorch train.py (train_kd), model/net.py (Net,
# loss_fn_kd)@9937528f0be0efa979c745174fbcbe9621cea8b7 ------------------------------------------
# Correct (the repository's KD, and Hinton et al.): teacher_model.eval(); the student's output;
# the teacher's output under torch.no_grad() (since bc2752f4, which replaced precomputed teacher
# outputs); KLDivLoss(log_softmax(s/T), softmax(t/T)) * alpha*T*T + CE*(1-alpha). The teacher's
# parameters keep requires_grad=True and are in no optimizer; the student's optimizer is
# Adam(model.parameters()) ("cnn_distill"). A CIFAR-style ResNet-18 teacher shrunk to two
# BasicBlocks; the student Net with num_channels=2, 32x32 images.


class KDNet(nn.Module):
    def __init__(self, num_channels: int = 2, dropout_rate: float = 0.5) -> None:
        super().__init__()
        self.num_channels = num_channels
        self.conv1 = nn.Conv2d(3, num_channels, 3, stride=1, padding=1)
        self.bn1 = nn.BatchNorm2d(num_channels)
        self.conv2 = nn.Conv2d(num_channels, num_channels * 2, 3, stride=1, padding=1)
        self.bn2 = nn.BatchNorm2d(num_channels * 2)
        self.conv3 = nn.Conv2d(num_channels * 2, num_channels * 4, 3, stride=1, padding=1)
        self.bn3 = nn.BatchNorm2d(num_channels * 4)
        self.fc1 = nn.Linear(4 * 4 * num_channels * 4, num_channels * 4)
        self.fcbn1 = nn.BatchNorm1d(num_channels * 4)
        self.fc2 = nn.Linear(num_channels * 4, 10)
        self.dropout_rate = dropout_rate

    def forward(self, s: torch.Tensor) -> torch.Tensor:
        s = F.relu(F.max_pool2d(self.bn1(self.conv1(s)), 2))
        s = F.relu(F.max_pool2d(self.bn2(self.conv2(s)), 2))
        s = F.relu(F.max_pool2d(self.bn3(self.conv3(s)), 2))
        s = s.view(-1, 4 * 4 * self.num_channels * 4)
        s = F.dropout(F.relu(self.fcbn1(self.fc1(s))), p=self.dropout_rate,
                      training=self.training)
        return self.fc2(s)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, in_planes: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Sequential(nn.Conv2d(in_planes, planes, 1, stride=stride,
                                                    bias=False), nn.BatchNorm2d(planes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class KDResNet(nn.Module):
    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(4)
        self.layer1 = BasicBlock(4, 4, 1)
        self.layer2 = BasicBlock(4, 8, 2)
        self.linear = nn.Linear(8, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer2(self.layer1(out))
        out = F.adaptive_avg_pool2d(out, 1).view(out.size(0), -1)
        return self.linear(out)


def kd_haitongli(seed: int, *, batch: int = 4) -> RealCase:
    torch.manual_seed(seed)
    model, teacher_model = KDNet(), KDResNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    alpha, T = 0.9, 20.0
    train_batch = torch.randn(batch, 3, 32, 32)
    labels_batch = torch.randint(0, 10, (batch,))
    model.train()
    teacher_model.eval()

    def loss_fn_kd(outputs: torch.Tensor, labels: torch.Tensor,
                   teacher_outputs: torch.Tensor) -> torch.Tensor:
        return (nn.KLDivLoss()(F.log_softmax(outputs / T, dim=1),
                               F.softmax(teacher_outputs / T, dim=1)) * (alpha * T * T)
                + F.cross_entropy(outputs, labels) * (1. - alpha))

    def step() -> torch.Tensor:
        output_batch = model(train_batch)
        with torch.no_grad():
            output_teacher_batch = teacher_model(train_batch)
        return loss_fn_kd(output_batch, labels_batch, output_teacher_batch)

    return RealCase(
        "kd_haitongli", "haitongli/knowledge-distillation-pytorch train.py@9937528f0be0efa979c7"
        "45174fbcbe9621cea8b7", "https://arxiv.org/abs/1503.02531 (the repository's train_kd "
        "since bc2752f46e68ffc5423c4f4cc698aec37011944f)", "correct", step, optimizer,
        {"model": model, "teacher_model": teacher_model})


# --- CuriousAI/mean-teacher pytorch/main.py, mean_teacher/architectures.py, losses.py
# @546348ff863c998c26be4339021425df973b4a36 ------------------------------------------------------
# Correct (the paper's official code), CIFAR-10 configuration (cifar_shakeshake26, consistency
# 'mse', logit_distance_cost 0.01). ema_model is a second create_model() whose parameters are
# detach_()ed; SGD(model.parameters(), nesterov); ema_logit = Variable(ema_logit.detach().data);
# two heads, class_logit, cons_logit = logit1, logit2, with res_loss =
# symmetric_mse_loss(class_logit, cons_logit) ("sends gradients to both directions", by design);
# update_ema_variables after optimizer.step() (ema_param.data.mul_(alpha).add_(param.data,
# alpha=1 - alpha)), which opens the next step here. Shake-shake with its custom autograd
# Function (a random gate in forward, another in backward). ResNet32x32 with layers [1, 1, 1],
# 4 channels.


class Shake(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, inp1: torch.Tensor, inp2: torch.Tensor, training: bool
                ) -> torch.Tensor:
        gate_size = [inp1.size()[0], *itertools.repeat(1, inp1.dim() - 1)]
        gate = inp1.new(*gate_size)
        if training:
            gate.uniform_(0, 1)
        else:
            gate.fill_(0.5)
        return inp1 * gate + inp2 * (1. - gate)

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor
                 ) -> tuple[torch.Tensor | None, torch.Tensor | None, None]:
        grad_inp1 = grad_inp2 = None
        gate_size = [grad_output.size()[0], *itertools.repeat(1, grad_output.dim() - 1)]
        gate = grad_output.data.new(*gate_size).uniform_(0, 1)
        if ctx.needs_input_grad[0]:
            grad_inp1 = grad_output * gate
        if ctx.needs_input_grad[1]:
            grad_inp2 = grad_output * (1 - gate)
        return grad_inp1, grad_inp2, None


def conv3x3(in_planes: int, out_planes: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)


class ShakeShakeBlock(nn.Module):
    @classmethod
    def out_channels(cls, planes: int, groups: int) -> int:
        return planes

    def __init__(self, inplanes: int, planes: int, groups: int, stride: int = 1,
                 downsample: nn.Module | None = None) -> None:
        super().__init__()
        self.conv_a1, self.bn_a1 = conv3x3(inplanes, planes, stride), nn.BatchNorm2d(planes)
        self.conv_a2, self.bn_a2 = conv3x3(planes, planes), nn.BatchNorm2d(planes)
        self.conv_b1, self.bn_b1 = conv3x3(inplanes, planes, stride), nn.BatchNorm2d(planes)
        self.conv_b2, self.bn_b2 = conv3x3(planes, planes), nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b, residual = x, x, x
        a = F.relu(a, inplace=False)
        a = F.relu(self.bn_a1(self.conv_a1(a)), inplace=True)
        a = self.bn_a2(self.conv_a2(a))
        b = F.relu(b, inplace=False)
        b = F.relu(self.bn_b1(self.conv_b1(b)), inplace=True)
        b = self.bn_b2(self.conv_b2(b))
        ab = Shake.apply(a, b, self.training)
        if self.downsample is not None:
            residual = self.downsample(x)
        return residual + ab


class ShiftConvDownsample(nn.Module):
    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.relu = nn.ReLU(inplace=True)
        self.conv = nn.Conv2d(2 * in_channels, out_channels, kernel_size=1, groups=2)
        self.bn = nn.BatchNorm2d(out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.cat((x[:, :, 0::2, 0::2], x[:, :, 1::2, 1::2]), dim=1)
        return self.bn(self.conv(self.relu(x)))


class ResNet32x32(nn.Module):
    def __init__(self, block: type[ShakeShakeBlock], layers: list[int], channels: int,
                 groups: int = 1, num_classes: int = 10, downsample: str = "shift_conv") -> None:
        super().__init__()
        self.downsample_mode = downsample
        self.inplanes = 16
        self.conv1 = nn.Conv2d(3, 16, kernel_size=3, stride=1, padding=1, bias=False)
        self.layer1 = self._make_layer(block, channels, groups, layers[0])
        self.layer2 = self._make_layer(block, channels * 2, groups, layers[1], stride=2)
        self.layer3 = self._make_layer(block, channels * 4, groups, layers[2], stride=2)
        self.avgpool = nn.AvgPool2d(8)
        self.fc1 = nn.Linear(block.out_channels(channels * 4, groups), num_classes)
        self.fc2 = nn.Linear(block.out_channels(channels * 4, groups), num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                n = m.kernel_size[0] * m.kernel_size[1] * m.out_channels
                m.weight.data.normal_(0, math.sqrt(2. / n))
            elif isinstance(m, nn.BatchNorm2d):
                m.weight.data.fill_(1)
                m.bias.data.zero_()

    def _make_layer(self, block: type[ShakeShakeBlock], planes: int, groups: int, blocks: int,
                    stride: int = 1) -> nn.Sequential:
        downsample = None
        if stride != 1 or self.inplanes != block.out_channels(planes, groups):
            if self.downsample_mode == "basic" or stride == 1:
                downsample = nn.Sequential(
                    nn.Conv2d(self.inplanes, block.out_channels(planes, groups), kernel_size=1,
                              stride=stride, bias=False),
                    nn.BatchNorm2d(block.out_channels(planes, groups)))
            else:
                downsample = ShiftConvDownsample(self.inplanes, block.out_channels(planes, groups))
        layers = [block(self.inplanes, planes, groups, stride, downsample)]
        self.inplanes = block.out_channels(planes, groups)
        for _ in range(1, blocks):
            layers.append(block(self.inplanes, planes, groups))
        return nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layer3(self.layer2(self.layer1(self.conv1(x))))
        x = self.avgpool(x).view(x.size(0), -1)
        return self.fc1(x), self.fc2(x)


def mean_teacher(seed: int, *, batch: int = 4) -> RealCase:
    torch.manual_seed(seed)
    NO_LABEL = -1

    def create_model(ema: bool = False) -> ResNet32x32:
        model = ResNet32x32(ShakeShakeBlock, layers=[1, 1, 1], channels=4)
        if ema:
            for param in model.parameters():
                param.detach_()
        return model

    model = create_model()
    ema_model = create_model(ema=True)
    optimizer = torch.optim.SGD(model.parameters(), 0.05, momentum=0.9, weight_decay=2e-4,
                                nesterov=True)
    class_criterion = nn.CrossEntropyLoss(reduction="sum", ignore_index=NO_LABEL)

    def softmax_mse_loss(input_logits: torch.Tensor, target_logits: torch.Tensor
                         ) -> torch.Tensor:
        input_softmax = F.softmax(input_logits, dim=1)
        target_softmax = F.softmax(target_logits, dim=1)
        num_classes = input_logits.size()[1]
        return F.mse_loss(input_softmax, target_softmax, reduction="sum") / num_classes

    def symmetric_mse_loss(input1: torch.Tensor, input2: torch.Tensor) -> torch.Tensor:
        num_classes = input1.size()[1]
        return torch.sum((input1 - input2) ** 2) / num_classes

    def update_ema_variables(alpha: float, global_step: int) -> None:
        alpha = min(1 - 1 / (global_step + 1), alpha)
        for ema_param, param in zip(ema_model.parameters(), model.parameters()):
            ema_param.data.mul_(alpha).add_(param.data, alpha=1 - alpha)

    ema_decay, logit_distance_cost = 0.97, 0.01
    consistency_weight = 100.0 * math.exp(-5.0)  # get_current_consistency_weight(epoch 0)
    input = torch.randn(batch, 3, 32, 32)
    ema_input = input + 0.1 * torch.randn(batch, 3, 32, 32)
    target = torch.tensor([3, NO_LABEL, 7, NO_LABEL][:batch])
    state = {"global_step": 0}
    model.train()
    ema_model.train()

    def step() -> torch.Tensor:
        if state["global_step"] > 0:  # the previous iteration's update, after optimizer.step()
            update_ema_variables(ema_decay, state["global_step"])
        minibatch_size = len(target)
        ema_model_out = ema_model(ema_input)
        model_out = model(input)
        logit1, logit2 = model_out
        ema_logit, _ = ema_model_out
        ema_logit = ema_logit.detach().data.requires_grad_(False)
        class_logit, cons_logit = logit1, logit2
        res_loss = (logit_distance_cost * symmetric_mse_loss(class_logit, cons_logit)
                    / minibatch_size)
        class_loss = class_criterion(class_logit, target) / minibatch_size
        _ema_class_loss = class_criterion(ema_logit, target) / minibatch_size  # logged only
        consistency_loss = (consistency_weight * softmax_mse_loss(cons_logit, ema_logit)
                            / minibatch_size)
        state["global_step"] += 1
        return class_loss + consistency_loss + res_loss

    return RealCase(
        "mean_teacher", "CuriousAI/mean-teacher pytorch/main.py@546348ff863c998c26be4339021425d"
        "f973b4a36", "https://arxiv.org/abs/1703.01780 (the paper's official implementation)",
        "correct", step, optimizer, {"model": model, "ema_model": ema_model})


CASES: dict[str, Callable[[int], RealCase]] = {
    "finetune_inception_feature_extract": finetune_inception,
    "kd_haitongli": kd_haitongli,
    "mean_teacher": mean_teacher,
}
