"""The projection's arithmetic: a measured point's step on another card, each part of it scaled by
what bounds it there (docs/projection.md says why each factor is what it is).

What is measured on the source: the step time and its breakdown (the share of products and
convolutions, of the other kernels, of communication and of idle time), and the card's ceilings.
What is counted (src/projection/counts.py): every op of the step, its FLOPs and bytes, at any batch.
Each op's least time on a card is its roofline: its FLOPs at the card's tensor rate for its math or
its bytes at the card's memory bandwidth, whichever is longer. Then, of the source's step:

- tensor-bound: the products whose FLOPs take longer than their bytes on the source: on the
  target, each one's roofline there (the tensor rate of the math it runs, or its bytes where it
  falls below the target's ridge point);
- bandwidth-bound: the products below the source's ridge point and every other op, as far as their
  bytes at the source's bandwidth explain the measured time: each op's roofline on the target;
- clock-bound: the measured time the counted FLOPs and bytes do not explain at the source's
  ceilings (kernels that run below both: reductions, small grids, partial waves, launches): SMs x
  the clock each card sustains (its boost clock x its measured matmul over its spec rate);
- communication (counts above one): the GPU link; idle (the host's time): kept, per kernel launched.

The shares are of the profiled step, and the profiler adds host time to every kernel it launches,
not GPU time: where the profiled step outlasts the measured one, the kernels keep the time the
profile gives them (as far as the measured step holds it) and idle is what the measured step leaves
(`measured_step_shares`).

A card's figures (`figures`): the tensor rate per math measured and published in its profile
(conf/gpu/, each with its source), else its ceilings run's (the source card), else its spec rate x
its own measured efficiency at another math, else x the source's efficiency for that math; memory
bandwidth likewise. Projected throughput = the items of a step at the target's batch / the projected
step. Nothing here is fitted to anyone's throughput; benchmarks/projection_check.py measures the error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from src.projection.counts import MATMUL, OpCounts, OpRow

TF32_FALLBACK = "fp32"  # a card without TF32 (Volta) runs fp32 matmuls on its CUDA cores
TENSOR_MATHS = ("bf16", "fp16", "tf32")  # a card's efficiency at one tells its clock and its other rates
TENSOR, MEMORY, CLOCK, GPU_LINK, KEPT = "tensor rate", "memory bandwidth", "SMs x clock", "GPU link", "kept"


class ProjectionRefused(ValueError):
    """A point that cannot be projected; the message is one line naming the run or figure to add."""


@dataclass(frozen=True)
class Card:
    """What a gpu profile (conf/gpu/<name>.yaml) states: the spec sheet and the published measurements."""

    name: str
    peak_tflops: dict[str, float]  # dense, fp32 accumulate, at the rate this card runs it
    memory_bandwidth_gbs: float
    memory_gb: float
    host_link_gbs: float
    gpu_link_gbs: float
    tdp_w: float | None = None
    batch_sizes: dict = field(default_factory=dict)  # model -> precision -> the per-GPU batch it runs
    sm_count: int | None = None
    boost_clock_mhz: float | None = None
    measured_tflops: dict[str, tuple[float, str]] = field(
        default_factory=dict
    )  # math -> (value, where, when)
    measured_bandwidth: tuple[float, str] | None = None

    @classmethod
    def from_profile(cls, profile: dict) -> Card:
        name = profile.get("name", "?")
        needed = ("peak_tflops", "memory_bandwidth_gbs", "memory_gb", "host_link_gbs", "gpu_link_gbs")
        missing = [key for key in needed if not profile.get(key)]
        if missing:
            raise ProjectionRefused(
                f"gpu={name}: its profile states no {', '.join(missing)} (conf/gpu/{name}.yaml)"
            )
        measured = profile.get("measured") or {}
        tflops = {m: _published(f) for m, f in (measured.get("matmul_tflops") or {}).items()}
        bandwidth = measured.get("memory_bandwidth_gbs")
        return cls(
            name,
            dict(profile["peak_tflops"]),
            *(float(profile[k]) for k in needed[1:]),
            profile.get("tdp_w"),
            profile.get("batch_sizes") or {},
            profile.get("sm_count"),
            profile.get("boost_clock_mhz"),
            tflops,
            _published(bandwidth) if bandwidth else None,
        )

    def batch_for(self, model: str, precision: str) -> int | None:
        """The batch this card's profile runs the model at (none: the model's default for every card)."""
        return self.batch_sizes.get(model, {}).get(precision)

    def runs_math(self, math_: str) -> str | None:
        """The math this card runs a point's matmuls at: the same, fp32 for tf32 on a card without
        TF32, None where it has neither."""
        if math_ in self.peak_tflops:
            return math_
        return TF32_FALLBACK if math_ == "tf32" and TF32_FALLBACK in self.peak_tflops else None


def _published(figure: dict) -> tuple[float, str]:
    return float(figure["value"]), f"{figure['source']}, {figure['date']}"


@dataclass(frozen=True)
class Ceilings:
    """The source card's measured ceilings (a model=ceilings run)."""

    run_id: str
    matmul_tflops: dict[str, float]  # per math
    memory_copy_gbs: float | None = None


