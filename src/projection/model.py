"""The projection's arithmetic: a measured point's step time, split into the classes its breakdown
logged, each class scaled to the target card by the ratio that governs it.

    target step / source step = sum over the parts of (share of the source's step x scale)

- matmul: the step's FLOPs at the source's measured tensor rate for the math that ran are the
  tensor-bound part, scaled by source rate / target rate, the target's rate being its spec rate for
  the math it runs (GeForce cards' fp32-accumulate rate is their spec figure) times the efficiency
  the source measured for that math (ceiling / spec); the rest of the matmul time (kernels waiting
  on memory) scales as other compute. Without FLOPs per item the whole class is tensor-bound.
- other compute: source / target memory bandwidth.
- copies: source / target host link.
- communication (counts above one): source / target link between GPUs.
- idle (the host's time): kept.

Projected throughput = source throughput / step ratio: the same items per step (batch) as the run
projected; which run stands for a target's own batch is src/projection/choose.py's. No coefficient
here is fitted to anyone's throughput; the model's error is measured by benchmarks/projection_check.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

TF32_FALLBACK = "fp32"  # a card without TF32 (Volta) runs fp32 matmuls on its CUDA cores
TENSOR, MEMORY, HOST_LINK, GPU_LINK, KEPT = "tensor rate", "memory bandwidth", "host link", "GPU link", "kept"


class ProjectionRefused(ValueError):
    """A point that cannot be projected; the message is one line naming the run or figure to add."""


@dataclass(frozen=True)
class Card:
    """The spec-sheet figures a projection reads (conf/gpu/<name>.yaml)."""

    name: str
    peak_tflops: dict[str, float]  # dense, fp32 accumulate, at the rate this card runs it
    memory_bandwidth_gbs: float
    memory_gb: float
    host_link_gbs: float
    gpu_link_gbs: float
    tdp_w: float | None = None
    batch_sizes: dict = field(default_factory=dict)  # model -> precision -> the per-GPU batch it runs

    @classmethod
    def from_profile(cls, profile: dict) -> Card:
        name = profile.get("name", "?")
        needed = ("peak_tflops", "memory_bandwidth_gbs", "memory_gb", "host_link_gbs", "gpu_link_gbs")
        missing = [key for key in needed if not profile.get(key)]
        if missing:
            raise ProjectionRefused(f"gpu={name}: its profile states no {', '.join(missing)} (conf/gpu/{name}.yaml)")
        figures = (float(profile[k]) for k in needed[1:])
        return cls(name, dict(profile["peak_tflops"]), *figures, profile.get("tdp_w"), profile.get("batch_sizes") or {})

    def batch_for(self, model: str, precision: str) -> int | None:
        """The batch this card's profile runs the model at (none: the model's default for every card)."""
        return self.batch_sizes.get(model, {}).get(precision)

    def runs_math(self, math_: str) -> str | None:
        """The math this card runs a point's matmuls at: the same, fp32 for tf32 on a card without
        TF32, None where it has neither."""
        if math_ in self.peak_tflops:
            return math_
        return TF32_FALLBACK if math_ == "tf32" and TF32_FALLBACK in self.peak_tflops else None


@dataclass(frozen=True)
class Ceilings:
    """The source card's measured ceilings (a model=ceilings run)."""

    run_id: str
    matmul_tflops: dict[str, float]  # per math
    memory_copy_gbs: float | None = None


@dataclass(frozen=True)
class SourcePoint:
    """A measured point as the projection reads it (src/projection/runs.py makes these)."""

    label: str  # "h200 x1 txl_large amp [batch 16]", for messages
    gpu: str
    model: str
    precision: str
    math: str  # the peak key the matmuls ran at: fp32, tf32, fp16, bf16
    gpu_count: int
    batch: int  # per GPU
    throughput: float  # items/s, all GPUs: the median of the point's runs
    interval: tuple[float, float] | None  # its 95% interval
    shares: dict[str, float] | None  # the step-time breakdown (matmul, other, comm, memcpy, idle)
    flops_per_item: float | None
    memory_gb: float | None  # what the batch needed: the cap it ran under, else its peak
    run_ids: tuple[str, ...]
    remeasure: str  # the command that measures it (with its breakdown)
    group: tuple = ()  # its settings and stack but the batch and memory cap: one workload's points share it
    power_bound: float | None = None  # share of its window the source spent at its power limit (telemetry)

    @property
    def step_s(self) -> float:
        return self.batch * self.gpu_count / self.throughput


@dataclass(frozen=True)
class Factor:
    part: str  # what part of the step
    governs: str  # the ratio that scales it: tensor rate, memory bandwidth, host link, GPU link, kept
    share: float  # of the source's step
    scale: float  # its time on the target over its time on the source
    basis: str  # the ratio it is, in words: "tf32 tensor 494.5 -> 77.4 TFLOP/s"

    @property
    def target_share(self) -> float:
        """Of the source's step time: what this part takes on the target."""
        return self.share * self.scale


@dataclass(frozen=True)
class Projection:
    source: SourcePoint
    source_card: Card
    ceilings: Ceilings
    target: Card
    math: str  # the math the target runs
    factors: tuple[Factor, ...]
    throughput: float
    interval: tuple[float, float]  # the band: the measurement's interval and the model's error
    projected: bool = True  # never pooled with a measured point

    @property
    def step_ratio(self) -> float:
        return sum(f.target_share for f in self.factors)


