"""Graph networks and recommenders from public code: BGRL's bootstrapped graph latents, LightGCN's
propagation over a normalized user-item graph, DLRM's sparse embedding bags, GraphSAGE's nested
encoders, EvolveGCN-O's weights evolved by a GRU from one snapshot to the next, and Node2Vec's
sparse embedding trained by SparseAdam.

Each builder takes ``seed`` and returns a :class:`RealCase`; the text is ours, the structure
(modules, optimizers, order of calls, bug) is the repository's. Message passing is written with
plain torch (``index_add`` over an edge list, or a sparse adjacency), as the sources' PyTorch
Geometric layers compute it; graphs, features and batches are drawn from the seed.
"""

from __future__ import annotations

import copy
import itertools
import math
import random
from collections.abc import Callable
from typing import Any

import torch
from realcode_common import RealCase
from torch import nn
from torch.nn import functional as F


def gcn_norm(edge_index: torch.Tensor, edge_weight: torch.Tensor | None, num_nodes: int
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """Self loops added, then the symmetric weights d_i^-1/2 w_ij d_j^-1/2 (PyG's gcn_norm)."""
    loops = torch.arange(num_nodes)
    edge_index = torch.cat([edge_index, torch.stack([loops, loops])], dim=1)
    ones = torch.ones(num_nodes)
    edge_weight = ones.new_ones(edge_index.size(1) - num_nodes) if edge_weight is None \
        else edge_weight
    edge_weight = torch.cat([edge_weight, ones])
    row, col = edge_index
    deg = torch.zeros(num_nodes).index_add(0, col, edge_weight)
    deg_inv_sqrt = deg.pow(-0.5)
    deg_inv_sqrt = deg_inv_sqrt.masked_fill(deg_inv_sqrt == float("inf"), 0.0)
    return edge_index, deg_inv_sqrt[row] * edge_weight * deg_inv_sqrt[col]


def propagate(x: torch.Tensor, edge_index: torch.Tensor, norm: torch.Tensor) -> torch.Tensor:
    """Sum of the weighted messages x_j over the edges j -> i (flow source to target)."""
    row, col = edge_index
    return torch.zeros_like(x).index_add(0, col, norm.view(-1, 1) * x[row])


def random_graph(num_nodes: int, extra: int) -> torch.Tensor:
    """A ring (every node has a neighbour) plus ``extra`` random edges, both directions."""
    src = torch.cat([torch.arange(num_nodes), torch.randint(0, num_nodes, (extra,))])
    dst = torch.cat([(torch.arange(num_nodes) + 1) % num_nodes,
                     torch.randint(0, num_nodes, (extra,))])
    keep = src != dst
    src, dst = src[keep], dst[keep]
    return torch.stack([torch.cat([src, dst]), torch.cat([dst, src])])


# --- nerdslab/bgrl bgrl/bgrl.py, bgrl/models.py, bgrl/predictors.py, bgrl/transforms.py,
# train_transductive.py@60f9f19ad0598f9163ad70ebbde3e7297760901e: BGRL (arXiv:2102.06514).
# The online encoder is a GCN (GCNConv, BatchNorm with momentum 0.99, PReLU per layer), the
# predictor an MLP with a PReLU; the target encoder is a deep copy, re-initialized, with
# requires_grad False. train(): learning rate and momentum from cosine schedules, two views by
# edge dropping and feature-column masking, model(x1, x2) and model(x2, x1) (the target side
# under no_grad and .detach()), loss 2 - cos(q1, y2.detach()) - cos(q2, y1.detach()), AdamW on
# trainable_parameters() (online encoder and predictor), then update_target_network(mm) under
# no_grad through .data: correct.


class GCNConv(nn.Module):
    """PyG's GCNConv: a linear map without bias, normalized propagation, then the bias."""

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.lin = nn.Linear(in_channels, out_channels, bias=False)
        self.bias = nn.Parameter(torch.empty(out_channels))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.xavier_uniform_(self.lin.weight)
        nn.init.zeros_(self.bias)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        edge_index, norm = gcn_norm(edge_index, None, x.size(0))
        return propagate(self.lin(x), edge_index, norm) + self.bias


class BGRLEncoder(nn.Module):
    """bgrl.models.GCN with batchnorm: (GCNConv, BatchNorm, PReLU) per layer."""

    def __init__(self, layer_sizes: list[int], batchnorm_mm: float = 0.99) -> None:
        super().__init__()
        self.convs = nn.ModuleList()
        self.norms = nn.ModuleList()
        self.acts = nn.ModuleList()
        for in_dim, out_dim in itertools.pairwise(layer_sizes):
            self.convs.append(GCNConv(in_dim, out_dim))
            self.norms.append(nn.BatchNorm1d(out_dim, momentum=batchnorm_mm))
            self.acts.append(nn.PReLU())

    def forward(self, data: dict[str, torch.Tensor]) -> torch.Tensor:
        x = data["x"]
        for conv, norm, act in zip(self.convs, self.norms, self.acts):
            x = act(norm(conv(x, data["edge_index"])))
        return x

    def reset_parameters(self) -> None:
        for module in [*self.convs, *self.norms, *self.acts]:
            module.reset_parameters()


class MLPPredictor(nn.Module):
    def __init__(self, input_size: int, output_size: int, hidden_size: int) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(input_size, hidden_size), nn.PReLU(1),
                                 nn.Linear(hidden_size, output_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class BGRL(nn.Module):
    def __init__(self, encoder: nn.Module, predictor: nn.Module) -> None:
        super().__init__()
        self.online_encoder = encoder
        self.predictor = predictor
        self.target_encoder = copy.deepcopy(encoder)
        self.target_encoder.reset_parameters()
        for param in self.target_encoder.parameters():
            param.requires_grad = False

    def trainable_parameters(self) -> list[nn.Parameter]:
        return list(self.online_encoder.parameters()) + list(self.predictor.parameters())

    @torch.no_grad()
    def update_target_network(self, mm: float) -> None:
        for param_q, param_k in zip(self.online_encoder.parameters(),
                                    self.target_encoder.parameters()):
            param_k.data.mul_(mm).add_(param_q.data, alpha=1.0 - mm)

    def forward(self, online_x: dict[str, torch.Tensor], target_x: dict[str, torch.Tensor]
                ) -> tuple[torch.Tensor, torch.Tensor]:
        online_q = self.predictor(self.online_encoder(online_x))
        with torch.no_grad():
            target_y = self.target_encoder(target_x).detach()
        return online_q, target_y


def graph_drop_transform(drop_edge_p: float, drop_feat_p: float
                         ) -> Callable[[dict[str, torch.Tensor]], dict[str, torch.Tensor]]:
    """A copy of the graph, edges dropped with ``drop_edge_p``, feature columns zeroed."""

    def transform(data: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        data = {key: value.clone() for key, value in data.items()}
        if drop_edge_p > 0.0:
            keep = torch.rand(data["edge_index"].size(1)) >= drop_edge_p
            data["edge_index"] = data["edge_index"][:, keep]
        if drop_feat_p > 0.0:
            drop_mask = torch.empty(data["x"].size(1)).uniform_(0, 1) < drop_feat_p
            data["x"][:, drop_mask] = 0
        return data

    return transform


def cosine_decay(max_val: float, warmup_steps: int, total_steps: int, step: int) -> float:
    if step < warmup_steps:
        return max_val * step / warmup_steps
    return max_val * (1 + math.cos((step - warmup_steps) * math.pi
                                   / (total_steps - warmup_steps))) / 2


def bgrl(seed: int, *, num_nodes: int = 6, num_feats: int = 5, lr: float = 1e-4,
         mm_base: float = 0.99, epochs: int = 100, warmup: int = 10) -> RealCase:
    torch.manual_seed(seed)
    data = {"x": torch.randn(num_nodes, num_feats), "edge_index": random_graph(num_nodes, 3)}
    transform_1 = graph_drop_transform(drop_edge_p=0.4, drop_feat_p=0.1)
    transform_2 = graph_drop_transform(drop_edge_p=0.1, drop_feat_p=0.2)
    encoder = BGRLEncoder([num_feats, 6, 4])
    predictor = MLPPredictor(4, 4, hidden_size=8)
    model = BGRL(encoder, predictor)
    optimizer = torch.optim.AdamW(model.trainable_parameters(), lr=lr, weight_decay=1e-5)
    state = {"step": 0}

    def step() -> torch.Tensor:
        model.train()
        for param_group in optimizer.param_groups:
            param_group["lr"] = cosine_decay(lr, warmup, epochs, state["step"])
        mm = 1 - cosine_decay(1 - mm_base, 0, epochs, state["step"])
        state["step"] += 1
        x1, x2 = transform_1(data), transform_2(data)
        q1, y2 = model(x1, x2)
        q2, y1 = model(x2, x1)
        loss = (2 - F.cosine_similarity(q1, y2.detach(), dim=-1).mean()
                - F.cosine_similarity(q2, y1.detach(), dim=-1).mean())
        model.update_target_network(mm)  # after optimizer.step() in the source
        return loss

    return RealCase("bgrl", "nerdslab/bgrl train_transductive.py@60f9f19ad0598f9163ad70ebbde3e7"
                    "297760901e", "https://arxiv.org/abs/2102.06514 (BGRL, the authors' "
                    "reference implementation)", "correct", step, optimizer, {"model": model})


# --- gusye1234/LightGCN-PyTorch code/model.py, code/utils.py, code/Procedure.py
# @947ca2b3b1d2d3545b114145710cb06c4e57b3d2: LightGCN (arXiv:2002.02126). The graph is the
# symmetric-normalized user-item adjacency, a sparse tensor built once (no gradient);
# computer() propagates the concatenated user and item embeddings n_layers times with
# torch.sparse.mm and averages the layers. BPRLoss.stageOne: bpr_loss() calls computer() again
# for every batch (nothing of the propagation is kept on the model between batches), softplus
# of the score difference plus decay * the L2 of the layer-0 embeddings of the batch, one Adam
# on all parameters: correct. Default config: dropout 0 (the graph is not dropped), A_split
# False.


class LightGCN(nn.Module):
    def __init__(self, num_users: int, num_items: int, graph: torch.Tensor,
                 latent_dim: int = 3, n_layers: int = 3) -> None:
        super().__init__()
        self.num_users, self.num_items = num_users, num_items
        self.n_layers = n_layers
        self.embedding_user = nn.Embedding(num_users, latent_dim)
        self.embedding_item = nn.Embedding(num_items, latent_dim)
        nn.init.normal_(self.embedding_user.weight, std=0.1)
        nn.init.normal_(self.embedding_item.weight, std=0.1)
        self.Graph = graph

    def computer(self) -> tuple[torch.Tensor, torch.Tensor]:
        all_emb = torch.cat([self.embedding_user.weight, self.embedding_item.weight])
        embs = [all_emb]
        g_droped = self.Graph
        for _ in range(self.n_layers):
            all_emb = torch.sparse.mm(g_droped, all_emb)
            embs.append(all_emb)
        light_out = torch.mean(torch.stack(embs, dim=1), dim=1)
        users, items = torch.split(light_out, [self.num_users, self.num_items])
        return users, items

    def getEmbedding(self, users: torch.Tensor, pos_items: torch.Tensor,
                     neg_items: torch.Tensor) -> tuple[torch.Tensor, ...]:
        all_users, all_items = self.computer()
        return (all_users[users], all_items[pos_items], all_items[neg_items],
                self.embedding_user(users), self.embedding_item(pos_items),
                self.embedding_item(neg_items))

    def bpr_loss(self, users: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor]:
        users_emb, pos_emb, neg_emb, user_emb0, pos_emb0, neg_emb0 = self.getEmbedding(
            users.long(), pos.long(), neg.long())
        reg_loss = (1 / 2) * (user_emb0.norm(2).pow(2) + pos_emb0.norm(2).pow(2)
                              + neg_emb0.norm(2).pow(2)) / float(len(users))
        pos_scores = torch.sum(torch.mul(users_emb, pos_emb), dim=1)
        neg_scores = torch.sum(torch.mul(users_emb, neg_emb), dim=1)
        loss = torch.mean(F.softplus(neg_scores - pos_scores))
        return loss, reg_loss


def lightgcn_graph(user_item: torch.Tensor) -> torch.Tensor:
    """dataloader.getSparseGraph: [[0, R], [R^T, 0]] with D^-1/2 A D^-1/2, sparse."""
    n_users, m_items = user_item.shape
    adj = torch.zeros(n_users + m_items, n_users + m_items)
    adj[:n_users, n_users:] = user_item
    adj[n_users:, :n_users] = user_item.t()
    d = adj.sum(dim=1)
    d[d == 0.0] = 1.0
    d_sqrt = torch.sqrt(d).unsqueeze(0)
    adj = adj / d_sqrt / d_sqrt.t()
    return adj.to_sparse().coalesce()


def lightgcn(seed: int, *, n_users: int = 4, m_items: int = 5, batch: int = 3,
             decay: float = 1e-4) -> RealCase:
    torch.manual_seed(seed)
    user_item = (torch.rand(n_users, m_items) < 0.5).float()
    user_item[torch.arange(n_users), torch.randint(0, m_items, (n_users,))] = 1.0
    model = LightGCN(n_users, m_items, lightgcn_graph(user_item))
    opt = torch.optim.Adam(model.parameters(), lr=0.001)
    users = torch.randint(0, n_users, (batch,))
    pos = torch.multinomial(user_item[users], 1).squeeze(1)
    neg = torch.randint(0, m_items, (batch,))

    def step() -> torch.Tensor:
        model.train()
        loss, reg_loss = model.bpr_loss(users, pos, neg)
        reg_loss = reg_loss * decay
        return loss + reg_loss

    return RealCase("lightgcn", "gusye1234/LightGCN-PyTorch code/model.py@947ca2b3b1d2d3545b11"
                    "4145710cb06c4e57b3d2", "https://arxiv.org/abs/2002.02126 (LightGCN, the "
                    "authors' PyTorch implementation)", "correct", step, opt, {"model": model})


# --- facebookresearch/dlrm dlrm_s_pytorch.py@090956ee2319ddd349a42232958aefccfe3f7b0a: DLRM
# (arXiv:1906.00091) on one device. create_emb builds nn.EmbeddingBag(n, m, mode="sum",
# sparse=True) tables (weights replaced through .data), create_mlp the bottom and top MLPs
# (Linear + ReLU, a Sigmoid at sigmoid_top); sequential_forward runs the bottom MLP on the dense
# features, apply_emb the bags from (offsets, indices), interact_features the "dot" interaction
# (pairwise dot products below the diagonal, concatenated with the dense output), the top MLP
# and BCELoss; SGD on dlrm.parameters(), whose embedding gradients are sparse: correct.
# weighted_pooling="learned" gathers per-sample weights from a ParameterList.


class DLRMNet(nn.Module):
    def __init__(self, m_spa: int, ln_emb: list[int], ln_bot: list[int], ln_top: list[int],
                 sigmoid_bot: int = -1, sigmoid_top: int = -1,
                 weighted_pooling: str | None = None) -> None:
        super().__init__()
        self.weighted_pooling = weighted_pooling
        self.emb_l, w_list = self.create_emb(m_spa, ln_emb, weighted_pooling)
        if weighted_pooling == "learned":
            self.v_W_l: Any = nn.ParameterList([nn.Parameter(w) for w in w_list])
        else:
            self.v_W_l = w_list
        self.bot_l = self.create_mlp(ln_bot, sigmoid_bot)
        self.top_l = self.create_mlp(ln_top, sigmoid_top)
        self.loss_fn = nn.BCELoss(reduction="mean")

    @staticmethod
    def create_mlp(ln: list[int], sigmoid_layer: int) -> nn.Sequential:
        layers: list[nn.Module] = []
        for i in range(len(ln) - 1):
            n, m = ln[i], ln[i + 1]
            layer = nn.Linear(n, m, bias=True)
            layer.weight.data = torch.randn(m, n) * math.sqrt(2 / (m + n))
            layer.bias.data = torch.randn(m) * math.sqrt(1 / m)
            layers.append(layer)
            layers.append(nn.Sigmoid() if i == sigmoid_layer else nn.ReLU())
        return nn.Sequential(*layers)

    @staticmethod
    def create_emb(m: int, ln: list[int], weighted_pooling: str | None
                   ) -> tuple[nn.ModuleList, list[torch.Tensor | None]]:
        emb_l, v_w_l = nn.ModuleList(), []
        for n in ln:
            bag = nn.EmbeddingBag(n, m, mode="sum", sparse=True)
            bag.weight.data = (torch.rand(n, m) * 2 - 1) * math.sqrt(1 / n)
            v_w_l.append(None if weighted_pooling is None else torch.ones(n))
            emb_l.append(bag)
        return emb_l, v_w_l

    def apply_emb(self, offsets: list[torch.Tensor], indices: list[torch.Tensor]
                  ) -> list[torch.Tensor]:
        ly = []
        for k, sparse_index_group_batch in enumerate(indices):
            per_sample_weights = None if self.v_W_l[k] is None else \
                self.v_W_l[k].gather(0, sparse_index_group_batch)
            ly.append(self.emb_l[k](sparse_index_group_batch, offsets[k],
                                    per_sample_weights=per_sample_weights))
        return ly

    @staticmethod
    def interact_features(x: torch.Tensor, ly: list[torch.Tensor]) -> torch.Tensor:
        batch_size, d = x.shape
        t = torch.cat([x, *ly], dim=1).view((batch_size, -1, d))
        z = torch.bmm(t, torch.transpose(t, 1, 2))
        _, ni, nj = z.shape
        li = torch.tensor([i for i in range(ni) for j in range(i)])
        lj = torch.tensor([j for i in range(nj) for j in range(i)])
        return torch.cat([x, z[:, li, lj]], dim=1)

    def forward(self, dense_x: torch.Tensor, offsets: list[torch.Tensor],
                indices: list[torch.Tensor]) -> torch.Tensor:
        x = self.bot_l(dense_x)
        ly = self.apply_emb(offsets, indices)
        return self.top_l(self.interact_features(x, ly))


def dlrm(seed: int, *, weighted_pooling: str | None = None, batch: int = 3,
         m_spa: int = 2) -> RealCase:
    torch.manual_seed(seed)
    ln_emb, ln_bot = [4, 3, 5], [3, 4, m_spa]
    num_fea = len(ln_emb) + 1
    ln_top = [m_spa + num_fea * (num_fea - 1) // 2, 4, 1]
    dlrm_net = DLRMNet(m_spa, ln_emb, ln_bot, ln_top, sigmoid_top=len(ln_top) - 2,
                       weighted_pooling=weighted_pooling)
    optimizer = torch.optim.SGD(dlrm_net.parameters(), lr=0.1)
    dense_x = torch.rand(batch, ln_bot[0])
    offsets, indices = [], []
    for n in ln_emb:  # bags of one to three lookups per sample
        lengths = torch.randint(1, 4, (batch,))
        offsets.append(torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)[:-1]]))
        indices.append(torch.randint(0, n, (int(lengths.sum()),)))
    target = torch.randint(0, 2, (batch, 1)).float()

    def step() -> torch.Tensor:
        z = dlrm_net(dense_x, offsets, indices)
        return dlrm_net.loss_fn(z, target)

    name = "dlrm" if weighted_pooling is None else f"dlrm_{weighted_pooling}_pooling"
    return RealCase(name, "facebookresearch/dlrm dlrm_s_pytorch.py@090956ee2319ddd349a42232958a"
                    "efccfe3f7b0a", "https://arxiv.org/abs/1906.00091 (DLRM, the reference "
                    "implementation)", "correct", step, optimizer, {"dlrm": dlrm_net})


# --- williamleif/graphsage-simple graphsage/encoders.py, graphsage/aggregators.py,
# graphsage/model.py@d3105e5223e9602ba3ef2dd27e343d044fe4bb5f: run_cora(). The features are an
# nn.Embedding whose weight is a Parameter with requires_grad False; enc1 aggregates them (mean
# over the neighbours, gcn=True: no self features), enc2 aggregates enc1's output through a
# lambda, and only the line `self.base_model = base_model` in Encoder.__init__ makes enc1 a
# submodule of enc2; SGD(filter(requires_grad, graphsage.parameters()), lr=0.7): correct.
# graphsage_simple_no_base_model: the same code without that line, the question of
# williamleif/graphsage-simple#4 ("self.base_model is not used ... when I remove the statement,
# the result changes a lot"; answer: without it the model is incomplete): enc1's weight then
# gets gradient and no optimizer steps it (truth "leaks").


class MeanAggregator(nn.Module):
    def __init__(self, features: Callable[[torch.Tensor], torch.Tensor],
                 rng: random.Random, gcn: bool = False) -> None:
        super().__init__()
        self.features = features
        self.gcn = gcn
        self.rng = rng

    def forward(self, nodes: list[int], to_neighs: list[set[int]], num_sample: int | None = 10
                ) -> torch.Tensor:
        if num_sample is not None:
            samp_neighs = [set(self.rng.sample(sorted(to_neigh), num_sample))
                           if len(to_neigh) >= num_sample else to_neigh for to_neigh in to_neighs]
        else:
            samp_neighs = to_neighs
        if self.gcn:
            samp_neighs = [samp_neigh | {nodes[i]} for i, samp_neigh in enumerate(samp_neighs)]
        unique_nodes_list = list(set.union(*samp_neighs))
        unique_nodes = {n: i for i, n in enumerate(unique_nodes_list)}
        mask = torch.zeros(len(samp_neighs), len(unique_nodes))
        column_indices = [unique_nodes[n] for samp_neigh in samp_neighs for n in samp_neigh]
        row_indices = [i for i in range(len(samp_neighs)) for _ in range(len(samp_neighs[i]))]
        mask[row_indices, column_indices] = 1
        mask = mask.div(mask.sum(1, keepdim=True))
        embed_matrix = self.features(torch.LongTensor(unique_nodes_list))
        return mask.mm(embed_matrix)


class SageEncoder(nn.Module):
    def __init__(self, features: Callable[[torch.Tensor], torch.Tensor], feature_dim: int,
                 embed_dim: int, adj_lists: dict[int, set[int]], aggregator: MeanAggregator,
                 num_sample: int = 10, base_model: nn.Module | None = None, gcn: bool = False,
                 register_base_model: bool = True) -> None:
        super().__init__()
        self.features = features
        self.feat_dim = feature_dim
        self.adj_lists = adj_lists
        self.aggregator = aggregator
        self.num_sample = num_sample
        if base_model is not None and register_base_model:
            self.base_model = base_model  # audit: fix here
        self.gcn = gcn
        self.embed_dim = embed_dim
        self.weight = nn.Parameter(
            torch.FloatTensor(embed_dim, self.feat_dim if self.gcn else 2 * self.feat_dim))
        nn.init.xavier_uniform_(self.weight)

    def forward(self, nodes: list[int]) -> torch.Tensor:
        neigh_feats = self.aggregator(nodes, [self.adj_lists[int(node)] for node in nodes],
                                      self.num_sample)
        if not self.gcn:
            self_feats = self.features(torch.LongTensor(nodes))
            combined = torch.cat([self_feats, neigh_feats], dim=1)
        else:
            combined = neigh_feats
        return F.relu(self.weight.mm(combined.t()))


class SupervisedGraphSage(nn.Module):
    def __init__(self, num_classes: int, enc: SageEncoder) -> None:
        super().__init__()
        self.enc = enc
        self.xent = nn.CrossEntropyLoss()
        self.weight = nn.Parameter(torch.FloatTensor(num_classes, enc.embed_dim))
        nn.init.xavier_uniform_(self.weight)

    def forward(self, nodes: list[int]) -> torch.Tensor:
        embeds = self.enc(nodes)
        scores = self.weight.mm(embeds)
        return scores.t()

    def loss(self, nodes: list[int], labels: torch.Tensor) -> torch.Tensor:
        scores = self.forward(nodes)
        return self.xent(scores, labels.squeeze())


def graphsage_simple(seed: int, *, base_model: bool = True, num_nodes: int = 8,
                     num_feats: int = 5, embed_dim: int = 4, num_classes: int = 3,
                     batch: int = 4) -> RealCase:
    torch.manual_seed(seed)
    rng = random.Random(seed)
    feat_data = torch.rand(num_nodes, num_feats)
    labels = torch.randint(0, num_classes, (num_nodes, 1))
    edges = random_graph(num_nodes, 4)
    adj_lists: dict[int, set[int]] = {n: set() for n in range(num_nodes)}
    for a, b in edges.t().tolist():
        adj_lists[a].add(b)
    features = nn.Embedding(num_nodes, num_feats)
    features.weight = nn.Parameter(feat_data, requires_grad=False)
    agg1 = MeanAggregator(features, rng)
    enc1 = SageEncoder(features, num_feats, embed_dim, adj_lists, agg1, gcn=True)
    agg2 = MeanAggregator(lambda nodes: enc1(nodes).t(), rng)
    enc2 = SageEncoder(lambda nodes: enc1(nodes).t(), enc1.embed_dim, embed_dim, adj_lists,
                       agg2, base_model=enc1, gcn=True, register_base_model=base_model)
    enc1.num_samples = 5  # as the source (num_sample stays 10)
    enc2.num_samples = 5
    graphsage = SupervisedGraphSage(num_classes, enc2)
    train = list(torch.randperm(num_nodes).tolist())
    # the bug's fix: enc1 registered in its encoder (the published line), or added here
    optimizer = torch.optim.SGD(filter(lambda p: p.requires_grad, graphsage.parameters()),  # audit: fix here [graphsage_simple_no_base_model]
                                lr=0.7)

    def step() -> torch.Tensor:
        batch_nodes = train[:batch]
        rng.shuffle(train)
        return graphsage.loss(batch_nodes, labels[torch.tensor(batch_nodes)])

    return RealCase("graphsage_simple" if base_model else "graphsage_simple_no_base_model",
                    "williamleif/graphsage-simple graphsage/model.py@d3105e5223e9602ba3ef2dd27e"
                    "343d044fe4bb5f", "https://github.com/williamleif/graphsage-simple/issues/4",
                    "correct" if base_model else "leaks", step, optimizer,
                    {"enc1": enc1, "graphsage": graphsage})  # enc1's own names in both


# --- benedekrozemberczki/pytorch_geometric_temporal torch_geometric_temporal/nn/recurrent/
# evolvegcno.py@67a36f92089bed91d421ba52bbe40df537001a03 (PR #221: self.weight keeps the GRU's
# output from one forward to the next), examples/recurrent/evolvegcno_example.py
# @0923ad8fcaf491f4b7b01ef8467a95385ce545ea. EvolveGCNO: a GRU evolves the GCN weight
# (initial_weight, a Parameter, when self.weight is None, else the previous self.weight);
# GCNConv_Fixed_W propagates x @ W with gcn_norm; RecurrentGCN adds a ReLU and a Linear; one
# epoch sums the MSE over the snapshots; one Adam on model.parameters().
# evolvegcno_no_detach: the example as it was: self.weight keeps the epoch's graph into the
# next epoch (the source backpropagates with retain_graph=True; the next epoch's backward fails,
# #297 and #305; truth "carried"). evolvegcno: each epoch starts its sequence again from
# initial_weight (self.weight = None, as the example does before its test pass, and as the
# reference EvolveGCN, IBM/EvolveGCN egcn_o.py, starts every forward from GCN_init_weights):
# correct. The fix the repository published for #305 (987e43e213bbe8dcf4910eaeea7586b42b657d9e,
# self.weight detached after each epoch) also stops the carried graph, but from the second epoch
# on no gradient reaches initial_weight, which Adam still steps: it is not this twin.


class GCNConvFixedW(nn.Module):
    def forward(self, W: torch.Tensor, x: torch.Tensor, edge_index: torch.Tensor,
                edge_weight: torch.Tensor | None = None) -> torch.Tensor:
        edge_index, edge_weight = gcn_norm(edge_index, edge_weight, x.size(0))
        return propagate(torch.matmul(x, W), edge_index, edge_weight)


class EvolveGCNO(nn.Module):
    def __init__(self, in_channels: int) -> None:
        super().__init__()
        self.in_channels = in_channels
        self.initial_weight = nn.Parameter(torch.empty(1, in_channels, in_channels))
        self.weight: torch.Tensor | None = None
        self.recurrent_layer = nn.GRU(input_size=in_channels, hidden_size=in_channels,
                                      num_layers=1)
        self.conv_layer = GCNConvFixedW()
        nn.init.xavier_uniform_(self.initial_weight)

    def reinitialize_weight(self) -> None:
        self.weight = None

    def forward(self, X: torch.Tensor, edge_index: torch.Tensor,
                edge_weight: torch.Tensor | None = None) -> torch.Tensor:
        if self.weight is None:
            _, self.weight = self.recurrent_layer(self.initial_weight, self.initial_weight)
        else:
            _, self.weight = self.recurrent_layer(self.weight, self.weight)
        return self.conv_layer(self.weight.squeeze(dim=0), X, edge_index, edge_weight)


class RecurrentGCN(nn.Module):
    def __init__(self, node_features: int) -> None:
        super().__init__()
        self.recurrent = EvolveGCNO(node_features)
        self.linear = nn.Linear(node_features, 1)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, edge_weight: torch.Tensor
                ) -> torch.Tensor:
        return self.linear(F.relu(self.recurrent(x, edge_index, edge_weight)))


