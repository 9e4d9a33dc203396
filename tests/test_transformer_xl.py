"""Transformer-XL: the relative shift, the carried memory, learning, and the analytic FLOPs."""

from __future__ import annotations

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from src.models.base import count_training_flops
from src.models.language import RecurrentLoss, zipf_tokens
from src.models.transformer_xl import TransformerXL, rel_shift, training_flops_per_token

VOCAB, CUTOFFS = 300, [20, 40, 100]


def tiny_txl(mem_len=8, div_val=1, d_model=32, cutoffs=CUTOFFS) -> TransformerXL:
    torch.manual_seed(0)
    return TransformerXL(
        vocab_size=VOCAB,
        cutoffs=cutoffs,
        div_val=div_val,
        n_layer=2,
        d_model=d_model,
        n_head=2,
        d_head=8,
        d_inner=64,
        mem_len=mem_len,
        dropout=0.0,
        dropatt=0.0,
    )


def test_rel_shift_matches_naive_relative_scores():
    """Position scores computed against every relative distance, then shifted, equal the scores
    computed directly for each (query, key) pair from its distance."""
    torch.manual_seed(0)
    batch, heads, qlen, mlen, d = 2, 3, 5, 4, 6
    klen = qlen + mlen
    q = torch.randn(batch, heads, qlen, d)
    r = torch.randn(heads, klen, d)  # row c: the embedding of distance klen - 1 - c
    shifted = rel_shift(q @ r.transpose(1, 2))
    for i in range(qlen):
        for j in range(klen):
            distance = mlen + i - j  # query i sits at absolute position mlen + i
            if distance < 0:
                continue  # a future key: masked in attention
            naive = (q[:, :, i] * r[:, klen - 1 - distance]).sum(-1)
            torch.testing.assert_close(shifted[:, :, i, j], naive)


def segment(seed: int, batch=2, qlen=6) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    stream = torch.randint(0, VOCAB, (batch, qlen + 1), generator=generator)
    return stream[:, :-1], stream[:, 1:]


def test_memory_carries_the_previous_segment():
    model = tiny_txl(mem_len=8).eval()
    second = segment(3)
    with torch.no_grad():
        alone, _ = model(*second)
        _, mems_a = model(*segment(1))
        after_a, _ = model(*second, mems_a)
        _, mems_b = model(*segment(2))
        after_b, _ = model(*second, mems_b)
    assert not torch.allclose(after_a, after_b)  # depends on which tokens came before
    assert not torch.allclose(after_a, alone)


def test_recurrent_loss_keeps_a_detached_memory_of_mem_len_states():
    model = tiny_txl(mem_len=8)
    loss_fn = RecurrentLoss()
    batch = segment(1, qlen=6)
    loss_fn(model, batch).backward()
    assert [m.shape for m in loss_fn.mems] == [(2, 6, 32)] * 2  # only one segment seen so far
    loss_fn(model, batch).backward()  # a second backward would fail if the memory kept its graph
    assert [m.shape for m in loss_fn.mems] == [(2, 8, 32)] * 2  # capped at mem_len
    assert not any(m.requires_grad for m in loss_fn.mems)


def test_loss_goes_down_on_a_learnable_sequence():
    model = tiny_txl(mem_len=8)
    pattern = torch.tensor([3, 17, 42, 5, 250, 99, 1, 120])
    stream = pattern.repeat(2, 3)[:, :17]  # periodic text: every next token is predictable
    batch = (stream[:, :-1], stream[:, 1:])
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    loss_fn = RecurrentLoss()
    losses = []
    for _ in range(20):
        loss = loss_fn(model, batch)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert losses[-1] < 0.2 * losses[0], losses


@pytest.mark.parametrize(("div_val", "cutoffs"), [(1, CUTOFFS), (4, CUTOFFS), (1, [])])
def test_analytic_flops_match_the_flop_counter(div_val, cutoffs):
    # cluster widths 64, 16, 4, 1 at div_val 4; no cutoffs: a full softmax
    model = tiny_txl(mem_len=8, div_val=div_val, d_model=64, cutoffs=cutoffs)
    stream = zipf_tokens(VOCAB, (3, 9), "cpu")
    batch = (stream[:, :-1], stream[:, 1:])
    loss_fn = RecurrentLoss()
    loss_fn(model, batch)  # fill the memory: the analytic count assumes a full one
    with sdpa_kernel(SDPBackend.MATH):  # attention as plain matrix products, all counted
        counted = count_training_flops(model, loss_fn, batch) / batch[1].numel()
    assert training_flops_per_token(model, 3, 8, batch[1]) == pytest.approx(counted, rel=1e-6)


def test_without_cutoffs_the_loss_is_a_full_softmax_tied_to_the_embedding():
    model = tiny_txl(cutoffs=[]).eval()
    tokens, targets = segment(1)
    hidden = {}
    model.layers[-1].register_forward_hook(lambda _module, _args, out: hidden.update(h=out))
    with torch.no_grad():
        loss, _ = model(tokens, targets)
    table = model.embed.tables[0].weight
    logits = hidden["h"].reshape(-1, 32) @ table.T + model.softmax.bias
    torch.testing.assert_close(loss, torch.nn.functional.cross_entropy(logits, targets.reshape(-1)))
    assert model.softmax.weight is table
    assert len(model.embed.tables) == 1 and table.shape == (VOCAB, 32)


def test_zipf_tokens_fill_the_head_cluster_like_text():
    tokens = zipf_tokens(267_735, (64, 512), "cpu")
    head_share = (tokens < 19_997).float().mean().item()
    assert 0.75 < head_share < 0.85  # Zipf over WikiText-103's vocabulary: about 80% in the head


@pytest.mark.parametrize("cutoffs", [CUTOFFS, []])
def test_trains_under_bf16_autocast_on_the_cpu(cutoffs):
    model = tiny_txl(mem_len=8, cutoffs=cutoffs)
    loss_fn = RecurrentLoss()
    for _ in range(2):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = loss_fn(model, segment(1))
        loss.backward()
    assert torch.isfinite(loss)
