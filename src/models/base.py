"""What a rank needs from a model: the module, a synthetic batch on the device, and a loss."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn


@dataclass
class Workload:
    model: nn.Module
    batch: Any  # built once, resident on the device: the timed loop never touches the host
    loss_fn: Callable[[nn.Module, Any], torch.Tensor]  # may keep state between steps (TXL memory)
    items_per_step: int  # items one rank processes per step, in the model's unit
    optimizer: str  # "sgd" (vision) or "adamw" (language)
    flops_per_item: float | None = None  # training FLOPs (forward + backward) per item

    def make_optimizer(self) -> torch.optim.Optimizer:
        params = [p for p in self.model.parameters() if p.requires_grad]
        if self.optimizer == "sgd":
            return torch.optim.SGD(params, lr=0.01, momentum=0.9, weight_decay=1e-4)
        if self.optimizer == "adamw":
            # fused kernels where the device has them: what a tuned training script uses
            fused = all(p.is_cuda for p in params)
            return torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01, fused=fused or None)
        raise ValueError(f"optimizer={self.optimizer!r}: must be sgd or adamw")


def count_training_flops(model: nn.Module, loss_fn, batch) -> float:
    """FLOPs of one forward+backward pass, counted once by torch's flop counter."""
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        loss_fn(model, batch).backward()
    model.zero_grad(set_to_none=True)
    return float(counter.get_total_flops())
