"""Knowledge graph embeddings: TransE with entity embeddings renormalized in place at every
step, and TransE scores trained with RotatE's self-adversarial negative sampling.

The text is ours, at tiny sizes; the structure is the source's.
"""

from __future__ import annotations

import torch
from realcode_common import RealCase
from torch import nn
from torch.nn import functional as F

# --- mklimasz/TransE-PyTorch model.py@ab2312ab2756c457000562ad666ad644d5f397a3: entities_emb and
# relations_emb as nn.Embedding; forward renormalizes the entity table in place through .data
# (outside autograd, before the graph is built), then scores d(h + r, t) (its L2 option);
# MarginRankingLoss on positive and negative distances. Correct, though a write through .data
# to a stepped table at every call reads like a hidden update (a false-alarm trap).
TRANSE = "mklimasz/TransE-PyTorch model.py@ab2312ab2756c457000562ad666ad644d5f397a3"
TRANSE_URL = ("https://github.com/mklimasz/TransE-PyTorch/blob/ab2312ab2756c457000562ad666ad644d5"
              "f397a3/model.py")


class TransE(nn.Module):
    def __init__(self, entities: int, relations: int, dim: int) -> None:
        super().__init__()
        self.entities_emb = nn.Embedding(entities, dim)
        self.relations_emb = nn.Embedding(relations, dim)

    def distance(self, heads: torch.Tensor, relations: torch.Tensor, tails: torch.Tensor
                 ) -> torch.Tensor:
        return (self.entities_emb(heads) + self.relations_emb(relations)
                - self.entities_emb(tails)).norm(p=2, dim=-1)


def _triples(gen: torch.Generator, n: int) -> torch.Tensor:
    return torch.stack([torch.randint(0, 6, (n,), generator=gen),
                        torch.randint(0, 2, (n,), generator=gen),
                        torch.randint(0, 6, (n,), generator=gen)], dim=1)


def transe(seed: int) -> RealCase:
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = TransE(6, 2, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    criterion = nn.MarginRankingLoss(margin=1.0)

    def step() -> torch.Tensor:
        weight = model.entities_emb.weight
        weight.data = weight.data / weight.data.norm(p=2, dim=1, keepdim=True)
        positive = _triples(gen, 4)
        negative = positive.clone()
        negative[:, 2] = torch.randint(0, 6, (4,), generator=gen)
        pos = model.distance(*positive.unbind(1))
        neg = model.distance(*negative.unbind(1))
        return criterion(pos, neg, torch.full_like(pos, -1.0))

    return RealCase("transe_renormalized", TRANSE, TRANSE_URL, "correct", step, optimizer,
                    {"model": model})


# --- DeepGraphLearning/KnowledgeGraphEmbedding codes/model.py@a0a3cf75e8e324ef113472489a16927c3
# 9c997b2 (KGEModel.train_step, the TransE score gamma - ||h + r - t||, here the L2 norm): with
# negative_adversarial_sampling, each negative's loss is weighted by
# softmax(negative_score * adversarial_temperature).detach(), the weights a constant
# (arXiv:1902.10197, eq. 5).
ROTATE = ("DeepGraphLearning/KnowledgeGraphEmbedding codes/model.py@"
          "a0a3cf75e8e324ef113472489a16927c39c997b2")
ROTATE_URL = ("https://github.com/DeepGraphLearning/KnowledgeGraphEmbedding/blob/a0a3cf75e8e324ef"
              "113472489a16927c39c997b2/codes/model.py")


# The bug: the self-adversarial weights keep their graph, so the loss also trains the
# embeddings through the weights that should only re-weight it (truth "targets": a weight
# that carries the gradient of the tensors it weighs).
def self_adversarial(seed: int, *, bug: bool = False) -> RealCase:
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = TransE(6, 2, 3)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    gamma, temperature = 6.0, 1.0

    def step() -> torch.Tensor:
        positive = _triples(gen, 4)
        tails = torch.randint(0, 6, (4, 5), generator=gen)
        heads, relations, _ = positive.unbind(1)
        negative_score = gamma - model.distance(heads[:, None], relations[:, None], tails)
        weights = F.softmax(negative_score * temperature, dim=1)
        if not bug:
            weights = weights.detach()
        negative_loss = (weights * F.logsigmoid(-negative_score)).sum(dim=1)
        positive_loss = F.logsigmoid(gamma - model.distance(*positive.unbind(1)))
        return (-positive_loss.mean() - negative_loss.mean()) / 2

    return RealCase("self_adversarial_weights_grad" if bug else "self_adversarial", ROTATE,
                    ROTATE_URL, "targets" if bug else "correct", step, optimizer,
                    {"model": model})


CASES = {"transe_renormalized": transe, "self_adversarial": self_adversarial,
         "self_adversarial_weights_grad": lambda seed: self_adversarial(seed, bug=True)}
TWINS = {"self_adversarial_weights_grad": "self_adversarial"}
FIELD = "knowledge graph embeddings"
