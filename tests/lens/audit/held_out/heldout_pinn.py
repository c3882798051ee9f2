"""Physics-informed networks: identification of Burgers' equation
u_t + lambda_1 u u_x - lambda_2 u_xx = 0 from data, the two coefficients learned with the
network.

Written from jayroxis/PINNs "Burgers Equation/Burgers Identification (PyTorch).ipynb"@
a2b14663e0e3628313205bbdc5df5597c0bd808a (PhysicsInformedNN: x and t as tensors requiring grad
made once before training, torch.tensor(X[:, 0:1], requires_grad=True).float(); lambda_1 and
lambda_2 as nn.Parameters registered on the network; u_t, u_x, u_xx by torch.autograd.grad with
create_graph=True; loss = MSE(u, u_data) + mean(f^2)). The text is ours, at tiny sizes.
"""

from __future__ import annotations

import numpy as np
import torch
from realcode_common import RealCase
from torch import nn

SOURCE = ("jayroxis/PINNs Burgers Equation/Burgers Identification (PyTorch).ipynb@"
          "a2b14663e0e3628313205bbdc5df5597c0bd808a")
CONFIRMS = ("https://github.com/jayroxis/PINNs/blob/a2b14663e0e3628313205bbdc5df5597c0bd808a/"
            "Burgers%20Equation/Burgers%20Identification%20(PyTorch).ipynb")


def _residual(dnn: nn.Module, x: torch.Tensor, t: torch.Tensor, lambda_1: torch.Tensor,
              lambda_2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    u = dnn(torch.cat([x, t], dim=1))
    u_t = torch.autograd.grad(u, t, torch.ones_like(u), retain_graph=True, create_graph=True)[0]
    u_x = torch.autograd.grad(u, x, torch.ones_like(u), retain_graph=True, create_graph=True)[0]
    u_xx = torch.autograd.grad(u_x, x, torch.ones_like(u_x), retain_graph=True,
                               create_graph=True)[0]
    return u, u_t + lambda_1 * u * u_x - lambda_2 * u_xx


# The bug: lambda_1 and lambda_2 are plain tensors requiring grad, never registered on the
# network, so Adam(dnn.parameters()) never steps them though the residual fills their gradients
# (truth "leaks"). The twin registers them as the source does. The inputs are the source's
# pre-loop copies, .float() of float64 leaves: made once, never grown (a false-alarm trap in
# both).
def burgers_identification(seed: int, *, bug: bool = False) -> RealCase:
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (8, 2))
    u_data = torch.tensor(np.sin(np.pi * X[:, 0:1]) * np.exp(-X[:, 1:2]), dtype=torch.float32)
    x = torch.tensor(X[:, 0:1], requires_grad=True).float()
    t = torch.tensor(X[:, 1:2], requires_grad=True).float()
    dnn = nn.Sequential(nn.Linear(2, 10), nn.Tanh(), nn.Linear(10, 10), nn.Tanh(),
                        nn.Linear(10, 1))
    if bug:
        lambda_1 = torch.tensor([0.0], requires_grad=True)
        lambda_2 = torch.tensor([-6.0], requires_grad=True)
        tensors = {"lambda_1": lambda_1, "lambda_2": lambda_2}
    else:
        dnn.register_parameter("lambda_1", nn.Parameter(torch.tensor([0.0])))
        dnn.register_parameter("lambda_2", nn.Parameter(torch.tensor([-6.0])))
        tensors = {}
    optimizer = torch.optim.Adam(dnn.parameters(), lr=1e-3)

    def step() -> torch.Tensor:
        l1 = lambda_1 if bug else dnn.lambda_1
        l2 = torch.exp(lambda_2 if bug else dnn.lambda_2)
        u, f = _residual(dnn, x, t, l1, l2)
        return torch.mean((u_data - u) ** 2) + torch.mean(f ** 2)

    return RealCase("burgers_lambda_unregistered" if bug else "burgers_identification", SOURCE,
                    CONFIRMS, "leaks" if bug else "correct", step, optimizer, {"dnn": dnn},
                    tensors=tensors)


CASES = {"burgers_identification": burgers_identification,
         "burgers_lambda_unregistered": lambda seed: burgers_identification(seed, bug=True)}
TWINS = {"burgers_lambda_unregistered": "burgers_identification"}
FIELD = "physics-informed networks"
