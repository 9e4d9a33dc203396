"""Causal language models from transformers, built from config with random weights."""

from __future__ import annotations

import torch
from torch import nn

from src.models.base import Workload


def _causal_lm_loss(model: nn.Module, batch) -> torch.Tensor:
    return model(input_ids=batch, labels=batch).loss


def causal_lm_workload(model: nn.Module, cfg: dict, batch_size: int, device) -> Workload:
    tokens = torch.randint(0, cfg["vocab_size"], (batch_size, cfg["seq_len"]), device=device)
    n_params = sum(p.numel() for p in model.parameters())
    # 6 FLOPs per parameter per token (forward + backward) plus attention scores and values
    # (Kaplan et al. 2020, "Scaling Laws for Neural Language Models", table 1).
    attention = 6 * cfg["n_layer"] * cfg["seq_len"] * cfg["d_model"]
    return Workload(
        model=model,
        batch=tokens,
        loss_fn=_causal_lm_loss,
        items_per_step=batch_size * cfg["items_per_sample"],
        optimizer="adamw",
        flops_per_item=cfg.get("flops_per_item") or float(6 * n_params + attention),
    )


def gpt2(cfg: dict, batch_size: int, device) -> Workload:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=cfg["vocab_size"],
        n_positions=cfg["seq_len"],
        n_embd=cfg["d_model"],
        n_layer=cfg["n_layer"],
        n_head=cfg["n_head"],
        attn_implementation="sdpa",
    )
    model = GPT2LMHeadModel(config).to(device)
    return causal_lm_workload(model, cfg, batch_size, device)