@dataclass(frozen=True)
class Rate:
    value: float
    said: str  # where it comes from, in words


@dataclass(frozen=True)
class Figures:
    """A card's rates as the projection uses them, each saying whether it is measured or spec."""

    card: Card
    tensor: dict[str, Rate]  # TFLOP/s per math
    bandwidth: Rate  # GB/s
    issue: Rate  # SMs x MHz: the rate of work bound by neither
    ceilings: Ceilings | None = None


def figures(card: Card, ceilings: Ceilings | None = None, source: Figures | None = None) -> Figures:
    """The card's figures: measured (its profile's published figures, else its ceilings run) before
    its spec rate x its own measured efficiency at another math, before x the source's efficiency."""
    if card.measured_tflops:
        measured = {m: Rate(v, f"measured ({said})") for m, (v, said) in card.measured_tflops.items()}
    elif ceilings:
        measured = {
            m: Rate(v, f"measured by ceilings run {ceilings.run_id}")
            for m, v in ceilings.matmul_tflops.items()
        }
    else:
        measured = {}
    efficiency = {
        m: measured[m].value / card.peak_tflops[m]
        for m in TENSOR_MATHS
        if m in measured and m in card.peak_tflops
    }
    best = max(efficiency, key=efficiency.get, default=None)
    tensor = {}
    for math_, spec in card.peak_tflops.items():
        if math_ in measured:
            tensor[math_] = measured[math_]
        elif best and math_ != TF32_FALLBACK:
            said = f"spec {spec:g} x {efficiency[best]:.0%}, its measured {best} {measured[best].value:g} of spec {card.peak_tflops[best]:g}"
            tensor[math_] = Rate(spec * efficiency[best], said)
        elif source and math_ in source.tensor and math_ in source.card.peak_tflops:
            share = source.tensor[math_].value / source.card.peak_tflops[math_]
            tensor[math_] = Rate(
                spec * share, f"spec {spec:g} x {share:.0%}, {source.card.name}'s measured efficiency"
            )
        else:
            tensor[math_] = Rate(spec, "spec")
    return Figures(
        card, tensor, _bandwidth(card, ceilings, source), _issue(card, efficiency.get(best)), ceilings
    )


def _bandwidth(card: Card, ceilings: Ceilings | None, source: Figures | None) -> Rate:
    spec = card.memory_bandwidth_gbs
    if card.measured_bandwidth:
        return Rate(card.measured_bandwidth[0], f"measured ({card.measured_bandwidth[1]})")
    if ceilings and ceilings.memory_copy_gbs:
        return Rate(ceilings.memory_copy_gbs, f"measured by ceilings run {ceilings.run_id}")
    if source:
        share = source.bandwidth.value / source.card.memory_bandwidth_gbs
        return Rate(spec * share, f"spec {spec:g} x {share:.0%}, {source.card.name}'s measured efficiency")
    return Rate(spec, "spec")


def _issue(card: Card, efficiency: float | None) -> Rate:
    """SMs x the clock the card sustains: its boost clock x its measured tensor efficiency (a card
    held below its boost clock by its power limit runs its matmuls that much below spec)."""
    if not (card.sm_count and card.boost_clock_mhz):
        raise ProjectionRefused(
            f"gpu={card.name}: its profile states no sm_count or boost_clock_mhz (conf/gpu/{card.name}.yaml)"
        )
    clock = card.boost_clock_mhz * (efficiency or 1.0)
    how = (
        f"{clock:,.0f} MHz, boost {card.boost_clock_mhz:,.0f} x {efficiency:.0%}"
        if efficiency
        else f"boost {clock:,.0f} MHz"
    )
    return Rate(card.sm_count * clock, f"{card.sm_count} SMs x {how}")


