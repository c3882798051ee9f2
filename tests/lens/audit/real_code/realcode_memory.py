"""Language models whose memory outlives the step: Transformer-XL's segment memory,
Infini-attention's compressive memory, AWD-LSTM's recurrent state. Each step trains on one
segment (one BPTT window) and hands a state to the next; the state must be cut from the graph
that made it, or the next step's backward runs into a graph already freed.

Each builder takes ``seed`` and returns a :class:`RealCase`; the text is ours, the structure
(modules, optimizers, order of calls, bug) is the repository's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from realcode_common import RealCase
from torch import nn
from torch.nn import functional as F

# --- kimiyoung/transformer-xl pytorch/mem_transformer.py, pytorch/train.py@44781ed21dbaec88b280
# f74d9ae2877f52b492a5: MemTransformerLM with relative partial-learnable attention (attn_type 0),
# r_w_bias and r_r_bias shared by the layers, tied input and output embeddings (the adaptive
# softmax without clusters), Adam. train.py feeds the mems returned by one segment into the next
# (ret = model(data, target, *mems); loss, mems = ret[0], ret[1:]); _update_mems caches them
# under torch.no_grad() with .detach(), the stop-gradient SG(.) of the paper's eq. in sec. 3.2.
# The bug twin caches them with their graph.


class RelPartialLearnableMultiHeadAttn(nn.Module):
    def __init__(self, n_head: int, d_model: int, d_head: int, dropout: float) -> None:
        super().__init__()
        self.n_head, self.d_head = n_head, d_head
        self.qkv_net = nn.Linear(d_model, 3 * n_head * d_head, bias=False)
        self.r_net = nn.Linear(d_model, n_head * d_head, bias=False)
        self.drop, self.dropatt = nn.Dropout(dropout), nn.Dropout(dropout)
        self.o_net = nn.Linear(n_head * d_head, d_model, bias=False)
        self.layer_norm = nn.LayerNorm(d_model)
        self.scale = 1 / (d_head ** 0.5)

    @staticmethod
    def _rel_shift(x: torch.Tensor) -> torch.Tensor:
        zero_pad = torch.zeros((x.size(0), 1, *x.size()[2:]), dtype=x.dtype)
        x_padded = torch.cat([zero_pad, x], dim=1).view(x.size(1) + 1, x.size(0), *x.size()[2:])
        return x_padded[1:].view_as(x)

    def forward(self, w: torch.Tensor, r: torch.Tensor, r_w_bias: torch.Tensor,
                r_r_bias: torch.Tensor, attn_mask: torch.Tensor, mems: torch.Tensor
                ) -> torch.Tensor:
        qlen, rlen, bsz = w.size(0), r.size(0), w.size(1)
        w_heads = self.qkv_net(torch.cat([mems, w], 0))
        r_head_k = self.r_net(r)
        w_head_q, w_head_k, w_head_v = torch.chunk(w_heads, 3, dim=-1)
        w_head_q = w_head_q[-qlen:]
        klen = w_head_k.size(0)
        w_head_q = w_head_q.view(qlen, bsz, self.n_head, self.d_head)
        w_head_k = w_head_k.view(klen, bsz, self.n_head, self.d_head)
        w_head_v = w_head_v.view(klen, bsz, self.n_head, self.d_head)
        r_head_k = r_head_k.view(rlen, self.n_head, self.d_head)
        AC = torch.einsum("ibnd,jbnd->ijbn", (w_head_q + r_w_bias, w_head_k))
        BD = self._rel_shift(torch.einsum("ibnd,jnd->ijbn", (w_head_q + r_r_bias, r_head_k)))
        attn_score = (AC + BD) * self.scale
        attn_score = attn_score.masked_fill(attn_mask[:, :, None, None], -float("inf"))
        attn_prob = self.dropatt(F.softmax(attn_score, dim=1))
        attn_vec = torch.einsum("ijbn,jbnd->ibnd", (attn_prob, w_head_v))
        attn_vec = attn_vec.contiguous().view(qlen, bsz, self.n_head * self.d_head)
        return self.layer_norm(w + self.drop(self.o_net(attn_vec)))


class RelPartialLearnableDecoderLayer(nn.Module):
    def __init__(self, n_head: int, d_model: int, d_head: int, d_inner: int,
                 dropout: float) -> None:
        super().__init__()
        self.dec_attn = RelPartialLearnableMultiHeadAttn(n_head, d_model, d_head, dropout)
        self.CoreNet = nn.Sequential(nn.Linear(d_model, d_inner), nn.ReLU(inplace=True),
                                     nn.Dropout(dropout), nn.Linear(d_inner, d_model),
                                     nn.Dropout(dropout))
        self.ff_layer_norm = nn.LayerNorm(d_model)

    def forward(self, dec_inp: torch.Tensor, r: torch.Tensor, r_w_bias: torch.Tensor,
                r_r_bias: torch.Tensor, dec_attn_mask: torch.Tensor, mems: torch.Tensor
                ) -> torch.Tensor:
        output = self.dec_attn(dec_inp, r, r_w_bias, r_r_bias, dec_attn_mask, mems)
        return self.ff_layer_norm(output + self.CoreNet(output))  # PositionwiseFF, post-norm


class MemTransformerLM(nn.Module):
    def __init__(self, n_token: int = 12, n_layer: int = 2, n_head: int = 2, d_model: int = 8,
                 d_head: int = 4, d_inner: int = 16, dropout: float = 0.1, mem_len: int = 4,
                 detach_mems: bool = True) -> None:
        super().__init__()
        self.n_layer, self.d_model, self.mem_len = n_layer, d_model, mem_len
        self.detach_mems = detach_mems
        self.word_emb = nn.Embedding(n_token, d_model)  # AdaptiveEmbedding, div_val=1
        self.emb_scale = d_model ** 0.5
        self.drop = nn.Dropout(dropout)
        self.layers = nn.ModuleList(RelPartialLearnableDecoderLayer(
            n_head, d_model, d_head, d_inner, dropout) for _ in range(n_layer))
        self.out_bias = nn.Parameter(torch.zeros(n_token))  # crit.out_layers[0], weight tied
        self.register_buffer("inv_freq", 1 / (10000 ** (torch.arange(0.0, d_model, 2.0)
                                                         / d_model)))
        self.r_w_bias = nn.Parameter(torch.randn(n_head, d_head) * 0.02)
        self.r_r_bias = nn.Parameter(torch.randn(n_head, d_head) * 0.02)

    def init_mems(self) -> list[torch.Tensor]:
        return [torch.empty(0) for _ in range(self.n_layer + 1)]

    def _update_mems(self, hids: list[torch.Tensor], mems: list[torch.Tensor], qlen: int,
                     mlen: int) -> list[torch.Tensor]:
        end_idx = mlen + max(0, qlen)
        beg_idx = max(0, end_idx - self.mem_len)
        if not self.detach_mems:
            return [torch.cat([mems[i], hids[i]], dim=0)[beg_idx:end_idx]
                    for i in range(len(hids))]
        with torch.no_grad():
            return [torch.cat([mems[i], hids[i]], dim=0)[beg_idx:end_idx].detach()
                    for i in range(len(hids))]

    def forward(self, data: torch.Tensor, target: torch.Tensor, *mems: torch.Tensor
                ) -> list[torch.Tensor]:
        mems_l = list(mems) if mems else self.init_mems()
        qlen, bsz = data.size()
        word_emb = self.word_emb(data) * self.emb_scale
        mlen = mems_l[0].size(0)
        klen = mlen + qlen
        dec_attn_mask = torch.triu(word_emb.new_ones(qlen, klen), diagonal=1 + mlen).bool()
        pos_seq = torch.arange(klen - 1, -1, -1.0)
        sinusoid_inp = torch.outer(pos_seq, self.inv_freq)
        pos_emb = self.drop(torch.cat([sinusoid_inp.sin(), sinusoid_inp.cos()], dim=-1)[:, None])
        core_out = self.drop(word_emb)
        hids = [core_out]
        for i, layer in enumerate(self.layers):
            mems_i = mems_l[i] if mlen else core_out.new_zeros(0, bsz, self.d_model)
            core_out = layer(core_out, pos_emb, self.r_w_bias, self.r_r_bias, dec_attn_mask,
                             mems_i)
            hids.append(core_out)
        core_out = self.drop(core_out)
        new_mems = self._update_mems(hids, mems_l, mlen, qlen)
        logit = F.linear(core_out.view(-1, self.d_model), self.word_emb.weight, self.out_bias)
        loss = -F.log_softmax(logit, dim=-1).gather(1, target.view(-1, 1)).squeeze(1)
        return [loss.view(qlen, -1), *new_mems]


def transformer_xl(seed: int, *, detach: bool = True, tgt_len: int = 3, bsz: int = 2
                   ) -> RealCase:
    torch.manual_seed(seed)
    model = MemTransformerLM(detach_mems=detach)
    optimizer = torch.optim.Adam(model.parameters(), lr=2.5e-4)
    train_data = torch.randint(0, 12, (8 * tgt_len + 1, bsz))
    st: dict[str, Any] = {"mems": tuple(), "i": 0}

    def step() -> torch.Tensor:
        i = st["i"]
        data, target = train_data[i:i + tgt_len], train_data[i + 1:i + 1 + tgt_len]
        st["i"] = (i + tgt_len) % (len(train_data) - 1 - tgt_len)
        if detach:
            ret = model(data, target, *st["mems"])
        else:
            ret = model(data, target, *st["mems"])  # audit: fix here
        loss, st["mems"] = ret[0], ret[1:]
        return loss.float().mean().type_as(loss)

    return RealCase(f"transformer_xl{'' if detach else '_no_detach'}",
                    "kimiyoung/transformer-xl pytorch/mem_transformer.py@44781ed21dbaec88b280f74"
                    "d9ae2877f52b492a5", "https://arxiv.org/abs/1901.02860 (Dai et al. 2019, "
                    "sec. 3.2: the cached segment is SG(.), stop-gradient)",
                    "correct" if detach else "carried", step, optimizer, {"model": model})


# --- jlamprou/Infini-Attention infiniAttention.py, run_clm.py: compressive memory M (heads x d x d)
# and its normaliser z, read by linear attention and updated with each segment's keys and values,
# mixed with local attention by a learned gate sigmoid(beta). @c7a5314db63b185b0420b299530c5f4efc7
# d79ed passes (M, z) from segment to segment (M_Z) and _update_memory returns them .detach()ed;
# without it each segment's backward runs into the previous one ("Trying to backward through the
# graph a second time": jlamprou/Infini-Attention#3, whose answer is the detach). @21b31051cb035
# 02db41be883f4ced37ceacc1bca (kept to HEAD 3a86dd5c) made M and z buffers written in forward,
# self.M, self.z = self._update_memory(...), with no detach ("no more need for detach() tricks"):
# the buffers hold the graph of the segment that wrote them.


class InfiniAttention(nn.Module):
    def __init__(self, hidden_size: int = 8, num_heads: int = 2, *, mode: str = "detach",
                 max_positions: int = 16) -> None:
        super().__init__()
        self.num_heads, self.head_dim, self.hidden_size = (num_heads, hidden_size // num_heads,
                                                           hidden_size)
        self.mode = mode
        self.q_proj = nn.Linear(hidden_size, hidden_size, bias=True)
        self.k_proj = nn.Linear(hidden_size, hidden_size, bias=True)
        self.v_proj = nn.Linear(hidden_size, hidden_size, bias=True)
        self.o_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.beta = nn.Parameter(torch.randn(1))
        inv_freq = 1.0 / (10000 ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))
        emb = torch.outer(torch.arange(max_positions).float(), inv_freq)
        emb = torch.cat((emb, emb), dim=-1)
        self.register_buffer("cos_cached", emb.cos(), persistent=False)
        self.register_buffer("sin_cached", emb.sin(), persistent=False)
        if mode == "buffer":
            self.register_buffer("M", torch.zeros(num_heads, self.head_dim, self.head_dim))
            self.register_buffer("z", torch.zeros(num_heads, self.head_dim))

    @staticmethod
    def _rotate_half(x: torch.Tensor) -> torch.Tensor:
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)

    def forward(self, hidden_states: torch.Tensor,
                M_Z: tuple[torch.Tensor, torch.Tensor] | None = None
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor] | None]:
        if self.mode == "buffer":
            M, z = self.M, self.z
        elif M_Z is None:
            M = torch.zeros(self.num_heads, self.head_dim, self.head_dim)
            z = torch.zeros(self.num_heads, self.head_dim)
        else:
            M, z = M_Z
        bsz, q_len, _ = hidden_states.size()

        def heads(t: torch.Tensor) -> torch.Tensor:
            return t.view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)

        query_states = heads(self.q_proj(hidden_states))
        key_states = heads(self.k_proj(hidden_states))
        value_states = heads(self.v_proj(hidden_states))
        cos, sin = self.cos_cached[:q_len], self.sin_cached[:q_len]
        query_states = query_states * cos + self._rotate_half(query_states) * sin
        key_states = key_states * cos + self._rotate_half(key_states) * sin
        memory_output = self._retrieve_from_memory(query_states, M, z)
        if self.mode == "buffer":
            self.M, self.z = self._update_memory(  # audit: fix here
                key_states, value_states, M, z)
            new_M_Z = None
        else:
            new_M_Z = self._update_memory(key_states, value_states, M, z)
        attn_output = F.scaled_dot_product_attention(query_states, key_states, value_states,
                                                     is_causal=True)
        combined = self._long_term_injection(attn_output, memory_output)
        combined = combined.transpose(1, 2).contiguous().view(bsz, q_len, self.hidden_size)
        return self.o_proj(combined), new_M_Z

    def _retrieve_from_memory(self, Q: torch.Tensor, M: torch.Tensor, z: torch.Tensor
                              ) -> torch.Tensor:
        M_s_1 = torch.matmul(F.elu(Q) + 1, M)
        Z_s_1 = torch.matmul(F.elu(Q) + 1, z.unsqueeze(-1)) + 1e-8
        return M_s_1 / Z_s_1

    def _update_memory(self, K: torch.Tensor, V: torch.Tensor, M: torch.Tensor,
                       z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        updated_M = M + torch.matmul(F.elu(K).transpose(-2, -1) + 1, V)
        updated_z = z + (F.elu(K) + 1).sum(dim=-2)
        if self.mode == "detach":
            return updated_M.detach(), updated_z.detach()
        return updated_M, updated_z

    def _long_term_injection(self, A_dot: torch.Tensor, A_mem: torch.Tensor) -> torch.Tensor:
        beta = torch.sigmoid(self.beta)
        return beta * A_mem + (1 - beta) * A_dot


class InfiniLM(nn.Module):
    """Embedding, one decoder layer (pre-norm InfiniAttention and MLP), LM head."""

    def __init__(self, vocab: int = 12, hidden: int = 8, mode: str = "detach") -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, hidden)
        self.input_layernorm, self.post_layernorm = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.self_attn = InfiniAttention(hidden, mode=mode)
        self.mlp = nn.Sequential(nn.Linear(hidden, 2 * hidden), nn.SiLU(),
                                 nn.Linear(2 * hidden, hidden))
        self.norm, self.lm_head = nn.LayerNorm(hidden), nn.Linear(hidden, vocab, bias=False)

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor,
                M_Z: tuple[torch.Tensor, torch.Tensor] | None = None
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor] | None]:
        h = self.embed_tokens(input_ids)
        attn, M_Z = self.self_attn(self.input_layernorm(h), M_Z=M_Z)
        h = h + attn
        h = h + self.mlp(self.post_layernorm(h))
        logits = self.lm_head(self.norm(h))
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)),
                               labels[:, 1:].reshape(-1))
        return loss, M_Z


def infini_attention(seed: int, *, mode: str = "detach", segment_length: int = 4,
                     batch: int = 2) -> RealCase:
    torch.manual_seed(seed)
    model = InfiniLM(mode=mode)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    input_ids = torch.randint(0, 12, (batch, 6 * segment_length))
    segments = torch.tensor_split(input_ids, list(range(segment_length, input_ids.shape[1],
                                                        segment_length)), dim=1)
    st: dict[str, Any] = {"M_Z": None, "i": 0}

    def step() -> torch.Tensor:
        segment = segments[st["i"] % len(segments)]
        st["i"] += 1
        if mode == "no_detach":
            loss, st["M_Z"] = model(segment, segment, M_Z=st["M_Z"])  # audit: fix here [infini_attention_no_detach]
        else:
            loss, st["M_Z"] = model(segment, segment, M_Z=st["M_Z"])
        return loss  # accelerator.backward(loss) per segment

    name = {"detach": "infini_attention", "no_detach": "infini_attention_no_detach",
            "buffer": "infini_attention_buffer"}[mode]
    commit = ("21b31051cb03502db41be883f4ced37ceacc1bca" if mode == "buffer" else
              "c7a5314db63b185b0420b299530c5f4efc7d79ed")
    return RealCase(name, f"jlamprou/Infini-Attention infiniAttention.py@{commit}",
                    "https://github.com/jlamprou/Infini-Attention/issues/3",
                    {"detach": "correct", "no_detach": "carried", "buffer": "held"}[mode],
                    step, optimizer, {"model": model})


# --- salesforce/awd-lstm-lm main.py, model.py, weight_drop.py, embed_regularize.py,
# locked_dropout.py, utils.py@1d466ec5875675ca6b6f0caacbb741240a29da9e: a three-layer LSTM whose
# hidden-to-hidden weights are recomputed each forward from weight_hh_l0_raw by DropConnect
# (WeightDrop), embedding dropout, variational (locked) dropout, tied weights, activation and
# temporal-activation regularisation on the last layer, a random BPTT length; the state is cut
# by repackage_hidden at the start of each batch ("if we didn't, the model would try
# backpropagating all the way to start of the dataset"). The bug twin omits repackage_hidden.


class WeightDrop(nn.Module):
    def __init__(self, module: nn.LSTM, weights: list[str], dropout: float = 0.0) -> None:
        super().__init__()
        self.module, self.weights, self.dropout = module, weights, dropout
        for name_w in self.weights:
            w = getattr(self.module, name_w)
            del self.module._parameters[name_w]
            self.module.register_parameter(name_w + "_raw", nn.Parameter(w.data))

    def _setweights(self) -> None:
        for name_w in self.weights:
            raw_w = getattr(self.module, name_w + "_raw")
            w = F.dropout(raw_w, p=self.dropout, training=self.training)
            setattr(self.module, name_w, w)

    def forward(self, *args: Any) -> Any:
        self._setweights()
        return self.module.forward(*args)


def embedded_dropout(embed: nn.Embedding, words: torch.Tensor, dropout: float = 0.1
                     ) -> torch.Tensor:
    mask = embed.weight.data.new_empty((embed.weight.size(0), 1)).bernoulli_(1 - dropout)
    masked_embed_weight = mask.expand_as(embed.weight) / (1 - dropout) * embed.weight
    return F.embedding(words, masked_embed_weight)


def locked_dropout(x: torch.Tensor, dropout: float) -> torch.Tensor:
    m = x.data.new_empty(1, x.size(1), x.size(2)).bernoulli_(1 - dropout)
    return (m / (1 - dropout)).expand_as(x) * x


class AWDRNNModel(nn.Module):
    def __init__(self, ntoken: int = 12, ninp: int = 6, nhid: int = 8, nlayers: int = 3,
                 dropout: float = 0.4, dropouth: float = 0.3, dropouti: float = 0.65,
                 dropoute: float = 0.1, wdrop: float = 0.5) -> None:
        super().__init__()
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnns = nn.ModuleList(WeightDrop(nn.LSTM(
            ninp if k == 0 else nhid, nhid if k != nlayers - 1 else ninp, 1, dropout=0),
            ["weight_hh_l0"], dropout=wdrop) for k in range(nlayers))
        self.decoder = nn.Linear(nhid, ntoken)
        self.decoder.weight = self.encoder.weight  # tie_weights
        self.ninp, self.nhid, self.nlayers = ninp, nhid, nlayers
        self.dropout, self.dropouth, self.dropouti, self.dropoute = (dropout, dropouth, dropouti,
                                                                     dropoute)

    def forward(self, input: torch.Tensor, hidden: list[tuple[torch.Tensor, torch.Tensor]]
                ) -> tuple[torch.Tensor, list[Any], list[torch.Tensor], list[torch.Tensor]]:
        emb = embedded_dropout(self.encoder, input, dropout=self.dropoute)
        raw_output = locked_dropout(emb, self.dropouti)
        new_hidden, raw_outputs, outputs = [], [], []
        for k, rnn in enumerate(self.rnns):
            raw_output, new_h = rnn(raw_output, hidden[k])
            new_hidden.append(new_h)
            raw_outputs.append(raw_output)
            if k != self.nlayers - 1:
                raw_output = locked_dropout(raw_output, self.dropouth)
                outputs.append(raw_output)
        output = locked_dropout(raw_output, self.dropout)
        outputs.append(output)
        result = output.view(output.size(0) * output.size(1), output.size(2))
        return result, new_hidden, raw_outputs, outputs

    def init_hidden(self, bsz: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        sizes = [self.nhid if k != self.nlayers - 1 else self.ninp for k in range(self.nlayers)]
        return [(torch.zeros(1, bsz, s), torch.zeros(1, bsz, s)) for s in sizes]


def repackage_hidden(h: Any) -> Any:
    """Wraps hidden states in new Tensors, to detach them from their history."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return type(h)(repackage_hidden(v) for v in h)


