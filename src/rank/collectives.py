"""Agreement between the job's ranks on a number: every rank must make the same calls, or the
next collective hangs."""

from __future__ import annotations

import torch
import torch.distributed as dist


def agreed_int(value: int, device: torch.device, world: int, op=dist.ReduceOp.MIN) -> int:
    """The one value every rank takes: the smallest any rank holds (op MAX: the largest)."""
    if world == 1:
        return value
    held = torch.tensor([value], device=device)
    dist.all_reduce(held, op=op)
    return int(held.item())
