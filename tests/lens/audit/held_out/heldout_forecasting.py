"""Time series forecasting: a stacked LSTMCell forecaster trained on consecutive windows of one
long series, its state handed from window to window (truncated backpropagation through time).

Written from pytorch/examples time_sequence_prediction/train.py@e27e2585a5b6a557e3512c3f5bd742f
f4850f364 (two LSTMCells and a linear head, the sine series, MSE on the next value), made
stateful across windows, as a forecaster of one long series is. The text is ours.
"""

from __future__ import annotations

import torch
from realcode_common import RealCase
from torch import nn
from torch.nn import functional as F

SOURCE = ("pytorch/examples time_sequence_prediction/train.py@"
          "e27e2585a5b6a557e3512c3f5bd742ff4850f364")
CONFIRMS = ("https://github.com/pytorch/examples/blob/e27e2585a5b6a557e3512c3f5bd742ff4850f364/"
            "time_sequence_prediction/train.py")


class Sequence(nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.lstm1 = nn.LSTMCell(1, hidden)
        self.lstm2 = nn.LSTMCell(hidden, hidden)
        self.linear = nn.Linear(hidden, 1)


# The bug: the state kept in a plain dict between windows keeps its graph; the next window's
# backward runs into the previous window's freed graph (truth "carried"). The twin stores the
# state detached.
def stateful_lstm(seed: int, *, bug: bool = False) -> RealCase:
    torch.manual_seed(seed)
    hidden, window = 5, 4
    model = Sequence(hidden)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    phase = 0.3 * seed
    series = torch.sin(torch.arange(200, dtype=torch.float32) / 5.0 + phase).view(1, -1)
    state: dict[str, torch.Tensor] = {name: torch.zeros(2, hidden) for name in "h1 c1 h2 c2".split()}
    where = {"t": 0}

    def step() -> torch.Tensor:
        t0 = where["t"]
        chunk = series[:, t0:t0 + window + 1].expand(2, -1) * torch.tensor([[1.0], [0.5]])
        h1, c1, h2, c2 = state["h1"], state["c1"], state["h2"], state["c2"]
        outputs = []
        for t in range(window):
            h1, c1 = model.lstm1(chunk[:, t:t + 1], (h1, c1))
            h2, c2 = model.lstm2(h1, (h2, c2))
            outputs.append(model.linear(h2))
        if bug:
            state.update(h1=h1, c1=c1, h2=h2, c2=c2)
        else:
            state.update(h1=h1.detach(), c1=c1.detach(), h2=h2.detach(), c2=c2.detach())
        where["t"] = t0 + window
        return F.mse_loss(torch.cat(outputs, dim=1), chunk[:, 1:])

    return RealCase("stateful_lstm_no_detach" if bug else "stateful_lstm", SOURCE, CONFIRMS,
                    "carried" if bug else "correct", step, optimizer, {"model": model})


CASES = {"stateful_lstm": stateful_lstm,
         "stateful_lstm_no_detach": lambda seed: stateful_lstm(seed, bug=True)}
TWINS = {"stateful_lstm_no_detach": "stateful_lstm"}
FIELD = "time series forecasting"
