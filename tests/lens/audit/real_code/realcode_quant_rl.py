"""Binarised and quantised networks, and REINFORCE with a learned baseline, from public code:
BinaryNet's layers that keep their real weights beside the binary ones, BitNet's BitLinear
before and after its straight-through estimator, torchvision's quantisation-aware training
(fake-quantize observers as buffers) and fast_abs_rl's actor-critic extractor whose advantage
keeps the critic's graph.

Each builder takes ``seed`` and returns a :class:`RealCase`; the text is ours, the structure
(modules, optimizers, order of calls, bug) is the repository's, at tiny sizes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.ao.quantization as tq
from realcode_common import RealCase
from torch import nn
from torch.nn import functional as F

# --- itayhubara/BinaryNet.pytorch main_mnist.py, models/binarized_modules.py
# @b99870af6e73992896ab5db5ea26b83d2adb1201: BinarizeLinear keeps the real weights in
# weight.org and writes their sign into weight.data before F.linear, so the gradient reaches
# the weight through the binary values (the straight-through estimator of the paper, by
# .data); the input of every layer but the first is binarised in place the same way. The
# update in main_mnist's train() runs after loss.backward(): copy p.org back into p.data, step
# Adam, clamp to [-1, 1] and keep the result in p.org (here BinaryNetAdam.step, in that order).
# Real backward: every parameter, the binary weights included, gets a gradient: correct.
# The 28 * 28 MNIST image is a 4 * 4 one (the first layer's input is not binarised).

PIXELS = 16


def binarize(tensor: torch.Tensor, quant_mode: str = "det") -> torch.Tensor:
    if quant_mode == "det":
        return tensor.sign()
    noise = torch.rand(tensor.size()).add(-0.5)
    return tensor.add_(1).div_(2).add_(noise).clamp_(0, 1).round().mul_(2).add_(-1)


class BinarizeLinear(nn.Linear):
    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if input.size(1) != PIXELS:
            input.data = binarize(input.data)
        if not hasattr(self.weight, "org"):
            self.weight.org = self.weight.data.clone()
        self.weight.data = binarize(self.weight.org)
        out = F.linear(input, self.weight)
        if self.bias is not None:
            self.bias.org = self.bias.data.clone()
            out += self.bias.view(1, -1).expand_as(out)
        return out


class BinaryMnistNet(nn.Module):
    def __init__(self, hidden: int = 4, infl_ratio: int = 3) -> None:
        super().__init__()
        width = hidden * infl_ratio
        self.fc1 = BinarizeLinear(PIXELS, width)
        self.htanh1, self.bn1 = nn.Hardtanh(), nn.BatchNorm1d(width)
        self.fc2 = BinarizeLinear(width, width)
        self.htanh2, self.bn2 = nn.Hardtanh(), nn.BatchNorm1d(width)
        self.fc3 = BinarizeLinear(width, width)
        self.htanh3, self.bn3 = nn.Hardtanh(), nn.BatchNorm1d(width)
        self.fc4 = nn.Linear(width, 10)
        self.logsoftmax = nn.LogSoftmax(dim=1)
        self.drop = nn.Dropout(0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.view(-1, PIXELS)
        x = self.htanh1(self.bn1(self.fc1(x)))
        x = self.htanh2(self.bn2(self.fc2(x)))
        x = self.drop(self.fc3(x))
        x = self.htanh3(self.bn3(x))
        return self.logsoftmax(self.fc4(x))


class BinaryNetAdam(torch.optim.Adam):
    """Adam with main_mnist's update around its step: the real weights back, then the clamp."""

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        params = [p for group in self.param_groups for p in group["params"]]
        for p in params:
            if hasattr(p, "org"):
                p.data.copy_(p.org)
        loss = super().step(closure)
        for p in params:
            if hasattr(p, "org"):
                p.org.copy_(p.data.clamp_(-1, 1))
        return loss