@dataclass(frozen=True)
class SourcePoint:
    """A measured point as the projection reads it (src/compare/projection.py makes these)."""

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
    counts: OpCounts | None = None  # its step's ops, counted
    tf32: bool = False  # its fp32 products ran TF32
    items_per_step: float | None = (
        None  # all GPUs, in its unit (tokens for a language model); None: the batch's
    )
    profiled_step_s: float | None = None  # the profiled step the shares are of; None: not logged

    @property
    def step_s(self) -> float:
        return (self.items_per_step or self.batch * self.gpu_count) / self.throughput

    def items_per_s(self, batch: int, step_s: float) -> float:
        """Throughput at another per-GPU batch and step time: items per step scale with the batch."""
        return self.throughput * self.step_s / step_s * batch / self.batch


@dataclass(frozen=True)
class Factor:
    part: str  # what part of the step
    governs: str  # the ratio that scales it: tensor rate, memory bandwidth, SMs x clock, GPU link, kept
    share: float  # of the source's step
    scale: float  # its time on the target (at the target's batch) over its time on the source
    basis: str  # the ratio it is, in words: "tf32 395 -> 61.7 TFLOP/s (...)"

    @property
    def target_share(self) -> float:
        """Of the source's step time: what this part takes on the target."""
        return self.share * self.scale


@dataclass(frozen=True)
class Projection:
    source: SourcePoint
    source_figures: Figures
    target_figures: Figures
    math: str  # the math the target runs
    batch: int  # per GPU, on the target
    factors: tuple[Factor, ...]
    throughput: float
    interval: tuple[float, float]  # the band: the measurement's interval and the model's error
    projected: bool = True  # never pooled with a measured point

    @property
    def target(self) -> Card:
        return self.target_figures.card

    @property
    def ceilings(self) -> Ceilings | None:
        return self.source_figures.ceilings

    @property
    def step_ratio(self) -> float:
        return sum(f.target_share for f in self.factors)


@dataclass(frozen=True)
class Bounds:
    """One step's op times on one card at one batch, each op at its roofline, by what bounds it."""

    tensor: float  # products whose FLOPs at the tensor rate outlast their bytes
    matmul_memory: float  # products below the ridge point: their bytes at the bandwidth
    other: float  # every other op: its bytes at the bandwidth
    kernels: float

    @property
    def matmul(self) -> float:
        return self.tensor + self.matmul_memory


def bounds(
    counts: OpCounts, batch: int, card: Figures, tf32: bool, classed_on: Figures | None = None
) -> Bounds:
    """Seconds each class of op takes on `card` at `batch`; an op's class is where it stands against
    the ridge point of `classed_on` (the card itself by default)."""
    classed_on = classed_on or card
    tensor = matmul_memory = other = kernels = 0.0
    for row in counts.rows:
        n, flops, size = row.at(batch)
        kernels += n
        memory = n * size / (card.bandwidth.value * 1e9)
        if row.kind != MATMUL:
            other += memory
            continue
        compute = n * flops / (_rate(row, card, tf32) * 1e12)
        if flops / (_rate(row, classed_on, tf32) * 1e12) >= size / (classed_on.bandwidth.value * 1e9):
            tensor += max(compute, memory)
        else:
            matmul_memory += max(compute, memory)
    return Bounds(tensor, matmul_memory, other, kernels)


def _rate(row: OpRow, card: Figures, tf32: bool) -> float:
    """TFLOP/s of the math the op runs on this card: its inputs' half precision, else the point's fp32 math."""
    math_ = row.math if row.math != "fp32" else ("tf32" if tf32 else "fp32")
    return card.tensor[card.card.runs_math(math_) or TF32_FALLBACK].value


def _check(point: SourcePoint, target: Card) -> str:
    """The math the target runs the point's matmuls at, or ProjectionRefused naming what is missing."""
    if not point.shares:
        raise ProjectionRefused(
            f"{point.label}: no step-time breakdown; measure it with one: {point.remeasure}"
        )
    if point.counts is None:
        raise ProjectionRefused(
            f"{point.label}: its step's ops were not counted (runs count them from now on); "
            f"measure it again: {point.remeasure}"
        )
    math_ = target.runs_math(point.math)
    if math_ is None:
        raise ProjectionRefused(
            f"gpu={target.name} has no {point.math} math (conf/gpu/{target.name}.yaml): {point.label} is not projected there"
        )
    return math_


