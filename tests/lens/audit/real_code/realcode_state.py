"""Training steps whose state outlives the step: a word language model's recurrent state,
normalizing flows whose BatchNorm keeps running statistics.

The nflows cases call the real library (``nflows`` 0.14, the ``corpus`` extra): the fixed
version as released, and its BatchNorm with the two lines of 0.11 that bayesiains/nflows#11
changed.
"""

from __future__ import annotations

import pytest
import torch
from realcode_common import RealCase
from torch import nn
from torch.nn import functional as F

# --- pytorch/examples word_language_model/main.py@cd01f93000a6679e768700dd29e417a1e5fd10e5,
# model.py: an LSTM language model with tied weights, trained by hand (p.data.add_(p.grad)):
# "what it trains" is the model. repackage_hidden cuts the state between BPTT windows; without
# it each window's graph reaches the previous one and the second backward fails (the PyTorch
# forum thread the example's comment answers; MorvanZhou/PyTorch-Tutorial#57 for the bug).


class RNNModel(nn.Module):
    def __init__(self, ntoken: int = 10, ninp: int = 6, nhid: int = 6, nlayers: int = 2,
                 dropout: float = 0.2) -> None:
        super().__init__()
        self.ntoken, self.nhid, self.nlayers = ntoken, nhid, nlayers
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        self.decoder.weight = self.encoder.weight  # tie_weights

    def forward(self, input: torch.Tensor, hidden: tuple[torch.Tensor, torch.Tensor]
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        decoded = self.decoder(self.drop(output)).view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz: int) -> tuple[torch.Tensor, torch.Tensor]:
        weight = next(self.parameters())
        return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                weight.new_zeros(self.nlayers, bsz, self.nhid))


def repackage_hidden(h: object) -> object:
    """Wraps hidden states in new Tensors, to detach them from their history."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def word_language_model(seed: int, *, repackage: bool = True, bptt: int = 4,
                        batch_size: int = 2) -> RealCase:
    torch.manual_seed(seed)
    model = RNNModel()
    criterion = nn.NLLLoss()
    train_data = torch.randint(0, 10, (8 * bptt + 1, batch_size))
    state = {"hidden": model.init_hidden(batch_size), "i": 0}

    def step() -> torch.Tensor:
        i = state["i"]
        seq_len = min(bptt, len(train_data) - 1 - i)
        data, targets = train_data[i:i + seq_len], train_data[i + 1:i + 1 + seq_len].reshape(-1)
        hidden = repackage_hidden(state["hidden"]) if repackage else state["hidden"]
        output, state["hidden"] = model(data, hidden)  # audit: fix here
        state["i"] = (i + bptt) % (len(train_data) - 1 - bptt)
        return criterion(output, targets)

    return RealCase(f"word_language_model{'' if repackage else '_no_repackage'}",
                    "pytorch/examples word_language_model/main.py@cd01f93000a6679e768700dd29e417"
                    "a1e5fd10e5", "https://github.com/MorvanZhou/PyTorch-Tutorial/issues/57",
                    "correct" if repackage else "carried", step, model, {"model": model})


# --- bayesiains/nflows nflows/transforms/normalization.py: BatchNorm wrote its running
# statistics from the batch mean and variance with their graph (0.11); every step's graph
# stayed alive through the buffers: bayesiains/nflows#10, fixed by .detach() in #11 (0.12+).
# The step is the reproduction of #10: SimpleRealNVP with batch norm between layers.


def _buggy_batchnorm() -> type:
    from nflows.transforms.normalization import BatchNorm

    class BatchNorm011(BatchNorm):
        """nflows 0.14's BatchNorm with the running-statistics update of 0.11."""

        def forward(self, inputs: torch.Tensor, context: object = None
                    ) -> tuple[torch.Tensor, torch.Tensor]:
            if self.training:
                mean, var = inputs.mean(0), inputs.var(0)
                self.running_mean.mul_(1 - self.momentum).add_(  # audit: fix here
                    mean * self.momentum)
                self.running_var.mul_(1 - self.momentum).add_(  # audit: fix here
                    var * self.momentum)
            else:
                mean, var = self.running_mean, self.running_var
            outputs = self.weight * ((inputs - mean) / torch.sqrt(var + self.eps)) + self.bias
            logabsdet_ = torch.log(self.weight) - 0.5 * torch.log(var + self.eps)
            return outputs, torch.sum(logabsdet_) * inputs.new_ones(inputs.shape[0])

    return BatchNorm011