def awd_lstm(seed: int, *, repackage: bool = True, bptt: int = 5, batch_size: int = 2,
             alpha: float = 2.0, beta: float = 1.0) -> RealCase:
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = AWDRNNModel()
    optimizer = torch.optim.SGD(model.parameters(), lr=30, weight_decay=1.2e-6)
    train_data = torch.randint(0, 12, (10 * bptt, batch_size))
    st: dict[str, Any] = {"hidden": model.init_hidden(batch_size), "i": 0}

    def step() -> torch.Tensor:
        i = st["i"]
        seq_len = max(2, int(rng.normal(bptt if rng.random() < 0.95 else bptt / 2, 1)))
        seq_len = min(seq_len, len(train_data) - 1 - i)
        data, targets = train_data[i:i + seq_len], train_data[i + 1:i + 1 + seq_len].reshape(-1)
        if repackage:
            hidden = repackage_hidden(st["hidden"])
            output, st["hidden"], rnn_hs, dropped_rnn_hs = model(data, hidden)
        else:
            output, st["hidden"], rnn_hs, dropped_rnn_hs = model(  # audit: fix here
                data, st["hidden"])
        st["i"] = (i + seq_len) % (len(train_data) - 2 * bptt)
        raw_loss = F.cross_entropy(F.linear(output, model.decoder.weight, model.decoder.bias),
                                   targets)  # SplitCrossEntropyLoss without splits
        loss = raw_loss + sum(alpha * h.pow(2).mean() for h in dropped_rnn_hs[-1:])
        return loss + sum(beta * (h[1:] - h[:-1]).pow(2).mean() for h in rnn_hs[-1:])

    return RealCase(f"awd_lstm{'' if repackage else '_no_repackage'}",
                    "salesforce/awd-lstm-lm main.py@1d466ec5875675ca6b6f0caacbb741240a29da9e",
                    "https://arxiv.org/abs/1708.02182 (Merity et al. 2018, truncated BPTT over "
                    "variable-length windows)" if repackage else
                    "https://github.com/MorvanZhou/PyTorch-Tutorial/issues/57",
                    "correct" if repackage else "carried", step, optimizer, {"model": model})


CASES: dict[str, Callable[[int], RealCase]] = {
    "transformer_xl": transformer_xl,
    "transformer_xl_no_detach": lambda s: transformer_xl(s, detach=False),
    "infini_attention": infini_attention,
    "infini_attention_no_detach": lambda s: infini_attention(s, mode="no_detach"),
    "infini_attention_buffer": lambda s: infini_attention(s, mode="buffer"),
    "awd_lstm": awd_lstm, "awd_lstm_no_repackage": lambda s: awd_lstm(s, repackage=False),
}
