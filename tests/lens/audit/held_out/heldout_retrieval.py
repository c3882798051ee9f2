"""Retrieval: metric learning with a cross-batch memory of past embeddings (XBM), and dense
retrieval with in-batch negatives trained in chunks through a gradient cache (GradCache).

The text is ours, at tiny sizes; the structure is the source's.
"""

from __future__ import annotations

import torch
from realcode_common import RealCase
from torch import nn
from torch.nn import functional as F

# --- msight-tech/research-xbm ret_benchmark/modeling/xbm.py and ret_benchmark/engine/trainer.py
# @82f603a4e118fb56dfd3209769dea1ac6b634f02: after the iteration warms up, each batch's
# embeddings and labels are enqueued into the memory (enqueue_dequeue(feats.detach(),
# targets.detach())) and a contrastive loss is computed between the batch and the memory.
XBM = "msight-tech/research-xbm ret_benchmark/modeling/xbm.py@82f603a4e118fb56dfd3209769dea1ac6b634f02"
XBM_URL = ("https://github.com/msight-tech/research-xbm/blob/82f603a4e118fb56dfd3209769dea1ac6b6"
           "34f02/ret_benchmark/modeling/xbm.py")


def contrastive(feats: torch.Tensor, labels: torch.Tensor, ref: torch.Tensor,
                ref_labels: torch.Tensor, margin: float = 0.5) -> torch.Tensor:
    """XBM's contrastive loss: positive pairs pulled to similarity 1, negatives pushed below
    the margin."""
    sim = feats @ ref.T
    same = labels[:, None] == ref_labels[None, :]
    pos = torch.where(same, 1 - sim, torch.zeros_like(sim)).sum()
    neg = torch.where(~same, F.relu(sim - margin), torch.zeros_like(sim)).sum()
    return (pos + neg) / len(feats)


# The bug: the memory is a plain Python list of past batches stored with their graphs; the next
# iteration's loss reaches the previous iteration's freed graph (truth "carried"). The twin
# stores them detached, as the source does.
def xbm(seed: int, *, bug: bool = False) -> RealCase:
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 4))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-4)
    memory: list[tuple[torch.Tensor, torch.Tensor]] = []

    def step() -> torch.Tensor:
        x = torch.randn(4, 5, generator=gen)
        labels = torch.randint(0, 2, (4,), generator=gen)
        feats = F.normalize(model(x), dim=1)
        loss = contrastive(feats, labels, feats, labels)
        memory.append((feats, labels) if bug else (feats.detach(), labels))
        del memory[:-3]
        bank = torch.cat([f for f, _ in memory])
        bank_labels = torch.cat([t for _, t in memory])
        return loss + contrastive(feats, labels, bank, bank_labels)

    return RealCase("xbm_memory_graph" if bug else "xbm", XBM, XBM_URL,
                    "carried" if bug else "correct", step, optimizer, {"model": model})


# --- luyug/GradCache src/grad_cache/grad_cache.py@6b3291ac2cdd28fc43a9a65cae63aed8c2d0551e: the
# representations of every chunk are first computed under no_grad, the in-batch-negatives loss
# is computed on them as leaves and its gradient with respect to each representation cached;
# then each chunk is run again with grad and backpropagated through the surrogate
# dot(representation, cached gradient). The cached gradient is a constant.
GRADCACHE = ("luyug/GradCache src/grad_cache/grad_cache.py@"
             "6b3291ac2cdd28fc43a9a65cae63aed8c2d0551e")
GRADCACHE_URL = ("https://github.com/luyug/GradCache/blob/6b3291ac2cdd28fc43a9a65cae63aed8c2d0551"
                 "e/src/grad_cache/grad_cache.py")


# The bug: the first pass runs with grad and the cached gradient is taken with create_graph, so
# the surrogate's "constant" g carries the encoders' graph: (x * g).sum() then trains through
# g as well (truth "targets": a surrogate whose weight carries the trained model's graph).
def gradcache(seed: int, *, bug: bool = False) -> RealCase:
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    query_encoder = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 4))
    passage_encoder = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 4))
    optimizer = torch.optim.AdamW([*query_encoder.parameters(), *passage_encoder.parameters()],
                                  lr=1e-4)

    def in_batch_loss(q: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        scores = q @ p.T
        return F.cross_entropy(scores, torch.arange(len(q)))

    def step() -> torch.Tensor:
        queries = torch.randn(4, 6, generator=gen)
        passages = torch.randn(4, 6, generator=gen)
        if bug:
            q_reps, p_reps = query_encoder(queries), passage_encoder(passages)
            g_q, g_p = torch.autograd.grad(in_batch_loss(q_reps, p_reps), [q_reps, p_reps],
                                           create_graph=True)
        else:
            with torch.no_grad():
                q_reps, p_reps = query_encoder(queries), passage_encoder(passages)
            q_reps.requires_grad_(True)
            p_reps.requires_grad_(True)
            g_q, g_p = torch.autograd.grad(in_batch_loss(q_reps, p_reps), [q_reps, p_reps])
        surrogate = 0.0
        for chunk in (slice(0, 2), slice(2, 4)):
            surrogate = surrogate + (query_encoder(queries[chunk]) * g_q[chunk]).sum()
            surrogate = surrogate + (passage_encoder(passages[chunk]) * g_p[chunk]).sum()
        return surrogate

    return RealCase("gradcache_graph_in_cache" if bug else "gradcache", GRADCACHE, GRADCACHE_URL,
                    "targets" if bug else "correct", step, optimizer,
                    {"query_encoder": query_encoder, "passage_encoder": passage_encoder})


CASES = {"xbm": xbm, "xbm_memory_graph": lambda seed: xbm(seed, bug=True),
         "gradcache": gradcache, "gradcache_graph_in_cache": lambda seed: gradcache(seed, bug=True)}
TWINS = {"xbm_memory_graph": "xbm", "gradcache_graph_in_cache": "gradcache"}
FIELD = "retrieval (metric learning, dense retrieval)"
