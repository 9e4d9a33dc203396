"""The card's own ceilings, measured in a rank: dense matmul per math, memory and host bandwidth, and
all-reduce bus bandwidth across the job's ranks.

`model=ceilings` runs this instead of a training loop (src/rank/worker.py); the job process logs
the figures (src/run/ceiling_figures.py). Every figure is the median of `samples` timed samples, each a
block of calls sized to about `sample_s`, with its 95% CI; matmul is the best shape of a grid
(src/rank/matmul.py). benchmarks/ceilings_plain.py measures memory and host bandwidth in plain
PyTorch to check this one; benchmarks/peers.py holds the matmul figure against mamf-finder.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable

import torch
import torch.distributed as dist

from src.rank.collectives import agreed_int
from src.rank.matmul import best_matmul
from src.results import recorded
from src.results.reports import CeilingsReport
from src.results.stats import relative_ci_halfwidth


def maths(device: torch.device) -> list[str]:
    """The matmul maths the device has: TF32 and bf16 from Ampere on, fp8 from Ada/Hopper on
    (torch._scaled_mm). The CPU: fp32 and bf16."""
    if device.type != "cuda":
        return ["fp32", "bf16"]
    capability = torch.cuda.get_device_capability(device)
    found = ["fp32", "tf32", "fp16", "bf16"] if capability >= (8, 0) else ["fp32", "fp16"]
    if capability >= (8, 9) and hasattr(torch, "_scaled_mm"):
        found.append("fp8")
    return found


def time_samples(
    fn: Callable[[], object], device: torch.device, sample_s: float, samples: int
) -> list[float]:
    """Seconds per call of `fn`, one figure per sample. One call first, untimed (kernel selection,
    allocation), then one more timed to size the blocks: each sample times back-to-back calls for
    about `sample_s`, with CUDA events on a GPU (one sync per sample)."""
    fn()
    sync(device)
    start = time.perf_counter()
    fn()
    sync(device)
    calls = max(1, math.ceil(sample_s / max(time.perf_counter() - start, 1e-9)))
    figures = []
    for _ in range(samples):
        if device.type == "cuda":
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            for _ in range(calls):
                fn()
            end.record()
            end.synchronize()
            figures.append(begin.elapsed_time(end) / 1e3 / calls)
        else:
            begin_s = time.perf_counter()
            for _ in range(calls):
                fn()
            figures.append((time.perf_counter() - begin_s) / calls)
    return figures


def figure(samples_s: list[float], work: float, unit_scale: float, **detail) -> dict:
    """A rate (work per second / unit_scale) from per-call times: median, range and 95% CI."""
    rates = [work / t / unit_scale for t in samples_s]
    return {
        "value": statistics.median(rates),
        "min": min(rates),
        "max": max(rates),
        "ci95_rel": relative_ci_halfwidth(rates),
        "samples": len(rates),
        **detail,
    }


def memory_figures(cfg: dict, device: torch.device) -> dict[str, dict]:
    """Device-memory copy (read + write: twice the buffer's bytes per call) and read (a sum); on a
    GPU also pinned host-to-device and device-to-host copies."""
    size = int(cfg["memory_mb"] * 2**20)
    figures = _device_memory(size, cfg, device)
    if device.type == "cuda":
        torch.cuda.empty_cache()
        figures |= _host_copies(int(cfg["host_mb"] * 2**20), cfg, device)
    return figures


def _device_memory(size: int, cfg: dict, device: torch.device) -> dict[str, dict]:
    source = torch.ones(size // 4, device=device)
    target = torch.empty_like(source)
    copy = time_samples(lambda: target.copy_(source), device, cfg["sample_s"], cfg["samples"])
    read = time_samples(lambda: source.sum(), device, cfg["sample_s"], cfg["samples"])
    return {
        recorded.MEMORY_COPY_GBS: figure(copy, 2.0 * size, 1e9, bytes=size),
        recorded.MEMORY_READ_GBS: figure(read, float(size), 1e9, bytes=size),
    }


def _host_copies(size: int, cfg: dict, device: torch.device) -> dict[str, dict]:
    host = torch.empty(size, dtype=torch.uint8, pin_memory=True)
    on_device = torch.empty(size, dtype=torch.uint8, device=device)
    up = time_samples(
        lambda: on_device.copy_(host, non_blocking=True), device, cfg["sample_s"], cfg["samples"]
    )
    down = time_samples(
        lambda: host.copy_(on_device, non_blocking=True), device, cfg["sample_s"], cfg["samples"]
    )
    return {
        recorded.HOST_TO_DEVICE_GBS: figure(up, float(size), 1e9, bytes=size),
        recorded.DEVICE_TO_HOST_GBS: figure(down, float(size), 1e9, bytes=size),
    }


def bus_bandwidth_factor(world: int) -> float:
    """nccl-tests' all-reduce bus bandwidth over algorithm bandwidth: 2(n-1)/n."""
    return 2.0 * (world - 1) / world


def allreduce_figures(cfg: dict, device: torch.device, world: int) -> dict[str, dict]:
    """All-reduce (sum, fp32) bus bandwidth per message size, as nccl-tests defines it:
    algbw = bytes / time, busbw = algbw * 2(n-1)/n. Every rank runs the same calls in step."""
    figures = {}
    for mb in cfg["allreduce_mb"]:
        size = int(mb * 2**20) // 4 * 4
        tensor = torch.ones(size // 4, device=device)
        dist.barrier()
        samples = _agreed_samples(lambda t=tensor: dist.all_reduce(t), device, cfg)
        figures[f"{recorded.ALLREDUCE_BUSBW_GBS}_{_mb_label(mb)}"] = figure(
            samples, size * bus_bandwidth_factor(world), 1e9, bytes=size, world=world
        )
        del tensor
    return figures


def _agreed_samples(fn, device: torch.device, cfg: dict) -> list[float]:
    """time_samples for a collective: every rank must make the same number of calls, so the block
    size is agreed (the largest any rank asks for) before timing."""
    fn()
    sync(device)
    start = time.perf_counter()
    fn()
    sync(device)
    calls = max(1, math.ceil(cfg["sample_s"] / max(time.perf_counter() - start, 1e-9)))
    block = agreed_int(calls, device, dist.get_world_size(), op=dist.ReduceOp.MAX)
    figures = []
    for _ in range(cfg["samples"]):
        sync(device)
        begin = time.perf_counter()
        for _ in range(block):
            fn()
        sync(device)
        figures.append((time.perf_counter() - begin) / block)
    return figures


def _mb_label(mb: float) -> str:
    return f"{mb:g}mb".replace(".", "p")


def measure(cfg: dict, device: torch.device, world: int) -> dict[str, dict]:
    """Every ceiling of this rank's device (and, across ranks, the all-reduce), by metric name."""
    model = cfg["model"]
    figures = {recorded.matmul_figure(m): best_matmul(m, model, device) for m in maths(device)}
    figures |= memory_figures(model, device)
    if world > 1:
        figures |= allreduce_figures(model, device, world)
    return figures


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def rank_report(cfg: dict, device: torch.device, world: int, rank: int, started: float) -> CeilingsReport:
    """What a ceilings rank returns: its figures, and the marks and versions every report has."""
    from src.hardware.environment import communication_settings, runtime_versions

    window_start = time.time()
    figures = measure(cfg, device, world)
    return CeilingsReport(
        rank=rank,
        world_size=world,
        figures=figures,
        device_name=torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        runtime_versions=runtime_versions(),
        rank_started=started,
        window_start=window_start,
        window_end=time.time(),
        communication=communication_settings(),
    )