def evolvegcno(seed: int, *, restart: bool = True, num_nodes: int = 5, node_features: int = 4,
               snapshots: int = 3) -> RealCase:
    torch.manual_seed(seed)
    model = RecurrentGCN(node_features)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    edge_index = random_graph(num_nodes, 2)
    train_dataset = [{"x": torch.randn(num_nodes, node_features), "edge_index": edge_index,
                      "edge_attr": torch.rand(edge_index.size(1)),
                      "y": torch.randn(num_nodes, 1)} for _ in range(snapshots)]

    def step() -> torch.Tensor:
        # the audit's fix writes the restart below as the step's first line, before this one
        model.train()  # audit: fix here [evolvegcno_no_detach]
        if restart:
            model.recurrent.weight = None
        cost = torch.zeros(())
        for snapshot in train_dataset:
            y_hat = model(snapshot["x"], snapshot["edge_index"], snapshot["edge_attr"])
            cost = cost + torch.mean((y_hat - snapshot["y"]) ** 2)
        return cost / len(train_dataset)

    return RealCase("evolvegcno" if restart else "evolvegcno_no_detach",
                    "benedekrozemberczki/pytorch_geometric_temporal examples/recurrent/"
                    "evolvegcno_example.py@0923ad8fcaf491f4b7b01ef8467a95385ce545ea",
                    "https://github.com/IBM/EvolveGCN/blob/90869062bbc98d56935e3d92e1d9b1b4c25b"
                    "e593/egcn_o.py (the reference restarts from GCN_init_weights)" if restart
                    else "https://github.com/benedekrozemberczki/pytorch_geometric_temporal/"
                    "issues/305", "correct" if restart else "carried", step, optimizer,
                    {"model": model})