def project(point: SourcePoint, source: Card, ceilings: Ceilings | None, target: Card, model_error: float) -> Projection:
    """The point on the target card, or ProjectionRefused naming what to measure first."""
    if not point.shares:
        raise ProjectionRefused(f"{point.label}: no step-time breakdown; measure it with one: {point.remeasure}")
    if ceilings is None:
        raise ProjectionRefused(
            f"{point.label}: no ceilings run of its card, count and software; run: "
            f"python -m src.train model=ceilings gpu={point.gpu} gpu.count={point.gpu_count}"
        )
    math_ = target.runs_math(point.math)
    if math_ is None:
        raise ProjectionRefused(f"gpu={target.name} has no {point.math} math (conf/gpu/{target.name}.yaml): {point.label} is not projected there")
    factors = (*_matmul(point, source, ceilings, target, math_), *_the_rest(point, source, target))
    ratio = sum(f.target_share for f in factors)
    throughput = point.throughput / ratio
    return Projection(point, source, ceilings, target, math_, factors, throughput, band(throughput, point, model_error))


def _matmul(point: SourcePoint, source: Card, ceilings: Ceilings, target: Card, math_: str) -> list[Factor]:
    """The tensor-bound part at the tensor rates, the rest at the memory bandwidths."""
    share = point.shares.get("matmul", 0.0)
    for needed in {point.math, math_}:
        if needed not in ceilings.matmul_tflops:
            raise ProjectionRefused(
                f"{point.label}: its ceilings run {ceilings.run_id} has no {needed} matmul figure; run: "
                f"python -m src.train model=ceilings gpu={point.gpu} gpu.count={point.gpu_count}"
            )
    source_rate = ceilings.matmul_tflops[point.math]
    efficiency = ceilings.matmul_tflops[math_] / source.peak_tflops[math_]
    target_rate = target.peak_tflops[math_] * efficiency
    tensor = 1.0
    if point.flops_per_item and share > 0:
        tensor = min(1.0, point.flops_per_item * point.batch / (source_rate * 1e12) / (share * point.step_s))
    basis = (
        f"{point.math} tensor {source_rate:,.4g} -> {math_} {target_rate:,.4g} TFLOP/s "
        f"({target.peak_tflops[math_]:,.4g} spec x {efficiency:.0%} as measured on {point.gpu})"
    )
    factors = [Factor("matmul, tensor-bound", TENSOR, share * tensor, source_rate / target_rate, basis)]
    if tensor < 1.0:
        factors.append(Factor("matmul, waiting on memory", MEMORY, share * (1 - tensor), *_bandwidth(source, target)))
    return factors


def _bandwidth(source: Card, target: Card) -> tuple[float, str]:
    scale = source.memory_bandwidth_gbs / target.memory_bandwidth_gbs
    return scale, f"memory {source.memory_bandwidth_gbs:,.4g} -> {target.memory_bandwidth_gbs:,.4g} GB/s"


def _the_rest(point: SourcePoint, source: Card, target: Card) -> list[Factor]:
    s = point.shares
    comm = source.gpu_link_gbs / target.gpu_link_gbs if point.gpu_count > 1 else 1.0
    return [
        Factor("other compute", MEMORY, s.get("other", 0.0), *_bandwidth(source, target)),
        Factor("copies", HOST_LINK, s.get("memcpy", 0.0), source.host_link_gbs / target.host_link_gbs,
               f"host link {source.host_link_gbs:,.4g} -> {target.host_link_gbs:,.4g} GB/s"),
        Factor("communication", GPU_LINK, s.get("comm", 0.0), comm,
               f"GPU link {source.gpu_link_gbs:,.4g} -> {target.gpu_link_gbs:,.4g} GB/s"),
        Factor("idle", KEPT, s.get("idle", 0.0), 1.0, "host time, kept"),
    ]  # fmt: skip


def measured_half_width(point: SourcePoint) -> float:
    """The wider side of the point's 95% interval, on the log scale (0 without one)."""
    if not point.interval:
        return 0.0
    low, high = point.interval
    return max(math.log(point.throughput / low), math.log(high / point.throughput))


def band(throughput: float, point: SourcePoint, model_error: float) -> tuple[float, float]:
    """95% band: the measurement's interval and the model's own error added on the log scale. The
    error is measured on ratios of two projected cards, so each card carries half its variance: a
    ratio of two projections carries it once."""
    half = math.hypot(measured_half_width(point), math.log1p(model_error) / math.sqrt(2))
    return throughput * math.exp(-half), throughput * math.exp(half)


def ratio_band(a: Projection, b: Projection, model_error: float) -> tuple[float, float]:
    """The band of A / B: both points' intervals (none when both come from one point: it cancels)
    and the model's error, which benchmarks/projection_check.py measures on such ratios, once."""
    measured = 0.0 if a.source is b.source else math.hypot(*map(measured_half_width, (a.source, b.source)))
    half = math.hypot(measured, math.log1p(model_error))
    ratio = a.throughput / b.throughput
    return ratio * math.exp(-half), ratio * math.exp(half)
