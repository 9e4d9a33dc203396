"""The math a precision config asks for: TF32 switches, autocast and gradient scaling."""

from __future__ import annotations

import contextlib

import torch


class PrecisionContext:
    def __init__(self, cfg: dict, device: torch.device):
        self.device = device
        self.dtype = getattr(torch, cfg["autocast_dtype"]) if cfg["autocast_dtype"] else None
        if device.type == "cuda":
            # Set both switches explicitly: fp32 must really be IEEE fp32 whatever the defaults.
            torch.backends.cuda.matmul.allow_tf32 = cfg["allow_tf32"]
            torch.backends.cudnn.allow_tf32 = cfg["allow_tf32"]
        torch.set_float32_matmul_precision("high" if cfg["allow_tf32"] else "highest")
        self.scaler = torch.amp.GradScaler(device.type, enabled=cfg["grad_scaling"])

    def autocast(self):
        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.dtype)

    def backward_and_step(
        self, loss: torch.Tensor, optimizer: torch.optim.Optimizer, clip_grad_norm: float | None = None
    ) -> None:
        self.scaler.scale(loss).backward()
        if clip_grad_norm is not None:
            # on the true gradients: unscaled first (a step the scaler skips stays skipped)
            self.scaler.unscale_(optimizer)
            params = [p for group in optimizer.param_groups for p in group["params"]]
            torch.nn.utils.clip_grad_norm_(params, clip_grad_norm)  # no host sync: stays on the device
        self.scaler.step(optimizer)
        self.scaler.update()
        optimizer.zero_grad(set_to_none=True)

    def describe(self) -> dict:
        """The math that actually ran, read back from torch rather than from the config."""
        return {
            "autocast_dtype": str(self.dtype).replace("torch.", "") if self.dtype else "none",
            "grad_scaling": self.scaler.is_enabled(),
            "matmul_tf32": torch.backends.cuda.matmul.allow_tf32,
            "cudnn_tf32": torch.backends.cudnn.allow_tf32,
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
        }
