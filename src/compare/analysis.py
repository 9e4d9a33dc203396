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

from dataclasses import dataclass

from src.compare.ratio import MATH_DIFFERS, Ratio, Spread, means, quotient
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


def precision_group(precision: str) -> str:
    return PRECISION_GROUPS.get(precision, precision)


@dataclass
class RelativeRow:
    measurement: Measurement
    baseline: Measurement | None  # the baseline gpu's measurement this one is divided by
    ratio: Ratio | None  # measurement / baseline

    @property
    def relative(self) -> float | None:
        return self.ratio.value if self.ratio else None

    @property
    def spread(self) -> Spread | None:
        return self.ratio.spread if self.ratio else None

    @property
    def interval(self) -> tuple[float, float] | None:
        return self.ratio.interval if self.ratio else None

    @property
    def math_differs(self) -> bool:
        return bool(self.ratio and self.ratio.math_differs)

    @property
    def stack_differs(self) -> str:
        return self.ratio.stack_differs if self.ratio else ""

    @property
    def flags(self) -> list[str]:
        return self.ratio.flags if self.ratio else []

    @property
    def no_difference(self) -> bool:
        return bool(self.ratio and self.ratio.no_difference)


def against(m: Measurement, base: Measurement | None, stack_keys: tuple[str, ...]) -> RelativeRow:
    """m over its baseline, flagged where the two ran unlike math (strict fp32 against TF32, either
    way round) or unlike stacks (what differs among `stack_keys`; never against a published
    figure, whose stack is unknown: its source marks it instead)."""
    if base is None:
        return RelativeRow(m, None, None)
    measured = {m.source, base.source} == {MEASURED}
    return RelativeRow(
        m,
        base,
        quotient(
            m,
            base,
            math_differs={m.math, base.math} == {"fp32", "tf32"},
            stack_differs=stack_difference(m, base, stack_keys) if measured else "",
        ),
    )


@dataclass
class SummaryRow:
    category: str
    precision: str
    gpu_count: int
    side: str  # the gpu, or with by=KEY `KEY=value` (src/compare/axis.py)
    source: str
    mean: Ratio  # the arithmetic mean of the model ratios, as Lambda's article states them
    geomean: Ratio
    models: tuple[str, ...]  # the models averaged: those the gpu and the baseline both have
    left_out: tuple[str, ...]  # the other models of the two, each with why: "maskrcnn (no a6000 run)"
    baselines: str  # which baseline measurements the ratios used, e.g. "fp32 [lambda]"

    @property
    def relative_mean(self) -> float:
        return self.mean.value

    @property
    def relative_geomean(self) -> float:
        return self.geomean.value

    @property
    def flags(self) -> list[str]:
        return self.mean.flags

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
        and same_workload(b, measurement)
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


def same_workload(one: Measurement, other: Measurement) -> bool:
    """The same point but for the gpu, the per-GPU batch and the stack (a ratio across stacks is
    made where it must be, and flagged): every measured key and the layout alike, a key one side
    lacks at its default (points.point_config leaves defaults out). A published figure, which logs
    no sizes, stands for its model as published."""
    if one.source != MEASURED or other.source != MEASURED:
        return True
    return not setting_difference(one, other)


def setting_difference(one: Measurement, other: Measurement, also: tuple[str, ...] = ()) -> str:
    """The measured keys two points differ in, the batch, the stack and `also` aside:
    'cpu_threads=1 vs 2'; ''."""
    left_out = {points.RAN_BATCH, *STACK_KEYS, *also}
    mine, theirs = ({k: v for k, v in m.config if k not in left_out} for m in (one, other))
    there, here = points.differences(tuple(mine.items()), tuple(theirs.items()))
    return f"{there} vs {here}" if there or here else ""


def relative_table(
    measurements: list[Measurement],
    baseline: str,
    baseline_source: str | None = None,
    stack_keys: tuple[str, ...] = tuple(points.SOFTWARE),
) -> list[RelativeRow]:
    """Each measurement over its baseline; `stack_keys`: what a like-for-like ratio shares (the
    software for a GPU comparison; with compare by=, every stack key but the one compared)."""
    baselines = [m for m in measurements if m.side == baseline]
    return [against(m, find_baseline(m, baselines, baseline_source, stack_keys), stack_keys) for m in measurements]


def summarize(rows: list[RelativeRow]) -> tuple[list[SummaryRow], list[str]]:
    """Per (category, precision, gpu count, side, source): mean and geomean of the model ratios,
    with their 95%  A gpu's mean depends only on its own runs and the baseline's: it
    averages the models both have (so adding another gpu's runs moves nothing), and `left_out`
    names each model of either that it does not average, and why: the baseline has no run of it,
    the gpu has none, or the ratio sets unlike math (`math_differs`).

    Also returns the series that share no model with the baseline (no mean for them).
    """
    series: dict[tuple, list[RelativeRow]] = {}
    for row in rows:
        m = row.measurement
        series.setdefault((m.category, m.precision, m.gpu_count, m.side, m.source), []).append(row)
    summary, nothing_common = [], []
    for (category, precision, count, side, source), members_all in series.items():
        members = [r for r in members_all if r.relative is not None and not r.math_differs]
        left_out = _left_out(members_all, rows, side)
        if not members:
            if any(r.baseline is None for r in members_all):
                nothing_common.append(f"{category} {precision} x{count} {side} [{source}]")
            continue
        mean, geomean = means([r.ratio for r in members])
        summary.append(
            SummaryRow(
                category,
                precision,
                count,
                side,
                source,
                mean=mean,
                geomean=geomean,
                models=tuple(sorted(r.measurement.workload for r in members)),
                left_out=left_out,
                baselines=", ".join(sorted({f"{r.baseline.precision} [{r.baseline.source}]" for r in members})),
            )
        )
    summary.sort(key=lambda s: (s.category, s.precision, s.gpu_count, s.side, s.source))
    return summary, sorted(nothing_common)


def _left_out(members: list[RelativeRow], rows: list[RelativeRow], side: str) -> tuple[str, ...]:
    """The models of the gpu or of its baseline (the measurements its ratios were divided by, of
    the same category, GPU count, precision group and source) that its mean does not average."""
    reasons = {}
    for row in members:
        if row.baseline is None:
            reasons[row.measurement.workload] = "no baseline run"
        elif row.math_differs:
            reasons[row.measurement.workload] = MATH_DIFFERS
    used = {(r.baseline.side, r.baseline.source, r.baseline.precision) for r in members if r.baseline}
    first = members[0].measurement
    ours = {r.measurement.model for r in members}
    reasons |= {
        r.measurement.workload: f"no {side} run"
        for r in rows
        if (r.measurement.side, r.measurement.source, r.measurement.precision) in used
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
    gpus = sorted({m.side for m in measurements})
    if baseline not in gpus:
        raise CompareError(
            f"baseline={baseline}: no FINISHED run of gpu {baseline!r} matches the filters; "
            f"gpus found: {', '.join(gpus)}"
        )
    if not any(r.relative is not None and r.measurement.side != baseline for r in rows):
        ours = sorted({_point(m) for m in measurements if m.side == baseline})
        others = sorted({f"{m.side} {_point(m)}" for m in measurements if m.side != baseline})
        raise CompareError(
            f"nothing to compare: no other gpu shares a model, gpu count and precision group with "
            f"baseline={baseline}. Baseline has: {'; '.join(ours)}. "
            f"Others have: {'; '.join(others) or 'no runs'}"
        )


def _point(m: Measurement) -> str:
    return f"{m.workload} x{m.gpu_count} {m.precision}"
