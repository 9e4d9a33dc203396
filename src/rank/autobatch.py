"""model.batch_size=auto: the largest per-GPU batch that trains without running out of memory.

Searched in the rank's own process before anything is timed: each candidate builds the workload
afresh and trains a few real steps (optimizer state and, for Transformer-XL, a full memory
included); memory is released between tries. Doubling from STEP finds a batch that fails, then
bisection narrows down to a multiple of STEP (of 1 when even STEP does not fit). Ranks search
independently and agree on the smallest result. The search runs eager: a compiled model may fit
a slightly different batch.
"""

from __future__ import annotations

import gc
from collections.abc import Callable

import torch

from src.rank.collectives import agreed_int

STEP = 8  # batch sizes are multiples of this (of 1 where it is too coarse)
MAX_BATCH = 4096  # a model that fits this many per GPU is not worth searching further
TRIAL_STEPS = 3  # step 1 allocates the optimizer state, step 2 fills TXL's memory, 3 confirms


class NothingFits(RuntimeError):
    """Not even a batch of 1 trains in the memory the rank has."""


def largest_fitting(fits: Callable[[int], bool], step: int = STEP, cap: int = MAX_BATCH) -> int:
    """The largest multiple of `step` up to `cap` for which `fits` holds, assuming that it holds
    for every smaller batch; falls back to steps of 1 below `step`. Raises if 1 does not fit."""
    # Counted in units of `step`: `good` fits (0: none found yet), `bad` does not or is past the cap.
    good, bad, units = 0, cap // step + 1, 1
    while units < bad:
        if not fits(units * step):
            bad = units
            break
        good, units = units, units * 2
    if good == 0:
        if step == 1:
            raise NothingFits("model.batch_size=auto: even a batch of 1 runs out of memory")
        return largest_fitting(fits, step=1, cap=step - 1)
    while bad - good > 1:
        middle = (good + bad) // 2
        if fits(middle * step):
            good = middle
        else:
            bad = middle
    return good * step


def is_out_of_memory(exc: BaseException) -> bool:
    """CUDA's allocator raises OutOfMemoryError; cuBLAS and cuDNN report failed workspaces as
    RuntimeErrors that name the allocation."""
    if isinstance(exc, torch.OutOfMemoryError):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and any(
        marker in text for marker in ("out of memory", "CUBLAS_STATUS_ALLOC_FAILED", "NOT_ENOUGH_WORKSPACE")
    )


def trains(batch_size: int, model_cfg: dict, precision, device: torch.device, ddp: bool = False) -> bool:
    """Whether `batch_size` trains TRIAL_STEPS steps. With `ddp`, a gradient-sized block stays
    allocated meanwhile: DistributedDataParallel's bucket copy of the gradients."""
    try:
        _train_a_few_steps(batch_size, model_cfg, precision, device, ddp)
        fitted = True
    except Exception as exc:
        if not is_out_of_memory(exc):
            raise
        fitted = False
    release(device)  # outside the handler: the traceback no longer holds the failed try's tensors
    return fitted


def release(device: torch.device) -> None:
    """Give back what a dropped workload held, so the next try starts from an empty allocator."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def smaller(batch_size: int) -> int:
    """The next batch down after `batch_size` ran out of memory: STEP less, or 1 less below it."""
    return batch_size - STEP if batch_size > STEP else max(1, batch_size - 1)


def _train_a_few_steps(batch_size, model_cfg, precision, device, ddp) -> None:
    from src.models import build_workload

    workload = build_workload(model_cfg, batch_size, device)
    params = [p for p in workload.model.parameters() if p.requires_grad]
    buckets = sum(p.numel() * p.element_size() for p in params) if ddp else 0
    held = torch.empty(buckets, dtype=torch.uint8, device=device)
    workload.model.train()
    optimizer = workload.make_optimizer()
    for _ in range(TRIAL_STEPS):
        with precision.autocast():
            loss = workload.loss_fn(workload.model, workload.batch)
        precision.backward_and_step(loss, optimizer, workload.clip_grad_norm)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    del held


def find_batch_size(model_cfg: dict, precision, device: torch.device, world: int, cap_note: str = "") -> int:
    """The per-GPU batch for model.batch_size=auto, the same on every rank. `cap_note` names the
    memory cap the rank runs under, for the one line that says the model does not fit it."""
    if device.type != "cuda":
        raise ValueError("model.batch_size=auto needs a CUDA device: it searches for the out-of-memory limit")
    fits = lambda b: trains(b, model_cfg, precision, device, ddp=world > 1)  # noqa: E731
    try:
        found = largest_fitting(fits)
    except NothingFits as exc:
        if not cap_note:
            raise
        raise NothingFits(
            f"{exc}{cap_note}: model={model_cfg['name']} needs more memory than that to start; "
            "raise gpu.memory_limit_gb"
        ) from None
    return agreed_int(found, device, world)
