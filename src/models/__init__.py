"""Model builders. Each is `builder(cfg: dict, batch_size: int, device) -> Workload`.

This package imports nothing heavy: the job process validates builder names without torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from src.models.base import Workload


def build_workload(model_cfg: dict, batch_size: int, device) -> Workload:
    module, _, func = model_cfg["builder"].partition(":")
    builder = getattr(importlib.import_module(module), func)
    return builder(model_cfg, batch_size, device)


__all__ = ["build_workload"]
