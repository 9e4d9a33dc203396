"""Transformer-XL (Dai et al. 2019, "Transformer-XL: Attentive Language Models Beyond a
Fixed-Length Context", arXiv:1901.02860), written for this benchmark: transformers 5 dropped it.

What makes it Transformer-XL and not a plain decoder:
- relative positional attention: scores = (q + u)·k  +  (q + v)·r[i - j], with learned global
  biases u, v and sinusoidal relative embeddings r, the second term aligned by `rel_shift`;
- segment-level recurrence: every layer also attends over a memory of the last `mem_len` hidden
  states it saw in the previous segments, carried between steps without gradient;
- output weights tied to the input embeddings. With `cutoffs`, adaptive input embeddings (Baevski &
  Auli 2018) and an adaptive softmax over a frequency-sorted vocabulary (torch's
  AdaptiveLogSoftmaxWithLoss), the tail clusters tied; without (`cutoffs=[]`), one embedding table
  and a full softmax over the whole vocabulary, as NVIDIA's reference code runs without `--adaptive`.

Post-norm layers and dropout placement follow the paper's reference implementation. Tensors
are batch-first: (batch, time, channels).
"""

from __future__ import annotations

import math
from itertools import pairwise

import torch
import torch.nn.functional as F
from torch import nn


def rel_shift(x: torch.Tensor) -> torch.Tensor:
    """Re-index scores from relative distances to key positions.

    `x[..., i, c]` scores query i against the relative embedding in column c, where columns hold
    distances klen-1, ..., 1, 0. The result `y[..., i, j] = x[..., i, j + qlen - 1 - i]` scores
    query i (absolute position mlen + i) against key j, i.e. distance mlen + i - j. Entries with
    j > mlen + i (future keys) hold garbage and must be masked. Done with one pad and two views
    instead of a gather: the padded rows, read with a stride one element shorter, slide each row
    one step further left.
    """
    *lead, qlen, klen = x.shape
    padded = F.pad(x, (1, 0)).view(*lead, klen + 1, qlen)
    return padded[..., 1:, :].view(*lead, qlen, klen)


class RelPartialLearnableAttention(nn.Module):
    def __init__(self, d_model: int, n_head: int, d_head: int, dropout: float, dropatt: float):
        super().__init__()
        self.n_head, self.d_head, self.dropatt = n_head, d_head, dropatt
        self.qkv = nn.Linear(d_model, 3 * n_head * d_head, bias=False)
        self.r_net = nn.Linear(d_model, n_head * d_head, bias=False)
        self.out = nn.Linear(n_head * d_head, d_model, bias=False)
        self.u = nn.Parameter(torch.zeros(n_head, 1, d_head))  # content bias (the paper's u)
        self.v = nn.Parameter(torch.zeros(n_head, 1, d_head))  # position bias (the paper's v)
        self.drop = nn.Dropout(dropout)
        self.norm = nn.LayerNorm(d_model)

    def forward(self, h, pos_emb, mem, future) -> torch.Tensor:
        batch, qlen, _ = h.shape
        context = h if mem is None else torch.cat([mem, h], dim=1)
        klen = context.size(1)
        q, k, v = self.qkv(context).split(self.n_head * self.d_head, dim=-1)
        q = q[:, -qlen:]  # queries for the current segment only; keys and values span the memory too
        q, k, v = (t.reshape(batch, -1, self.n_head, self.d_head).transpose(1, 2) for t in (q, k, v))
        r = self.r_net(pos_emb).view(klen, self.n_head, self.d_head).transpose(0, 1)
        scale = self.d_head**-0.5
        # position term (q + v)·r, aligned to key positions; it enters SDPA as an additive bias
        position = rel_shift(torch.matmul(q + self.v, r.transpose(1, 2))) * scale
        position = position.masked_fill(future, float("-inf"))
        attended = F.scaled_dot_product_attention(
            q + self.u, k, v, attn_mask=position, dropout_p=self.dropatt if self.training else 0.0
        )
        attended = attended.transpose(1, 2).reshape(batch, qlen, -1)
        return self.norm(h + self.drop(self.out(attended)))


