"""Agreement between the job's ranks: on a number, and on when the measured window stops. Every
rank must make the same calls, or the next collective hangs."""

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


STOP_REASONS = ("ci", "max_steps", "time_limit")  # where ranks differ, the later one is the job's


class StopAgreement:
    """Every rank must stop at the same step, or DDP's next all-reduce hangs: all take one reason.

    Across GPUs the proposal's all-reduce is queued behind the step in flight and settled only
    once the next step is queued too (`lag` 1), so agreeing never leaves a device idle. One rank,
    or ranks on CPUs (no queue to keep), settle at once.
    """

    def __init__(self, world: int, device: torch.device):
        self.world, self.device = world, device
        self.lag = int(world > 1 and device.type == "cuda")
        self.pending = None  # (the agreed code, readable once the event `ready`, if any, has passed)

    def propose(self, reason: str | None) -> None:
        code = STOP_REASONS.index(reason) + 1 if reason else 0
        if self.world == 1:
            self.pending = (code, None)
            return
        flag = torch.full((1,), code, dtype=torch.int32, device=self.device)  # a kernel, not a copy
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        if not self.lag:
            self.pending = (flag, None)
            return
        host = torch.empty(1, dtype=torch.int32, pin_memory=True)
        host.copy_(flag, non_blocking=True)
        ready = torch.cuda.Event()
        ready.record()
        self.pending = (host, ready)

    def settle(self) -> str | None:
        """The reason all ranks agreed on in the last proposal (None: go on, or nothing proposed)."""
        if self.pending is None:
            return None
        agreed, ready = self.pending
        self.pending = None
        if ready is not None:
            ready.synchronize()
        code = int(agreed)  # an int, or a one-element tensor
        return STOP_REASONS[code - 1] if code else None
