"""Model builders. Each is `builder(cfg: dict, batch_size: int, device) -> Workload`, named by the
model config's `_target_` (Hydra's convention: "package.module.function").

This package imports nothing heavy: the job process checks `_target_` without torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from src.models.base import Workload


def build_workload(model_cfg: dict, batch_size: int, device) -> Workload:
    """Call the model's builder. Called directly, not through hydra.utils.instantiate: that wraps
    whatever the builder raises (an out-of-memory error becomes InstantiationException, which the
    batch search must see as what it is), and importing it costs every rank half a second."""
    module, _, function = model_cfg["_target_"].rpartition(".")
    builder = getattr(importlib.import_module(module), function)
    return builder(model_cfg, batch_size, device)


__all__ = ["build_workload"]