def binarynet_mnist(seed: int, *, batch: int = 4) -> RealCase:
    torch.manual_seed(seed)
    model = BinaryMnistNet()
    criterion = nn.CrossEntropyLoss()
    optimizer = BinaryNetAdam(model.parameters(), lr=0.01)
    data, target = torch.randn(batch, 1, 4, 4), torch.randint(0, 10, (batch,))

    def step() -> torch.Tensor:
        model.train()
        output = model(data)
        return criterion(output, target)

    return RealCase("binarynet_mnist", "itayhubara/BinaryNet.pytorch main_mnist.py@b99870af6e739"
                    "92896ab5db5ea26b83d2adb1201",
                    "https://github.com/itayhubara/BinaryNet.pytorch/issues/9", "correct", step,
                    optimizer, {"model": model})


# --- itayhubara/BinaryNet.pytorch models/binarized_modules.py, models/vgg_cifar10_binary.py
# @80f6d4685510314a974889c1ca50a385431bb69f ("adding support for pytorch2"): the .data
# writes are gone; Binarize is an autograd Function whose backward passes the gradient
# straight through, applied to the weight and to every input but the image's; main_binary
# steps the optimizer with no copy back. A VGG-like stack cut to two binary convolutions and
# two binary linear layers, Hardtanh and BatchNorm between them as in the model file. Real
# backward: every parameter gets a gradient through the custom backward: correct.


class Binarize(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, input: torch.Tensor) -> torch.Tensor:
        return input.clone().sign()

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> torch.Tensor:
        return grad_output  # straight through


class BinarizeConv2dSTE(nn.Conv2d):
    def forward(self, input: torch.Tensor) -> torch.Tensor:
        input_b = Binarize.apply(input) if input.size(1) != 3 else input
        weight_b = Binarize.apply(self.weight)
        out = F.conv2d(input_b, weight_b, None, self.stride, self.padding, self.dilation,
                       self.groups)
        if self.bias is not None:
            out += self.bias.view(1, -1, 1, 1).expand_as(out)
        return out


class BinarizeLinearSTE(nn.Linear):
    def forward(self, input: torch.Tensor) -> torch.Tensor:
        input_b = Binarize.apply(input) if input.size(1) != 784 else input
        out = F.linear(input_b, Binarize.apply(self.weight))
        if self.bias is not None:
            out += self.bias.view(1, -1).expand_as(out)
        return out


def binarynet_ste(seed: int, *, batch: int = 2, width: int = 4, num_classes: int = 5
                  ) -> RealCase:
    torch.manual_seed(seed)
    features = nn.Sequential(
        BinarizeConv2dSTE(3, width, kernel_size=3, stride=1, padding=1, bias=True),
        nn.BatchNorm2d(width), nn.Hardtanh(inplace=True),
        BinarizeConv2dSTE(width, width, kernel_size=3, padding=1, bias=True),
        nn.MaxPool2d(kernel_size=2, stride=2), nn.BatchNorm2d(width), nn.Hardtanh(inplace=True))
    classifier = nn.Sequential(
        BinarizeLinearSTE(width * 4 * 4, 8, bias=True), nn.BatchNorm1d(8),
        nn.Hardtanh(inplace=True), BinarizeLinearSTE(8, num_classes, bias=True),
        nn.BatchNorm1d(num_classes, affine=False), nn.LogSoftmax(dim=1))
    model = nn.ModuleDict({"features": features, "classifier": classifier})
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
    inputs, target = torch.randn(batch, 3, 8, 8), torch.randint(0, num_classes, (batch,))

    def step() -> torch.Tensor:
        x = model["features"](inputs)
        output = model["classifier"](x.view(-1, width * 4 * 4))
        return criterion(output, target)

    return RealCase("binarynet_ste", "itayhubara/BinaryNet.pytorch models/binarized_modules.py@80"
                    "f6d4685510314a974889c1ca50a385431bb69f",
                    "https://github.com/itayhubara/BinaryNet.pytorch/issues/31", "correct", step,
                    optimizer, {"model": model})


