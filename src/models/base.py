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
    lr: float | None = None  # None: the optimizer's usual rate below
    clip_grad_norm: float | None = None  # gradients rescaled to at most this total norm; None: not

    def make_optimizer(self, fused: bool | None = None) -> torch.optim.Optimizer:
        """`fused`: None for fused kernels where the parameters are on a GPU (a CPU counting a GPU's
        step asks for them too)."""
        params = [p for p in self.model.parameters() if p.requires_grad]
        # Fused kernels on a GPU, as a tuned training script uses them. They also take the gradient
        # scaler's inf check on the device: an unfused step makes GradScaler wait for the host.
        fused = fused or all(p.is_cuda for p in params) or None
        if self.optimizer == "sgd":
            return momentum_sgd(params, lr=self.lr or 0.01, fused=fused)
        if self.optimizer == "adamw":
            return torch.optim.AdamW(params, lr=self.lr or 1e-4, weight_decay=0.01, fused=fused)
        raise ValueError(f"optimizer={self.optimizer!r}: must be sgd or adamw")


def momentum_sgd(params: list[nn.Parameter], lr: float, fused: bool | None) -> torch.optim.SGD:
    """SGD with momentum 0.9 and weight decay 1e-4, its momentum buffers created up front as zeros.

    torch's fused SGD creates them uninitialised on its first step and fills them in its kernel,
    which GradScaler skips when that step overflows (usual at fp16's initial scale): the garbage
    then reaches the weights as NaN (seen with torch 2.11 on an H200). From zero, the first step
    is the same as from a lazily created buffer: 0.9 * 0 + grad.
    """
    optimizer = torch.optim.SGD(params, lr=lr, momentum=0.9, weight_decay=1e-4, fused=fused)
    for p in params:
        optimizer.state[p]["momentum_buffer"] = torch.zeros_like(p)
    return optimizer


def count_training_flops(model: nn.Module, loss_fn, batch) -> float:
    """FLOPs of one forward+backward pass, counted once by torch's flop counter."""
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    # no cuDNN autotuning for this small batch's shapes: training never sees them again
    autotuning, torch.backends.cudnn.benchmark = torch.backends.cudnn.benchmark, False
    try:
        with counter:
            loss_fn(model, batch).backward()
    finally:
        torch.backends.cudnn.benchmark = autotuning
    model.zero_grad(set_to_none=True)
    return float(counter.get_total_flops())


_NOT_SIZES = ("batch_size", "batch_sizes", "smoke")
_counted_per_item: dict[tuple, float] = {}


def counted_flops_per_item(cfg: dict, model: nn.Module, loss_fn, batch, items: int) -> float:
    """Training FLOPs per item, counted on a small `batch` of `items` items, cached per model size.

    Counted once per process for each configuration: model.batch_size=auto builds the workload
    several times. The counter sees matrix products and convolutions (what MFU is about), not
    element-wise work. A small batch keeps the count cheap and within memory whatever the precision.
    """
    key = tuple(sorted((k, repr(v)) for k, v in cfg.items() if k not in _NOT_SIZES))
    if key not in _counted_per_item:
        _counted_per_item[key] = count_training_flops(model, loss_fn, batch) / items
    return _counted_per_item[key]