def nflows_realnvp(seed: int, *, version: str = "0.14", batch: int = 16) -> RealCase:
    pytest.importorskip("nflows", reason="the corpus extra (nflows) is not installed")
    from nflows.flows.realnvp import SimpleRealNVP
    from nflows.transforms.normalization import BatchNorm

    torch.manual_seed(seed)
    flow = SimpleRealNVP(2, 8, 2, 1, batch_norm_between_layers=True)
    if version == "0.11":
        buggy = _buggy_batchnorm()
        for transform in flow.modules():
            if type(transform) is BatchNorm:
                transform.__class__ = buggy
    optimizer = torch.optim.Adam(flow.parameters())
    x = torch.randn(batch, 2) * torch.tensor([1.0, 0.3])

    def step() -> torch.Tensor:
        return -flow.log_prob(inputs=x).mean()

    return RealCase(f"nflows_realnvp_{version.replace('.', '_')}",
                    "bayesiains/nflows nflows/transforms/normalization.py (nflows "
                    f"{version} from PyPI)", "https://github.com/bayesiains/nflows/pull/11",
                    "held" if version == "0.11" else "correct", step, optimizer, {"flow": flow})


# --- ikostrikov/pytorch-flows flows.py@01258d670c016f1f6239f6dc194d62da15665a10: MADE blocks
# with BatchNormFlow between them; the running statistics are updated from .data (no graph),
# and the batch statistics are kept as attributes (self.batch_mean), replaced every step.


class MaskedLinear(nn.Module):
    def __init__(self, in_features: int, out_features: int, mask: torch.Tensor) -> None:
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.register_buffer("mask", mask)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return F.linear(inputs, self.linear.weight * self.mask, self.linear.bias)


class MADE(nn.Module):
    def __init__(self, num_inputs: int, num_hidden: int) -> None:
        super().__init__()
        in_deg = torch.arange(num_inputs)
        hid_deg = torch.arange(num_hidden) % (num_inputs - 1)
        out_deg = torch.arange(num_inputs) - 1
        input_mask = (hid_deg[:, None] >= in_deg[None]).float()
        output_mask = (out_deg[:, None] >= hid_deg[None]).float()
        self.joiner = MaskedLinear(num_inputs, num_hidden, input_mask)
        self.trunk = nn.Sequential(nn.ReLU(), MaskedLinear(num_hidden, num_inputs * 2,
                                                           output_mask.repeat(2, 1)))

    def forward(self, inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        m, a = self.trunk(self.joiner(inputs)).chunk(2, 1)
        u = (inputs - m) * torch.exp(-a)
        return u, -a.sum(-1, keepdim=True)


class BatchNormFlow(nn.Module):
    def __init__(self, num_inputs: int, momentum: float = 0.0, eps: float = 1e-5) -> None:
        super().__init__()
        self.log_gamma = nn.Parameter(torch.zeros(num_inputs))
        self.beta = nn.Parameter(torch.zeros(num_inputs))
        self.momentum, self.eps = momentum, eps
        self.register_buffer("running_mean", torch.zeros(num_inputs))
        self.register_buffer("running_var", torch.ones(num_inputs))

    def forward(self, inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.training:
            self.batch_mean = inputs.mean(0)
            self.batch_var = (inputs - self.batch_mean).pow(2).mean(0) + self.eps
            self.running_mean.mul_(self.momentum)
            self.running_var.mul_(self.momentum)
            self.running_mean.add_(self.batch_mean.data * (1 - self.momentum))
            self.running_var.add_(self.batch_var.data * (1 - self.momentum))
            mean, var = self.batch_mean, self.batch_var
        else:
            mean, var = self.running_mean, self.running_var
        x_hat = (inputs - mean) / var.sqrt()
        y = torch.exp(self.log_gamma) * x_hat + self.beta
        return y, (self.log_gamma - 0.5 * torch.log(var)).sum(-1, keepdim=True)


def pytorch_flows_maf(seed: int, *, num_inputs: int = 3, batch: int = 8) -> RealCase:
    torch.manual_seed(seed)
    modules = []
    for _ in range(2):
        modules += [MADE(num_inputs, 6), BatchNormFlow(num_inputs)]
    model = nn.Sequential(*modules)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, weight_decay=1e-6)
    data = torch.randn(batch, num_inputs)

    def step() -> torch.Tensor:
        u, logdets = data, torch.zeros(batch, 1)
        for module in model:
            u, logdet = module(u)
            logdets = logdets + logdet
        log_probs = (-0.5 * u.pow(2) - 0.5 * torch.log(torch.tensor(2 * torch.pi))).sum(
            -1, keepdim=True)
        return -(log_probs + logdets).sum(-1, keepdim=True).mean()

    return RealCase("pytorch_flows_maf", "ikostrikov/pytorch-flows flows.py@01258d670c016f1f623"
                    "9f6dc194d62da15665a10", "https://arxiv.org/abs/1705.07057 (MAF, the model "
                    "it implements)", "correct", step, optimizer, {"model": model})


CASES = {
    "word_language_model": word_language_model,
    "word_language_model_no_repackage": lambda s: word_language_model(s, repackage=False),
    "nflows_realnvp_0_14": nflows_realnvp,
    "nflows_realnvp_0_11": lambda s: nflows_realnvp(s, version="0.11"),
    "pytorch_flows_maf": pytorch_flows_maf,
}