# --- kyegomez/BitNet bitnet/bitlinear.py, bitnet/bitffn.py, bitnet/transformer.py,
# bitnet/at.py, train.py@847d1f7febf3d27d0b3c7c6683e82b9d13467455: BitLinear binarises its
# weight with torch.sign(self.weight) and nothing else reaches the weight: its gradient is
# exactly zero, every BitLinear weight of the feed-forward blocks is dead in effect (bias,
# gamma and beta still train). The next commit, 247b1c461731f05a0715036093522ba29ffadaf7
# ("BitLinear Upgrade"), binarises through ste(): (torch.sign(x) - x).detach() + x (the lines
# kyegomez/BitNet#51 asks about); the twin is the same step with that estimator on the
# weight's line, the activations' sign left as it was. train.py: the enwik8 language
# model (AutoregressiveWrapper's shifted cross-entropy) with one optimizer over the model
# (zeta's StableAdamWUnfused, here torch.optim.AdamW); zeta's MultiheadAttention is a tiny
# self-attention with the same four projections.


class BitLinear(nn.Module):
    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 ste: bool = False) -> None:
        super().__init__()
        self.in_features, self.out_features, self.ste = in_features, out_features, ste
        self.weight = nn.Parameter(torch.randn(out_features, in_features))
        self.bias = nn.Parameter(torch.randn(out_features)) if bias else None
        self.gamma = nn.Parameter(torch.ones(in_features))
        self.beta = nn.Parameter(torch.ones(out_features))

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        input_norm = F.layer_norm(input, (self.in_features,))
        quant_scale = torch.max(torch.abs(input_norm), dim=1, keepdim=True).values
        input_quant = torch.sign(input_norm) * (quant_scale / self.gamma)
        if self.ste:
            weight_quant = (torch.sign(self.weight) - self.weight).detach() + self.weight
        else:
            weight_quant = torch.sign(self.weight)  # audit: fix here
        output = torch.matmul(input_quant, weight_quant.t())
        if self.bias is not None:
            output += self.bias.unsqueeze(0).expand_as(output)
        return output * self.beta.unsqueeze(0).expand_as(output)


class BitFeedForward(nn.Module):
    def __init__(self, dim: int, ff_mult: int = 4, ste: bool = False) -> None:
        super().__init__()
        hidden_dim = dim * ff_mult
        self.layer = nn.Sequential(BitLinear(dim, hidden_dim, ste=ste), nn.GELU(),
                                   BitLinear(hidden_dim, dim, ste=ste))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x)