def measured_step_shares(point: SourcePoint) -> dict[str, float]:
    """The breakdown's shares as shares of the measured step. A profiled step longer than the
    measured one is the profiler's host time: its kernels' time stands (at most the measured step),
    and idle is the rest of the measured step. A shorter one changes nothing."""
    shares, step, profiled = point.shares, point.step_s, point.profiled_step_s
    idle = shares.get("idle", 0.0)
    if not profiled or profiled <= step or idle >= 1.0:
        return shares
    busy = min((1 - idle) * profiled, step) / step
    return {c: v * busy / (1 - idle) for c, v in shares.items() if c != "idle"} | {"idle": 1 - busy}


def project(
    point: SourcePoint, source: Figures, target: Figures, model_error: float, batch: int | None = None
) -> Projection:
    """The point on the target card at `batch` per GPU (the point's own by default)."""
    math_ = _check(point, target.card)
    batch = batch or point.batch
    s, step = measured_step_shares(point), point.step_s
    at_source = bounds(point.counts, point.batch, source, point.tf32)
    grown = bounds(point.counts, batch, source, point.tf32)  # the same card at the target's batch
    there = bounds(point.counts, batch, target, point.tf32, classed_on=source)
    matmul_s, other_s = s.get("matmul", 0.0) * step, (s.get("other", 0.0) + s.get("memcpy", 0.0)) * step
    # the share of each class's measured time its counted ops explain at the source's ceilings
    on_matmul = min(1.0, matmul_s / at_source.matmul) if at_source.matmul else 0.0
    on_other = min(1.0, other_s / at_source.other) if at_source.other else 0.0
    memory_s = on_matmul * at_source.matmul_memory + on_other * at_source.other
    memory_t = on_matmul * there.matmul_memory + on_other * there.other
    unexplained = [matmul_s - on_matmul * at_source.matmul, other_s - on_other * at_source.other]
    growth = [_ratio(grown.matmul, at_source.matmul), _ratio(grown.other, at_source.other)]
    clock_s = sum(unexplained)
    clock_t = (
        sum(u * g for u, g in zip(unexplained, growth, strict=True)) * source.issue.value / target.issue.value
    )
    said = f"{point.math} {_rate_said(source, point.math)} -> {math_} {_rate_said(target, math_)}"
    link = source.card.gpu_link_gbs / target.card.gpu_link_gbs if point.gpu_count > 1 else 1.0
    factors = (
        Factor(
            "tensor-bound",
            TENSOR,
            on_matmul * at_source.tensor / step,
            _ratio(there.tensor, at_source.tensor),
            said,
        ),
        Factor(
            "bandwidth-bound",
            MEMORY,
            memory_s / step,
            _ratio(memory_t, memory_s),
            f"memory {source.bandwidth.value:,.4g} GB/s ({source.bandwidth.said}) -> "
            f"{target.bandwidth.value:,.4g} GB/s ({target.bandwidth.said})",
        ),
        Factor(
            "clock-bound",
            CLOCK,
            clock_s / step,
            _ratio(clock_t, clock_s),
            f"{source.issue.said} -> {target.issue.said}",
        ),
        Factor(
            "communication",
            GPU_LINK,
            s.get("comm", 0.0),
            link,
            f"GPU link {source.card.gpu_link_gbs:,.4g} -> {target.card.gpu_link_gbs:,.4g} GB/s",
        ),
        Factor(
            "idle",
            KEPT,
            s.get("idle", 0.0),
            _ratio(there.kernels, at_source.kernels),
            "host time per kernel, kept",
        ),
    )
    ratio = sum(f.target_share for f in factors)
    throughput = point.items_per_s(batch, step * ratio)
    return Projection(
        point, source, target, math_, batch, factors, throughput, band(throughput, point, model_error)
    )


def _ratio(there: float, here: float) -> float:
    return there / here if here else 1.0


def _rate_said(card: Figures, math_: str) -> str:
    rate = card.tensor[math_]
    return f"{rate.value:,.4g} TFLOP/s ({rate.said})"


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
