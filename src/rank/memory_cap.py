"""gpu.memory_limit_gb in the rank: the caching allocator's per-process cap, set before anything
is built, so the model, the batch search (model.batch_size=auto) and the timed window all live
within the memory of the card it stands in for.

The cap bounds what PyTorch's allocator may hold; the CUDA context (a few hundred MB) lies outside
it, as it does not on a real card of that size, which also gives the context its share.
"""

from __future__ import annotations

import torch

GIB = 2**30  # cards are sold by GB that are GiB: a "24 GB" RTX 3090 holds 24 GiB


def cap_fraction(cap_gb: float, total_bytes: int) -> float:
    """The share of the device that `cap_gb` is; 1.0 (the whole card) where the spec sheet's
    rounded figure is a little above what the device reports."""
    return min(1.0, cap_gb * GIB / total_bytes)


def apply_memory_cap(cap_gb: float | None, device: torch.device) -> None:
    if cap_gb is None or device.type != "cuda":  # the config refuses a cap on a CPU
        return
    total = torch.cuda.get_device_properties(device).total_memory
    torch.cuda.set_per_process_memory_fraction(cap_fraction(cap_gb, total), device)


def cap_note(cfg: dict) -> str:
    """' under gpu.memory_limit_gb=24' for the one-line errors of a capped rank, else ''."""
    cap = cfg.get("gpu", {}).get("memory_limit_gb")
    return f" under gpu.memory_limit_gb={cap:g}" if cap is not None else ""