class TinyMultiheadAttention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.q_proj, self.k_proj = nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.v_proj, self.out_proj = nn.Linear(dim, dim), nn.Linear(dim, dim)

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor
                ) -> torch.Tensor:
        b, n, d = query.shape
        q, k, v = (proj(t).view(b, -1, self.heads, d // self.heads).transpose(1, 2)
                   for proj, t in ((self.q_proj, query), (self.k_proj, key),
                                   (self.v_proj, value)))
        attn = F.softmax(q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5, dim=-1)
        return self.out_proj((attn @ v).transpose(1, 2).reshape(b, n, d))


class RMSNorm(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.scale = dim ** 0.5
        self.gamma = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(x, dim=-1) * self.gamma * self.scale


class BitNetTransformer(nn.Module):
    def __init__(self, dim: int, depth: int, num_tokens: int, heads: int = 2,
                 ff_mult: int = 2, ste: bool = False) -> None:
        super().__init__()
        self.emb = nn.Embedding(num_tokens, dim)
        self.layers = nn.ModuleList([TinyMultiheadAttention(dim, heads) for _ in range(depth)])
        self.ffn_layers = nn.ModuleList([BitFeedForward(dim, ff_mult, ste) for _ in range(depth)])
        self.to_logits = nn.Sequential(RMSNorm(dim), nn.Linear(dim, num_tokens))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.emb(x)
        for attn, ffn in zip(self.layers, self.ffn_layers):
            x = attn(x, x, x) + x
            x = ffn(x) + x
        return self.to_logits(x)


class AutoregressiveWrapper(nn.Module):
    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x_inp, x_labels = x[:, :-1], x[:, 1:]
        logits = self.net(x_inp)
        return F.cross_entropy(logits.permute(0, 2, 1), x_labels)


def bitnet_bitlinear(seed: int, *, ste: bool = False, batch: int = 2, seq_len: int = 6,
                     num_tokens: int = 16) -> RealCase:
    torch.manual_seed(seed)
    model = AutoregressiveWrapper(BitNetTransformer(dim=8, depth=1, num_tokens=num_tokens,
                                                    ste=ste))
    optim = torch.optim.AdamW(model.parameters(), lr=2e-4)
    data = torch.randint(0, num_tokens, (batch, seq_len + 1))

    def step() -> torch.Tensor:
        model.train()
        loss = model(data)
        return loss.mean()

    return RealCase(f"bitnet_bitlinear{'_ste' if ste else ''}",
                    "kyegomez/BitNet bitnet/bitlinear.py@847d1f7febf3d27d0b3c7c6683e82b9d13467455",
                    "https://github.com/kyegomez/BitNet/commit/247b1c461731f05a0715036093522ba29ff"
                    "adaf7", "correct" if ste else "dead", step, optim, {"model": model})


# --- pytorch/vision references/classification/train_quantization.py
# @0a4a7bfef5e5833b829d141ae028223994a2a454, train.py (train_one_epoch),
# torchvision/models/quantization/mobilenetv2.py: eager-mode quantisation-aware training of
# QuantizableMobileNetV2: fuse_model(is_qat=True), the default QAT qconfig of the backend
# (qnnpack), prepare_qat in place, observers and fake quantisation enabled, SGD over
# model.parameters(), cross-entropy of model(image). The FakeQuantize modules keep scale,
# zero_point and the observers' min/max as buffers written without graph; the weights reach
# the loss through the fake quantisation's straight-through mask: correct. The network is cut
# to a stem, one inverted residual block (with its FloatFunctional skip add) and the head, its
# ReLU6 already ReLU (what mobilenet_v2's _replace_relu does before fusing).


class ConvBNActivation(nn.Sequential):
    def __init__(self, in_planes: int, out_planes: int, kernel_size: int = 3, stride: int = 1,
                 groups: int = 1) -> None:
        padding = (kernel_size - 1) // 2
        super().__init__(nn.Conv2d(in_planes, out_planes, kernel_size, stride, padding,
                                   groups=groups, bias=False),
                         nn.BatchNorm2d(out_planes), nn.ReLU(inplace=False))


class QuantizableInvertedResidual(nn.Module):
    def __init__(self, inp: int, oup: int, stride: int, expand_ratio: int) -> None:
        super().__init__()
        hidden_dim = inp * expand_ratio
        self.use_res_connect = stride == 1 and inp == oup
        self.conv = nn.Sequential(
            ConvBNActivation(inp, hidden_dim, kernel_size=1),
            ConvBNActivation(hidden_dim, hidden_dim, stride=stride, groups=hidden_dim),
            nn.Conv2d(hidden_dim, oup, 1, 1, 0, bias=False), nn.BatchNorm2d(oup))
        self.skip_add = nn.quantized.FloatFunctional()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.use_res_connect:
            return self.skip_add.add(x, self.conv(x))
        return self.conv(x)

    def fuse_model(self, is_qat: bool) -> None:
        for idx in range(len(self.conv)):
            if type(self.conv[idx]) is nn.Conv2d:
                fuse = tq.fuse_modules_qat if is_qat else tq.fuse_modules
                fuse(self.conv, [str(idx), str(idx + 1)], inplace=True)


class QuantizableMobileNetV2(nn.Module):
    def __init__(self, num_classes: int = 5, width: int = 4) -> None:
        super().__init__()
        self.features = nn.Sequential(ConvBNActivation(3, width, stride=2),
                                      QuantizableInvertedResidual(width, width, 1, 2),
                                      ConvBNActivation(width, 2 * width, kernel_size=1))
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(2 * width, num_classes))
        self.quant, self.dequant = tq.QuantStub(), tq.DeQuantStub()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.quant(x)
        x = self.features(x)
        x = nn.functional.adaptive_avg_pool2d(x, (1, 1))
        x = self.classifier(torch.flatten(x, 1))
        return self.dequant(x)

    def fuse_model(self, is_qat: bool) -> None:
        for m in self.modules():
            if type(m) is ConvBNActivation:
                fuse = tq.fuse_modules_qat if is_qat else tq.fuse_modules
                fuse(m, ["0", "1", "2"], inplace=True)
            if type(m) is QuantizableInvertedResidual:
                m.fuse_model(is_qat)


def vision_qat_mobilenet(seed: int, *, batch: int = 2, num_classes: int = 5) -> RealCase:
    torch.manual_seed(seed)
    model = QuantizableMobileNetV2(num_classes)
    model.train()
    model.fuse_model(is_qat=True)
    model.qconfig = tq.get_default_qat_qconfig("qnnpack")
    tq.prepare_qat(model, inplace=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9, weight_decay=1e-4)
    criterion = nn.CrossEntropyLoss()
    model.apply(tq.enable_observer)
    model.apply(tq.enable_fake_quant)
    image, target = torch.randn(batch, 3, 8, 8), torch.randint(0, num_classes, (batch,))

    def step() -> torch.Tensor:
        model.train()
        output = model(image)
        return criterion(output, target)

    return RealCase("vision_qat_mobilenet", "pytorch/vision references/classification/train_quan"
                    "tization.py@0a4a7bfef5e5833b829d141ae028223994a2a454",
                    "https://github.com/pytorch/vision/tree/main/references/classification#qat-"
                    "mobilenetv2", "correct", step, optimizer, {"model": model})


# --- ChenRocks/fast_abs_rl rl.py (a2c_train_step), model/rl.py, model/extract.py, metric.py
# @a3cd65016082ab842be4e42b0b26b7bc046f4ad5: REINFORCE with a learned baseline. ActorCritic
# shares the sentence and article encoders between the pointer-network extractor (which
# samples sentences until its stop vector) and the PtrScorer critic; one Adam steps the agent.
# Discounted ROUGE rewards are standardised; the critic is trained by mse(baseline, reward),
# the extractor by -log_prob * (r - b) / N, both backpropagated together. b keeps the critic's
# graph, so the policy term trains the critic and the shared encoders through the baseline:
# ChenRocks/fast_abs_rl#49 (fix: (r - b).item(), acknowledged by the author). The abstractor
# is the identity (train_full_rl.py without --abs_dir); the articles are token ids.

INI = 1e-2


class ConvSentEncoder(nn.Module):
    def __init__(self, vocab_size: int, emb_dim: int, n_hidden: int, dropout: float) -> None:
        super().__init__()
        self._embedding = nn.Embedding(vocab_size, emb_dim, padding_idx=0)
        self._convs = nn.ModuleList([nn.Conv1d(emb_dim, n_hidden, i) for i in range(3, 6)])
        self._dropout = dropout

    def forward(self, input_: torch.Tensor) -> torch.Tensor:
        conv_in = F.dropout(self._embedding(input_).transpose(1, 2), self._dropout,
                            training=self.training)
        return torch.cat([F.relu(conv(conv_in)).max(dim=2)[0] for conv in self._convs], dim=1)


class LSTMEncoder(nn.Module):
    def __init__(self, input_dim: int, n_hidden: int, n_layer: int) -> None:
        super().__init__()
        self._init_h = nn.Parameter(torch.empty(n_layer * 2, n_hidden).uniform_(-INI, INI))
        self._init_c = nn.Parameter(torch.empty(n_layer * 2, n_hidden).uniform_(-INI, INI))
        self._lstm = nn.LSTM(input_dim, n_hidden, n_layer, bidirectional=True)

    def forward(self, input_: torch.Tensor) -> torch.Tensor:
        size = (self._init_h.size(0), input_.size(0), self._init_h.size(1))
        init_states = (self._init_h.unsqueeze(1).expand(*size).contiguous(),
                       self._init_c.unsqueeze(1).expand(*size).contiguous())
        lstm_out, _ = self._lstm(input_.transpose(0, 1), init_states)
        return lstm_out.transpose(0, 1)


class PointerParams(nn.Module):
    """What PtrExtractorRL and PtrScorer clone from the ML-trained LSTMPointerNet."""

    def __init__(self, input_dim: int, n_hidden: int, n_hop: int = 1) -> None:
        super().__init__()
        self._init_h = nn.Parameter(torch.empty(1, n_hidden).uniform_(-INI, INI))
        self._init_c = nn.Parameter(torch.empty(1, n_hidden).uniform_(-INI, INI))
        self._init_i = nn.Parameter(torch.empty(input_dim).uniform_(-0.1, 0.1))
        self._lstm_cell = nn.LSTMCell(input_dim, n_hidden)
        self._attn_wm = nn.Parameter(nn.init.xavier_normal_(torch.empty(input_dim, n_hidden)))
        self._attn_wq = nn.Parameter(nn.init.xavier_normal_(torch.empty(n_hidden, n_hidden)))
        self._attn_v = nn.Parameter(torch.empty(n_hidden).uniform_(-INI, INI))
        self._hop_wm = nn.Parameter(nn.init.xavier_normal_(torch.empty(input_dim, n_hidden)))
        self._hop_wq = nn.Parameter(nn.init.xavier_normal_(torch.empty(n_hidden, n_hidden)))
        self._hop_v = nn.Parameter(torch.empty(n_hidden).uniform_(-INI, INI))
        self._n_hop = n_hop

    def cell(self, lstm_in: torch.Tensor, states: tuple[torch.Tensor, torch.Tensor]
             ) -> tuple[torch.Tensor, torch.Tensor]:
        """MultiLayerLSTMCells with one layer: states (n_layer, 1, n_hidden)."""
        h, c = self._lstm_cell(lstm_in, (states[0][0], states[1][0]))
        return h.unsqueeze(0), c.unsqueeze(0)


def _attention_score(attention: torch.Tensor, query: torch.Tensor, v: torch.Tensor,
                     w: torch.Tensor) -> torch.Tensor:
    return torch.mm(torch.tanh(attention + torch.mm(query, w)), v.unsqueeze(1)).t()


class PtrExtractorRLStop(PointerParams):
    def __init__(self, input_dim: int, n_hidden: int) -> None:
        super().__init__(input_dim, n_hidden)
        self._stop = nn.Parameter(torch.empty(input_dim).uniform_(-INI, INI))

    def forward(self, attn_mem: torch.Tensor) -> tuple[list[torch.Tensor], list[Any]]:
        max_step = attn_mem.size(0)
        attn_mem = torch.cat([attn_mem, self._stop.unsqueeze(0)], dim=0)
        attn_feat = torch.mm(attn_mem, self._attn_wm)
        hop_feat = torch.mm(attn_mem, self._hop_wm)
        outputs: list[torch.Tensor] = []
        dists = []
        lstm_in = self._init_i.unsqueeze(0)
        lstm_states = (self._init_h.unsqueeze(1), self._init_c.unsqueeze(1))
        while True:
            h, c = self.cell(lstm_in, lstm_states)
            query = h[:, -1, :]
            for _ in range(self._n_hop):
                score = F.softmax(_attention_score(hop_feat, query, self._hop_v,
                                                   self._hop_wq), dim=-1)
                query = torch.mm(score, hop_feat)
            score = _attention_score(attn_feat, query, self._attn_v, self._attn_wq)
            for o in outputs:
                score[0, o.item()] = -1e18
            m = torch.distributions.Categorical(F.softmax(score, dim=-1))
            dists.append(m)
            out = m.sample()
            outputs.append(out)
            if out.item() == max_step:
                break
            lstm_in = attn_mem[out.item()].unsqueeze(0)
            lstm_states = (h, c)
        return outputs, dists


class PtrScorer(PointerParams):
    def __init__(self, input_dim: int, n_hidden: int) -> None:
        super().__init__(input_dim, n_hidden)
        self._score_linear = nn.Linear(input_dim, 1)

    @staticmethod
    def attention(attention: torch.Tensor, attention_feat: torch.Tensor, query: torch.Tensor,
                  v: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.mm(F.softmax(_attention_score(attention_feat, query, v, w), dim=-1),
                        attention)

    def forward(self, attn_mem: torch.Tensor, n_step: int) -> list[torch.Tensor]:
        attn_feat = torch.mm(attn_mem, self._attn_wm)
        hop_feat = torch.mm(attn_mem, self._hop_wm)
        scores = []
        lstm_in = self._init_i.unsqueeze(0)
        lstm_states = (self._init_h.unsqueeze(1), self._init_c.unsqueeze(1))
        for _ in range(n_step):
            h, _ = self.cell(lstm_in, lstm_states)
            query = h[:, -1, :]
            for _ in range(self._n_hop):
                query = PtrScorer.attention(hop_feat, hop_feat, query, self._hop_v,
                                            self._hop_wq)
            output = PtrScorer.attention(attn_mem, attn_feat, query, self._attn_v,
                                         self._attn_wq)
            scores.append(self._score_linear(output))
            lstm_in = output  # the states are not carried over, as in the original
        return scores


class ActorCritic(nn.Module):
    """Shared encoder between actor and critic."""

    def __init__(self, vocab_size: int = 20, emb_dim: int = 4, conv_hidden: int = 2,
                 lstm_hidden: int = 3, ptr_hidden: int = 4) -> None:
        super().__init__()
        self._sent_enc = ConvSentEncoder(vocab_size, emb_dim, conv_hidden, dropout=0.0)
        self._art_enc = LSTMEncoder(3 * conv_hidden, lstm_hidden, 1)
        self._ext = PtrExtractorRLStop(2 * lstm_hidden, ptr_hidden)
        self._scr = PtrScorer(2 * lstm_hidden, ptr_hidden)

    def forward(self, raw_article_sents: list[list[int]]
                ) -> tuple[tuple[list[torch.Tensor], list[Any]], list[torch.Tensor]]:
        article_sent = torch.tensor(raw_article_sents)  # ArticleBatcher: ids, padded
        enc_sent = self._sent_enc(article_sent).unsqueeze(0)
        enc_art = self._art_enc(enc_sent).squeeze(0)
        outputs = self._ext(enc_art)
        scores = self._scr(enc_art, len(outputs[0]))
        return outputs, scores


def _rouge_f(match: int, output: list[int], reference: list[int]) -> float:
    if match == 0:
        return 0.0
    precision, recall = match / len(output), match / len(reference)
    return 2 * precision * recall / (precision + recall)


def compute_rouge_n(output: list[int], reference: list[int], n: int = 1) -> float:
    grams = [tuple(output[i:i + n]) for i in range(len(output) - n + 1)]
    refs = [tuple(reference[i:i + n]) for i in range(len(reference) - n + 1)]
    return _rouge_f(sum(min(grams.count(g), refs.count(g)) for g in set(grams)), output,
                    reference)


def compute_rouge_l(output: list[int], reference: list[int]) -> float:
    dp = [[0] * (len(reference) + 1) for _ in range(len(output) + 1)]
    for i in range(1, len(output) + 1):
        for j in range(1, len(reference) + 1):
            dp[i][j] = (dp[i - 1][j - 1] + 1 if output[i - 1] == reference[j - 1]
                        else max(dp[i - 1][j], dp[i][j - 1]))
    return _rouge_f(dp[-1][-1], output, reference)


def fast_abs_rl_a2c(seed: int, *, item: bool = False, articles: int = 2, sents: int = 3,
                    words: int = 5, gamma: float = 0.95, stop_coeff: float = 1.0) -> RealCase:
    torch.manual_seed(seed)
    agent = ActorCritic()
    opt = torch.optim.Adam(agent.parameters(), lr=1e-4)
    art_batch = torch.randint(1, 20, (articles, sents, words)).tolist()
    abs_batch = torch.randint(1, 20, (articles, 2, words)).tolist()

    def step() -> torch.Tensor:
        agent.train()
        indices, probs, baselines, ext_sents = [], [], [], []
        for raw_arts in art_batch:
            (inds, ms), bs = agent(raw_arts)
            baselines.append(bs)
            indices.append(inds)
            probs.append(ms)
            ext_sents += [raw_arts[idx.item()] for idx in inds if idx.item() < len(raw_arts)]
        with torch.no_grad():
            summaries = list(ext_sents)  # the identity abstractor
        i, rewards = 0, []
        for inds, abss in zip(indices, abs_batch):
            rs = ([compute_rouge_l(summaries[i + j], abss[j])
                   for j in range(min(len(inds) - 1, len(abss)))]
                  + [0.0 for _ in range(max(0, len(inds) - 1 - len(abss)))]
                  + [stop_coeff * compute_rouge_n(
                      [w for s in summaries[i:i + len(inds) - 1] for w in s],
                      [w for s in abss for w in s], n=1)])
            i += len(inds) - 1
            R, disc_rs = 0.0, []
            for r in rs[::-1]:
                R = r + gamma * R
                disc_rs.insert(0, R)
            rewards += disc_rs
        indices = [x for inds in indices for x in inds]
        probs = [x for ms in probs for x in ms]
        baselines = [x for bs in baselines for x in bs]
        reward = torch.Tensor(rewards)
        reward = (reward - reward.mean()) / (reward.std() + float(torch.finfo(torch.float32).eps))
        baseline = torch.cat(baselines).squeeze()
        losses = []
        for action, p, r, b in zip(indices, probs, reward, baseline):
            # issue #49 writes the fix here, the audit where the advantage is used: the same
            advantage = (r - b).item() if item else r - b
            losses.append(-p.log_prob(action) * (advantage / len(indices)))  # audit: fix here
        critic_loss = F.mse_loss(baseline, reward)
        # autograd.backward([critic_loss] + losses, ones): the gradient of their sum
        return critic_loss + torch.cat(losses).sum()

    return RealCase(f"fast_abs_rl_a2c{'_item' if item else ''}",
                    "ChenRocks/fast_abs_rl rl.py@a3cd65016082ab842be4e42b0b26b7bc046f4ad5",
                    "https://github.com/ChenRocks/fast_abs_rl/issues/49",
                    "correct" if item else "targets", step, opt, {"agent": agent})


CASES: dict[str, Callable[[int], RealCase]] = {
    "binarynet_mnist": binarynet_mnist,
    "binarynet_ste": binarynet_ste,
    "bitnet_bitlinear": bitnet_bitlinear,
    "bitnet_bitlinear_ste": lambda s: bitnet_bitlinear(s, ste=True),
    "vision_qat_mobilenet": vision_qat_mobilenet,
    "fast_abs_rl_a2c": fast_abs_rl_a2c,
    "fast_abs_rl_a2c_item": lambda s: fast_abs_rl_a2c(s, item=True),
}
TWINS: dict[str, str] = {"bitnet_bitlinear": "bitnet_bitlinear_ste",
                         "fast_abs_rl_a2c": "fast_abs_rl_a2c_item"}
