"""The gpu group: which devices a job runs on, their spec sheet and per-model batch sizes
(conf/gpu/: a profile per card, `auto` for whatever the host has, `cpu`)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING, DictConfig

from src.config.checks import Errors, positive_int, positive_or_none
from src.config.groups.precision import PRECISIONS, check_batch_table

PEAK_MATHS = ("fp32", "tf32", "fp16", "bf16")  # the keys of peak_tflops a precision's matmuls run at


@dataclass
class SlurmRequest:
    """What `hydra/launcher=slurm` asks Slurm for, for one job of this profile (GPUs per node)."""

    # Slurm sites name their GPU types their own way: override per site, e.g. gpu:rtx_a6000:${gpu.count}
    gres: str | None = "gpu:${gpu.name}:${gpu.count}"
    constraint: str | None = None  # a node feature, for sites that select GPU types that way
    time_limit_min: int = 60  # the job's wall-clock limit (Slurm's --time)


# The spec sheet's single figures (peak_tflops is a table of them); each states its source in `sources`
SPEC_FIGURES = (
    "memory_gb",
    "memory_bandwidth_gbs",
    "tdp_w",
    "price_usd",
    "sm_count",
    "boost_clock_mhz",
    "l2_cache_mb",
    "host_link_gbs",
    "gpu_link_gbs",
)


@dataclass
class Measured:
    """A published measurement of the card: the figure, where it is published (a source a reader can
    open), when, and how it was measured."""

    value: float = MISSING
    source: str = MISSING
    date: str = MISSING
    method: str = MISSING


@dataclass
class MeasuredCeilings:
    """What the card sustains, as measured and published: a projection onto it uses these before
    its spec sheet (docs/projection.md)."""

    matmul_tflops: dict[str, Measured] = field(default_factory=dict)  # per math: dense, fp32 accumulate
    memory_bandwidth_gbs: Measured | None = None  # device memory copied, read + written


@dataclass
class GpuConfig:
    name: str = MISSING
    device: str = "cuda"  # cuda | cpu | auto (whatever the host has)
    match: list[str] = field(default_factory=list)  # substrings of the NVML device name (any one)
    exclude: list[str] = field(default_factory=list)  # substrings that rule a name out (e.g. "Ti")
    count: int = 1
    precisions: list[str] = field(default_factory=lambda: list(PRECISIONS))
    default_precision: str = "amp"  # what precision=auto (a single job's default) runs here
    memory_gb: float | None = None
    # GB (GiB) of device memory each rank may allocate (the allocator's per-process cap), so a large
    # card stands in for the capacity, not the speed, of a smaller one; null: the whole card
    memory_limit_gb: float | None = None
    # dense TFLOP/s per math (no sparsity): fp32 on the CUDA cores, tf32/fp16/bf16 on the tensor
    # cores with fp32 accumulate, at the rate this card runs it (GeForce halves it)
    peak_tflops: dict[str, float] = field(default_factory=dict)
    memory_bandwidth_gbs: float | None = None
    tdp_w: float | None = None  # the board's power limit as shipped
    price_usd: float | None = None
    interconnect: str | None = None  # the links in words; the two below are their figures
    sm_count: int | None = None
    boost_clock_mhz: float | None = None
    l2_cache_mb: float | None = None
    host_link_gbs: float | None = None  # to the host (PCIe), GB/s each way
    gpu_link_gbs: float | None = None  # between the GPUs of one system (NVLink, else PCIe), GB/s each way
    sources: dict[str, str] = field(default_factory=dict)  # figure name -> where it is published
    measured: MeasuredCeilings = field(default_factory=MeasuredCeilings)
    # model name -> precision -> per-GPU batch size, for cards whose memory needs another size
    batch_sizes: dict[str, dict[str, int]] = field(default_factory=dict)
    slurm: SlurmRequest = field(default_factory=SlurmRequest)


def check(cfg: DictConfig, errors: Errors) -> None:
    g, precision = cfg.gpu, cfg.precision.name
    errors.need(g.device in ("cuda", "cpu", "auto"), "gpu.device", g.device, "one of cuda, cpu, auto")
    errors.need(positive_int(g.count), "gpu.count", g.count, "a positive integer")
    limit = g.slurm.time_limit_min
    errors.need(positive_int(limit), "gpu.slurm.time_limit_min", limit, "a positive integer (minutes)")
    if g.device == "cpu" and positive_int(g.count):
        cores = os.cpu_count() or 1
        errors.need(g.count <= cores, "gpu.count", g.count, f"at most {cores} (the CPU cores of this host)")
    if g.device == "cuda":
        errors.need(
            bool(g.match),
            "gpu.match",
            list(g.match),
            f"a non-empty list of NVML device-name substrings for cuda profile {g.name}",
        )
    unknown = [p for p in g.precisions if p not in PRECISIONS]
    errors.need(
        not unknown, "gpu.precisions", list(g.precisions), f"a list drawn from {', '.join(PRECISIONS)}"
    )
    errors.need(
        g.default_precision in g.precisions,
        "gpu.default_precision",
        g.default_precision,
        f"one of gpu.precisions ({', '.join(g.precisions)}) on gpu={g.name}",
    )
    errors.need(
        precision in g.precisions,
        "precision",
        precision,
        f"one of {', '.join(g.precisions)} on gpu={g.name}",
    )
    for key in SPEC_FIGURES:
        errors.need(positive_or_none(g[key]), f"gpu.{key}", g[key], "a positive number or null")
    check_memory_cap(g.memory_limit_gb, g.memory_gb, g.device, f"gpu={g.name} (gpu.memory_gb)", errors)
    for key, value in g.peak_tflops.items():
        errors.need(positive_or_none(value), f"gpu.peak_tflops.{key}", value, "a positive number")
    check_measured(g.measured, errors)
    for model, table in g.batch_sizes.items():
        check_batch_table(table, f"gpu.batch_sizes.{model}", errors)


def check_memory_cap(cap: Any, card_gb: float | None, device: str, card: str, errors: Errors) -> None:
    """gpu.memory_limit_gb: null, or a positive size no larger than the card's memory (`card` says
    whose figure that is). A CPU has no device allocator to cap: refused rather than ignored, so
    no run is tagged with a cap that held nothing."""
    if cap is None:
        return
    key = "gpu.memory_limit_gb"
    if device == "cpu":
        errors.need(False, key, cap, "null on a CPU (it caps a GPU's memory allocator)")
    elif not positive_or_none(cap):
        errors.need(False, key, cap, "a positive number of GB, or null (the whole card)")
    elif card_gb is not None:
        errors.need(cap <= card_gb, key, cap, f"at most {card_gb:g} GB, the memory of {card}, or null")


def check_measured(measured: DictConfig, errors: Errors) -> None:
    """Each measured figure positive, of a math gpubench runs, with its source, date and method."""
    figures = {f"gpu.measured.matmul_tflops.{m}": f for m, f in measured.matmul_tflops.items()}
    if measured.memory_bandwidth_gbs is not None:
        figures["gpu.measured.memory_bandwidth_gbs"] = measured.memory_bandwidth_gbs
    for math_ in measured.matmul_tflops:
        key = f"gpu.measured.matmul_tflops.{math_}"
        errors.need(math_ in PEAK_MATHS, key, math_, f"a math of {', '.join(PEAK_MATHS)}")
    for key, figure in figures.items():
        errors.need(
            positive_or_none(figure.value) and figure.value, f"{key}.value", figure.value, "a positive number"
        )
        for said in ("source", "date", "method"):
            errors.need(
                bool(str(figure[said]).strip()), f"{key}.{said}", figure[said], "non-empty: where, when, how"
            )
