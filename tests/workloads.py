"""Test-only builders (`model._target_=tests.workloads.by_name model.name=NAME`): a tiny model, and
models that fail the way real jobs do. Not collected by pytest (no test_ prefix).

- tiny: a two-layer MLP, the cheapest job that still trains.
- oom: raises torch.OutOfMemoryError in its first step, as a too-large batch does on a GPU.
- broken: raises a RuntimeError in its first step, as a bug in a model does.
- diverge: its loss is inf from the first step.
- hang: writes its pid to $GPUBENCH_TEST_PIDS/rank<N>.pid, then never finishes a step.
- gated: writes $GPUBENCH_TEST_GATE.started, then waits for the file $GPUBENCH_TEST_GATE.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from src.models.base import Workload


def _mse(model: nn.Module, batch) -> torch.Tensor:
    inputs, targets = batch
    return F.mse_loss(model(inputs), targets)


def _oom(model: nn.Module, batch) -> torch.Tensor:
    raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 80.00 GiB (simulated)")


def _broken(model: nn.Module, batch) -> torch.Tensor:
    raise RuntimeError("broken on purpose: this model fails in its first step")


def _inf(model: nn.Module, batch) -> torch.Tensor:
    return _mse(model, batch) * float("inf")


def _hang(model: nn.Module, batch) -> torch.Tensor:
    folder = Path(os.environ["GPUBENCH_TEST_PIDS"])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"rank{os.environ.get('RANK', '0')}.pid").write_text(str(os.getpid()))
    while True:
        time.sleep(1)


LOSSES = {"tiny": _mse, "gated": _mse, "oom": _oom, "broken": _broken, "diverge": _inf, "hang": _hang}


def by_name(cfg: dict, batch_size: int, device) -> Workload:
    if cfg["name"] == "gated":
        gate = Path(os.environ["GPUBENCH_TEST_GATE"])
        gate.with_suffix(".started").touch()
        while not gate.exists():
            time.sleep(0.1)
    model = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 4)).to(device)
    batch = (torch.randn(batch_size, 16, device=device), torch.randn(batch_size, 4, device=device))
    return Workload(
        model=model,
        batch=batch,
        loss_fn=LOSSES[cfg["name"]],
        items_per_step=batch_size * cfg["items_per_sample"],
        optimizer="sgd",
        flops_per_item=None,
    )