class PositionwiseFF(nn.Module):
    def __init__(self, d_model: int, d_inner: int, dropout: float):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(d_model, d_inner),
            nn.ReLU(inplace=True),
            nn.Dropout(dropout),
            nn.Linear(d_inner, d_model),
            nn.Dropout(dropout),
        )
        self.norm = nn.LayerNorm(d_model)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.norm(h + self.net(h))


class DecoderLayer(nn.Module):
    def __init__(self, d_model, n_head, d_head, d_inner, dropout, dropatt):
        super().__init__()
        self.attn = RelPartialLearnableAttention(d_model, n_head, d_head, dropout, dropatt)
        self.ff = PositionwiseFF(d_model, d_inner, dropout)

    def forward(self, h, pos_emb, mem, future):
        return self.ff(self.attn(h, pos_emb, mem, future))


def cluster_dims(d_model: int, n_clusters: int, div_val: int) -> list[int]:
    """Embedding width of each vocabulary cluster: d_model / div_val**i (frequent words get more)."""
    return [d_model // div_val**i for i in range(n_clusters)]


class AdaptiveEmbedding(nn.Module):
    """One table per frequency cluster, each projected up to d_model where narrower.

    Every cluster looks up every token (indices clamped, result masked) rather than gathering the
    cluster's tokens first: the same result without data-dependent shapes or host syncs.
    """

    def __init__(self, vocab_size: int, d_model: int, cutoffs: list[int], div_val: int):
        super().__init__()
        self.edges = [0, *cutoffs, vocab_size]
        dims = cluster_dims(d_model, len(self.edges) - 1, div_val)
        sizes = [hi - lo for lo, hi in pairwise(self.edges)]
        self.tables = nn.ModuleList(nn.Embedding(n, d) for n, d in zip(sizes, dims, strict=True))
        self.projs = nn.ModuleList(
            nn.Identity() if d == d_model else nn.Linear(d, d_model, bias=False) for d in dims
        )
        self.scale = math.sqrt(d_model)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        out = 0
        for (lo, hi), table, proj in zip(pairwise(self.edges), self.tables, self.projs, strict=True):
            inside = ((tokens >= lo) & (tokens < hi)).unsqueeze(-1)
            out = out + proj(table((tokens - lo).clamp(0, hi - lo - 1))) * inside
        return out * self.scale


class AdaptiveSoftmax(nn.AdaptiveLogSoftmaxWithLoss):
    """torch's adaptive softmax, each tail cluster's output weights tied to its input embedding, as
    the reference model does (the head's shortlist rows share one matrix with the cluster logits, so
    they stay untied); returns the mean loss."""

    def __init__(self, d_model: int, vocab_size: int, cutoffs: list[int], div_val: int, embed):
        super().__init__(d_model, vocab_size, cutoffs, div_value=float(div_val), head_bias=True)
        for tail, table in zip(self.tail, embed.tables[1:], strict=True):
            tail[1].weight = table.weight

    def forward(self, h: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        if h.device.type == "cpu" and torch.is_autocast_enabled("cpu"):
            # It accumulates log-probs in its input's dtype. CUDA autocast runs log_softmax in
            # fp32, like this fp32 hidden state; CPU autocast leaves it in bf16.
            h = h.to(torch.get_autocast_dtype("cpu"))
        return super().forward(h, targets).loss

    def forward_flops(self, targets: torch.Tensor) -> float:
        """Product FLOPs per token of the forward: the shortlist and one logit per tail cluster for
        every token, a cluster's projection and logits for the tokens that reach it."""
        d = self.in_features
        flops = 2 * d * self.head.out_features
        for tail, (lo, hi) in zip(self.tail, pairwise(self.cutoffs), strict=True):
            share = ((targets >= lo) & (targets < hi)).float().mean().item()
            width = tail[0].out_features
            flops += share * (2 * d * width + 2 * width * (hi - lo))
        return flops


class FullSoftmax(nn.Module):
    """A logit for every word of the vocabulary, the weights tied to the input embedding, a bias of
    its own; returns the mean cross-entropy loss."""

    def __init__(self, table: nn.Embedding):
        super().__init__()
        self.weight = table.weight
        self.bias = nn.Parameter(torch.zeros(table.num_embeddings))

    def forward(self, h: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits = F.linear(h, self.weight, self.bias)
        # In the logits' own dtype, as the reference code's fp16 model does: autocast would add fp32
        # copies of the (tokens x vocabulary) logits, the step's largest tensors, to the memory that
        # Lambda's batches were sized for.
        with torch.autocast(h.device.type, enabled=False):
            return F.cross_entropy(logits, targets)

    def forward_flops(self, targets: torch.Tensor) -> float:
        """Product FLOPs per token of the forward: a logit per word."""
        return 2 * self.weight.size(1) * self.weight.size(0)


class TransformerXL(nn.Module):
    def __init__(
        self,
        vocab_size: int,
        cutoffs: list[int],
        div_val: int,
        n_layer: int,
        d_model: int,
        n_head: int,
        d_head: int,
        d_inner: int,
        mem_len: int,
        dropout: float,
        dropatt: float,
    ):
        super().__init__()
        self.d_model, self.mem_len = d_model, mem_len
        self.embed = AdaptiveEmbedding(vocab_size, d_model, cutoffs, div_val)
        self.drop = nn.Dropout(dropout)
        self.layers = nn.ModuleList(
            DecoderLayer(d_model, n_head, d_head, d_inner, dropout, dropatt) for _ in range(n_layer)
        )
        self.softmax = (
            AdaptiveSoftmax(d_model, vocab_size, cutoffs, div_val, self.embed)
            if cutoffs
            else FullSoftmax(self.embed.tables[0])
        )
        inv_freq = 1.0 / (10000 ** (torch.arange(0, d_model, 2.0) / d_model))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, tokens, targets, mems: list[torch.Tensor] | None = None):
        """Mean loss over the segment's target tokens, and the memory for the next segment."""
        qlen = tokens.size(1)
        mlen = 0 if mems is None else mems[0].size(1)
        klen = mlen + qlen
        h = self.drop(self.embed(tokens))
        distance = torch.arange(klen - 1, -1, -1.0, device=tokens.device, dtype=self.inv_freq.dtype)
        angles = torch.outer(distance, self.inv_freq)
        pos_emb = self.drop(torch.cat([angles.sin(), angles.cos()], dim=-1))
        future = torch.ones(qlen, klen, dtype=torch.bool, device=tokens.device).triu(1 + mlen)
        inputs = []
        for i, layer in enumerate(self.layers):
            inputs.append(h)
            h = layer(h, pos_emb, None if mems is None else mems[i], future)
        loss = self.softmax(self.drop(h).reshape(-1, self.d_model), targets.reshape(-1))
        return loss, self._next_mems(inputs, mems)

    @torch.no_grad()
    def _next_mems(self, inputs, mems) -> list[torch.Tensor]:
        """Each layer's memory: the last mem_len of (old memory + this segment's layer input)."""
        new = []
        for i, h in enumerate(inputs):
            both = h if mems is None else torch.cat([mems[i], h], dim=1)
            new.append(both[:, max(0, both.size(1) - self.mem_len) :].detach())
        return new


def training_flops_per_token(model: TransformerXL, batch_size: int, tgt_len: int, targets) -> float:
    """Matrix-product FLOPs per target token of one training step once the memory is full: three
    times the forward (the backward costs two), except for the relative embeddings, whose input
    needs no gradient (two). `targets` sets how many tokens reach each tail cluster of an adaptive
    softmax."""
    attn, ff = model.layers[0].attn, model.layers[0].ff
    d, hd = model.d_model, attn.n_head * attn.d_head
    klen = tgt_len + model.mem_len
    per_layer = (
        2 * d * 3 * hd * klen / tgt_len  # q, k, v over memory and segment (q is then cut to the segment)
        + 3 * 2 * klen * hd  # content scores, position scores, weighted sum of values
        + 2 * hd * d  # output projection
        + 2 * 2 * d * ff.net[0].out_features  # feed-forward
    )
    relative_embeddings = 2 * d * hd * klen / (batch_size * tgt_len)  # once per batch, not per sequence
    embed = sum(2 * proj.in_features * d for proj in model.embed.projs if isinstance(proj, nn.Linear))
    output = model.softmax.forward_flops(targets)
    n_layer = len(model.layers)
    return 3 * (n_layer * per_layer + embed + output) + 2 * n_layer * relative_embeddings
