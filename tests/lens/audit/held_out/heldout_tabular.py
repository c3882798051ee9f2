"""Tabular data: categorical columns embedded one table each, then an MLP over the embeddings
and the numeric columns, written from TabNet's embedding generator
(dreamquark-ai/tabnet pytorch_tabnet/tab_network.py@1d6b5efdb14282a638843c887bae0776ee561ae9,
``EmbeddingGenerator``: one ``nn.Embedding`` per categorical column in a ``ModuleList``).
The text is ours, at tiny sizes.
"""

from __future__ import annotations

import torch
from realcode_common import RealCase
from torch import nn
from torch.nn import functional as F

SOURCE = ("dreamquark-ai/tabnet pytorch_tabnet/tab_network.py@"
          "1d6b5efdb14282a638843c887bae0776ee561ae9")
CONFIRMS = ("https://github.com/dreamquark-ai/tabnet/blob/1d6b5efdb14282a638843c887bae0776ee561ae9/"
            "pytorch_tabnet/tab_network.py")


class TabularNet(nn.Module):
    def __init__(self, cardinalities: list[int], numeric: int, emb_dim: int, *,
                 plain_list: bool) -> None:
        super().__init__()
        tables = [nn.Embedding(c, emb_dim) for c in cardinalities]
        # a plain list registers nothing: the tables are not in model.parameters()
        self.embeddings = tables if plain_list else nn.ModuleList(tables)
        self.mlp = nn.Sequential(nn.Linear(numeric + emb_dim * len(tables), 8), nn.ReLU(),
                                 nn.Linear(8, 2))

    def forward(self, categorical: torch.Tensor, numeric: torch.Tensor) -> torch.Tensor:
        cols = [table(categorical[:, i]) for i, table in enumerate(self.embeddings)]
        return self.mlp(torch.cat([numeric, *cols], dim=1))


# The bug: the embedding tables are kept in a plain Python list, so Adam(model.parameters())
# never steps them though every backward fills their gradients (truth "leaks", a tensor
# trained by no optimizer).
def tabular_embeddings(seed: int, *, bug: bool = False) -> RealCase:
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = TabularNet([4, 3], 3, 2, plain_list=bug)
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-2)

    def step() -> torch.Tensor:
        categorical = torch.stack([torch.randint(0, 4, (6,), generator=gen),
                                   torch.randint(0, 3, (6,), generator=gen)], dim=1)
        numeric = torch.randn(6, 3, generator=gen)
        labels = torch.randint(0, 2, (6,), generator=gen)
        return F.cross_entropy(model(categorical, numeric), labels)

    modules: dict[str, nn.Module] = {"model": model}
    if bug:  # named as the twin's ModuleList names them
        modules |= {f"model.embeddings.{i}": t for i, t in enumerate(model.embeddings)}
    return RealCase("tabular_embeddings_list" if bug else "tabular_embeddings", SOURCE, CONFIRMS,
                    "leaks" if bug else "correct", step, optimizer, modules)


CASES = {"tabular_embeddings": tabular_embeddings,
         "tabular_embeddings_list": lambda seed: tabular_embeddings(seed, bug=True)}
TWINS = {"tabular_embeddings_list": "tabular_embeddings"}
FIELD = "tabular data"