# --- pyg-team/pytorch_geometric examples/node2vec.py@bb2f9fa0c70c806027cf4628c578ca237794403b,
# torch_geometric/nn/models/node2vec.py@03559e9176ff8810625a805989153853767c8f8b: Node2Vec
# (arXiv:1607.00653) with sparse=True: one nn.Embedding(sparse=True); the loader samples, for a
# batch of start nodes, random walks (p = q = 1) cut into windows of context_size (positive) and
# windows of uniformly drawn nodes (negative); loss() is -log sigmoid of the start-context dot
# products plus -log(1 - sigmoid) of the negatives; torch.optim.SparseAdam(list(
# model.parameters())), whose gradient is sparse: correct.


class Node2Vec(nn.Module):
    def __init__(self, edge_index: torch.Tensor, num_nodes: int, embedding_dim: int,
                 walk_length: int, context_size: int, walks_per_node: int = 1,
                 num_negative_samples: int = 1, sparse: bool = False) -> None:
        super().__init__()
        order = torch.argsort(edge_index[0] * num_nodes + edge_index[1])
        row, self.col = edge_index[0][order], edge_index[1][order]
        self.rowptr = torch.cat([torch.zeros(1, dtype=torch.long),
                                 torch.bincount(row, minlength=num_nodes).cumsum(0)])
        self.num_nodes = num_nodes
        self.EPS = 1e-15
        self.embedding_dim = embedding_dim
        self.walk_length = walk_length - 1
        self.context_size = context_size
        self.walks_per_node = walks_per_node
        self.num_negative_samples = num_negative_samples
        self.embedding = nn.Embedding(num_nodes, embedding_dim, sparse=sparse)

    def random_walk(self, start: torch.Tensor) -> torch.Tensor:
        """Uniform walks (p = q = 1) of walk_length steps from each start node."""
        walk = [start]
        for _ in range(self.walk_length):
            node = walk[-1]
            deg = self.rowptr[node + 1] - self.rowptr[node]
            walk.append(self.col[self.rowptr[node] + (torch.rand(node.size(0)) * deg).long()])
        return torch.stack(walk, dim=1)

    def windows(self, rw: torch.Tensor) -> torch.Tensor:
        num_walks_per_rw = 1 + self.walk_length + 1 - self.context_size
        return torch.cat([rw[:, j:j + self.context_size] for j in range(num_walks_per_rw)])

    def sample(self, batch: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        pos = self.windows(self.random_walk(batch.repeat(self.walks_per_node)))
        batch = batch.repeat(self.walks_per_node * self.num_negative_samples)
        rw = torch.randint(self.num_nodes, (batch.size(0), self.walk_length))
        return pos, self.windows(torch.cat([batch.view(-1, 1), rw], dim=-1))

    def _dots(self, rw: torch.Tensor) -> torch.Tensor:
        start, rest = rw[:, 0], rw[:, 1:].contiguous()
        h_start = self.embedding(start).view(rw.size(0), 1, self.embedding_dim)
        h_rest = self.embedding(rest.view(-1)).view(rw.size(0), -1, self.embedding_dim)
        return (h_start * h_rest).sum(dim=-1).view(-1)

    def loss(self, pos_rw: torch.Tensor, neg_rw: torch.Tensor) -> torch.Tensor:
        pos_loss = -torch.log(torch.sigmoid(self._dots(pos_rw)) + self.EPS).mean()
        neg_loss = -torch.log(1 - torch.sigmoid(self._dots(neg_rw)) + self.EPS).mean()
        return pos_loss + neg_loss


def node2vec(seed: int, *, num_nodes: int = 6, batch: int = 3) -> RealCase:
    torch.manual_seed(seed)
    model = Node2Vec(random_graph(num_nodes, 3), num_nodes, embedding_dim=4, walk_length=4,
                     context_size=3, walks_per_node=2, sparse=True)
    optimizer = torch.optim.SparseAdam(list(model.parameters()), lr=0.01)

    def step() -> torch.Tensor:
        model.train()
        pos_rw, neg_rw = model.sample(torch.randperm(num_nodes)[:batch])
        return model.loss(pos_rw, neg_rw)

    return RealCase("node2vec_sparse_adam", "pyg-team/pytorch_geometric examples/node2vec.py@bb2"
                    "f9fa0c70c806027cf4628c578ca237794403b", "https://arxiv.org/abs/1607.00653 "
                    "(node2vec, the model the example trains)", "correct", step, optimizer,
                    {"model": model})


CASES: dict[str, Callable[[int], RealCase]] = {
    "bgrl": bgrl,
    "lightgcn": lightgcn,
    "dlrm": dlrm,
    "dlrm_learned_pooling": lambda s: dlrm(s, weighted_pooling="learned"),
    "graphsage_simple": graphsage_simple,
    "graphsage_simple_no_base_model": lambda s: graphsage_simple(s, base_model=False),
    "evolvegcno": evolvegcno,
    "evolvegcno_no_detach": lambda s: evolvegcno(s, restart=False),
    "node2vec_sparse_adam": node2vec,
}

TWINS: dict[str, str] = {
    "graphsage_simple_no_base_model": "graphsage_simple",
    "evolvegcno_no_detach": "evolvegcno",
}
