"""Relative throughput against a baseline gpu, and category means as the seed study states them.

Lambda's A6000 vs 3090 article: per model, throughput over the baseline's at the same GPU count and
precision; per category, the arithmetic mean of those ratios. The geometric mean is given too: it
does not let one model's large ratio outweigh another's small one. A gpu's category mean averages
the models it and the baseline both have, so it depends on those two gpus' runs only (never on
which other gpus the store holds), and names the models it leaves out and why. Like math is set against like math and like software against like
software where the baseline has it; a ratio that cannot be is flagged (`math_differs`, which also
leaves it out of the means, and `stack_differs`). Every ratio and mean carries a 95% interval.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from src.compare import intervals
from src.compare.runs import (
    MEASURED,
    STACK_KEYS,
    STUDY_HINT,
    CompareError,
    Measurement,
    stack_difference,
)
from src.config import points

# Precisions compared in one panel of the charts; each stays distinct in the tables.
PRECISION_GROUPS = {"fp32": "fp32", "tf32": "fp32", "amp": "mixed", "bf16": "mixed"}
GROUP_TITLES = {"fp32": "fp32 and tf32", "mixed": "mixed precision (amp, bf16)"}
MATH_DIFFERS, STACK_DIFFERS = "math_differs", "stack_differs"
NO_DIFFERENCE = "no measurable difference"


def precision_group(precision: str) -> str:
    return PRECISION_GROUPS.get(precision, precision)


@dataclass
class RelativeRow:
    measurement: Measurement
    baseline: Measurement | None  # the baseline gpu's measurement this one is divided by
    stack_keys: tuple[str, ...] = tuple(points.SOFTWARE)  # the stack a like-for-like ratio shares

    @property
    def relative(self) -> float | None:
        return self.measurement.throughput / self.baseline.throughput if self.baseline else None

    @property
    def spread(self) -> intervals.Spread | None:
        if self.baseline is None or self.baseline is self.measurement:  # the baseline itself: 1 exactly
            return None
        return intervals.ratio_spread(self.measurement.spread, self.baseline.spread)

    @property
    def interval(self) -> tuple[float, float] | None:
        spread = self.spread
        return spread.interval(self.relative) if spread else None

    @property
    def math_differs(self) -> bool:
        """Strict fp32 against TF32 math (published "fp32" ran TF32), either way round."""
        return self.baseline is not None and {self.measurement.math, self.baseline.math} == {"fp32", "tf32"}

    @property
    def stack_differs(self) -> str:
        """What differs between the two stacks, e.g. 'torch 2.14.1 vs 2.11.0'; '' when nothing, and
        against a published figure, whose stack is unknown (its source marks it instead)."""
        if self.baseline is None or {self.measurement.source, self.baseline.source} != {MEASURED}:
            return ""
        return stack_difference(self.measurement, self.baseline, self.stack_keys)

    @property
    def flags(self) -> list[str]:
        flags = [MATH_DIFFERS] if self.math_differs else []
        return flags + ([STACK_DIFFERS] if self.stack_differs else [])

    @property
    def no_difference(self) -> bool:
        return intervals.holds_one(self.interval)


@dataclass
class SummaryRow:
    category: str
    precision: str
    gpu_count: int
    gpu: str
    source: str
    relative_mean: float
    relative_geomean: float
    models: tuple[str, ...]  # the models averaged: those the gpu and the baseline both have
    left_out: tuple[str, ...]  # this gpu's models that some other gpu of the group lacks
    baselines: str  # which baseline measurements the ratios used, e.g. "fp32 [lambda]"
    mean_spread: intervals.Spread | None = None  # of log relative_mean
    geomean_spread: intervals.Spread | None = None  # of log relative_geomean
    flags: tuple[str, ...] = ()  # stack_differs when a ratio averaged has it

    @property
    def mean_interval(self) -> tuple[float, float] | None:
        return self.mean_spread.interval(self.relative_mean) if self.mean_spread else None

    @property
    def geomean_interval(self) -> tuple[float, float] | None:
        return self.geomean_spread.interval(self.relative_geomean) if self.geomean_spread else None

    @property
    def n_models(self) -> int:
        return len(self.models)


def find_baseline(
    measurement: Measurement,
    baselines: list[Measurement],
    baseline_source: str | None,
    stack_keys: tuple[str, ...] = tuple(points.SOFTWARE),
) -> Measurement | None:
    """The baseline's measurement of the same model, sizes, settings and GPU count.

    Same precision group always; the per-GPU batch may differ (gpu profiles size it by memory, as
    Lambda did) and a published figure, which logs no sizes, stands for its model as published.
    Preferred, in order: the same math (strict fp32 and TF32 are not alike), the row's own source
    (or `baseline_source` when set), the same software stack (else the fewest differences), the
    same precision, the same batch.
    """
    group = precision_group(measurement.precision)
    candidates = [
        b
        for b in baselines
        if b.model == measurement.model
        and b.gpu_count == measurement.gpu_count
        and precision_group(b.precision) == group
        and (baseline_source is None or b.source == baseline_source)
        and same_workload(b.config, measurement.config)
    ]
    return min(
        candidates,
        key=lambda b: (
            b.math != measurement.math,
            b.source != measurement.source,
            _differences(dict(b.stack), dict(measurement.stack), stack_keys),
            b.precision != measurement.precision,
            b.config != measurement.config,
            b.source,
        ),
        default=None,
    )


def _differences(one: dict, other: dict, keys: tuple[str, ...]) -> int:
    return sum(one.get(k) != other.get(k) for k in keys)


def same_workload(one: tuple, other: tuple) -> bool:
    """The keys both configs have agree, the per-GPU batch and the stack aside (a ratio across
    stacks is made where it must be, and flagged)."""
    a, b = dict(one), dict(other)
    return all(a[k] == b[k] for k in a.keys() & b.keys() if k != "batch_size" and k not in STACK_KEYS)


def relative_table(
    measurements: list[Measurement],
    baseline: str,
    baseline_source: str | None = None,
    stack_keys: tuple[str, ...] = tuple(points.SOFTWARE),
) -> list[RelativeRow]:
    """Each measurement over its baseline; `stack_keys`: what a like-for-like ratio shares (the
    software for a GPU comparison; with compare by=, every stack key but the one compared)."""
    baselines = [m for m in measurements if m.gpu == baseline]
    return [
        RelativeRow(m, find_baseline(m, baselines, baseline_source, stack_keys), stack_keys)
        for m in measurements
    ]


def summarize(rows: list[RelativeRow]) -> tuple[list[SummaryRow], list[str]]:
    """Per (category, precision, gpu count, gpu, source): mean and geomean of the model ratios,
    with their 95% intervals. A gpu's mean depends only on its own runs and the baseline's: it
    averages the models both have (so adding another gpu's runs moves nothing), and `left_out`
    names each model of either that it does not average, and why: the baseline has no run of it,
    the gpu has none, or the ratio sets unlike math (`math_differs`).

    Also returns the series that share no model with the baseline (no mean for them).
    """
    series: dict[tuple, list[RelativeRow]] = {}
    for row in rows:
        m = row.measurement
        series.setdefault((m.category, m.precision, m.gpu_count, m.gpu, m.source), []).append(row)
    summary, nothing_common = [], []
    for (category, precision, count, gpu, source), members_all in series.items():
        members = [r for r in members_all if r.relative is not None and not r.math_differs]
        left_out = _left_out(members_all, rows, gpu)
        if not members:
            if any(r.baseline is None for r in members_all):
                nothing_common.append(f"{category} {precision} x{count} {gpu} [{source}]")
            continue
        ratios = [r.relative for r in members]
        geomean_spread, mean_spread = intervals.mean_spreads(ratios, [r.spread for r in members])
        summary.append(
            SummaryRow(
                category,
                precision,
                count,
                gpu,
                source,
                relative_mean=statistics.fmean(ratios),
                relative_geomean=math.exp(statistics.fmean(math.log(r) for r in ratios)),
                models=tuple(sorted(r.measurement.workload for r in members)),
                left_out=left_out,
                baselines=", ".join(sorted({f"{r.baseline.precision} [{r.baseline.source}]" for r in members})),
                mean_spread=mean_spread,
                geomean_spread=geomean_spread,
                flags=tuple(sorted({flag for r in members for flag in r.flags})),
            )
        )
    summary.sort(key=lambda s: (s.category, s.precision, s.gpu_count, s.gpu, s.source))
    return summary, sorted(nothing_common)


def _left_out(members: list[RelativeRow], rows: list[RelativeRow], gpu: str) -> tuple[str, ...]:
    """The models of the gpu or of its baseline (the measurements its ratios were divided by, of
    the same category, GPU count, precision group and source) that its mean does not average."""
    reasons = {}
    for row in members:
        if row.baseline is None:
            reasons[row.measurement.workload] = "no baseline run"
        elif row.math_differs:
            reasons[row.measurement.workload] = MATH_DIFFERS
    used = {(r.baseline.gpu, r.baseline.source, r.baseline.precision) for r in members if r.baseline}
    first = members[0].measurement
    ours = {r.measurement.model for r in members}
    reasons |= {
        r.measurement.workload: f"no {gpu} run"
        for r in rows
        if (r.measurement.gpu, r.measurement.source, r.measurement.precision) in used
        and r.measurement.category == first.category
        and r.measurement.gpu_count == first.gpu_count
        and r.measurement.model not in ours
    }
    return tuple(f"{workload} ({why})" for workload, why in sorted(reasons.items()))


def check_comparable(measurements: list[Measurement], rows: list[RelativeRow], baseline: str) -> None:
    """Stop with what is missing when there is no baseline or nothing to set beside it."""
    if not measurements:
        raise CompareError(
            "nothing to compare: no FINISHED run with a throughput matches the filters "
            f"(check tracking.uri, tracking.experiment, gpus, models, precisions, gpu_counts, sources); {STUDY_HINT}"
        )
    gpus = sorted({m.gpu for m in measurements})
    if baseline not in gpus:
        raise CompareError(
            f"baseline={baseline}: no FINISHED run of gpu {baseline!r} matches the filters; "
            f"gpus found: {', '.join(gpus)}"
        )
    if not any(r.relative is not None and r.measurement.gpu != baseline for r in rows):
        ours = sorted({_point(m) for m in measurements if m.gpu == baseline})
        others = sorted({f"{m.gpu} {_point(m)}" for m in measurements if m.gpu != baseline})
        raise CompareError(
            f"nothing to compare: no other gpu shares a model, gpu count and precision group with "
            f"baseline={baseline}. Baseline has: {'; '.join(ours)}. "
            f"Others have: {'; '.join(others) or 'no runs'}"
        )


def _point(m: Measurement) -> str:
    return f"{m.workload} x{m.gpu_count} {m.precision}"
