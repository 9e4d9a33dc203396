"""Model builders. Each is `builder(cfg: dict, batch_size: int, device) -> Workload`."""

import importlib

from src.models.base import Workload


def build_workload(model_cfg: dict, batch_size: int, device) -> Workload:
    module, _, func = model_cfg["builder"].partition(":")
    builder = getattr(importlib.import_module(module), func)
    return builder(model_cfg, batch_size, device)


__all__ = ["Workload", "build_workload"]
