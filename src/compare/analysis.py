"""Relative throughput against a baseline gpu, and category means as the seed study states them.

Lambda's A6000 vs 3090 article: per model, throughput over the baseline's at the same GPU count and
precision; per category, the arithmetic mean of those ratios (the geometric mean beside it: one
model's large ratio does not outweigh another's small one). A gpu's mean averages the models it and
the baseline both have, so it never depends on which other gpus the store holds. Like math is set
against like math and like software against like software where the baseline has it; a ratio that
cannot be is flagged (`math_differs`, which leaves it out of the means, and `stack_differs`).
"""

from __future__ import annotations

from dataclasses import dataclass

from src.compare.ratio import MATH_DIFFERS, Ratio, means, quotient
from src.compare.runs import MEASURED, STACK_KEYS, STUDY_HINT, CompareError, Measurement, stack_difference
from src.config import points

# Precisions compared in one panel of the charts; each stays distinct in the tables.
PRECISION_GROUPS = {"fp32": "fp32", "tf32": "fp32", "amp": "mixed", "bf16": "mixed"}


def precision_group(precision: str) -> str:
    return PRECISION_GROUPS.get(precision, precision)


@dataclass(frozen=True, kw_only=True)
class RelativeRow(Ratio):
    """A measurement over the baseline's: the ratio itself, its value None where there is no baseline."""

    measurement: Measurement
    baseline: Measurement | None = None  # the baseline gpu's measurement this one is divided by

    relative = property(lambda row: row.value)
    ratio = property(lambda row: row if row.baseline else None)  # None: no baseline, no ratio


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

    relative_mean = property(lambda s: s.mean.value)
    relative_geomean = property(lambda s: s.geomean.value)
    flags = property(lambda s: s.mean.flags)
    n_models = property(lambda s: len(s.models))


def find_baseline(m: Measurement, bases: list, source: str | None, stack_keys: tuple) -> Measurement | None:
    """The baseline's measurement of the same workload (same_workload). Preferred, in order: the
    same math (strict fp32 and TF32 are not alike), the row's own source (or `source` when set),
    the same software stack (else the fewest differences), the same precision, the same batch."""
    stack = dict(m.stack)
    return min(
        (b for b in bases if (source is None or b.source == source) and same_workload(b, m)),
        key=lambda b: (
            b.math != m.math,
            b.source != m.source,
            sum(dict(b.stack).get(k) != stack.get(k) for k in stack_keys),
            b.precision != m.precision,
            b.config != m.config,
            b.source,
        ),
        default=None,
    )


def same_workload(one: Measurement, other: Measurement) -> bool:
    """The same model, GPU count, precision group and measured keys (a key one side lacks at its
    default), but for the per-GPU batch (gpu profiles size it by memory, as Lambda did) and the
    stack (a ratio across stacks is flagged). A published figure logs no sizes: it stands for its
    model as published."""
    if len({(m.model, m.gpu_count, precision_group(m.precision)) for m in (one, other)}) > 1:
        return False
    return {one.source, other.source} != {MEASURED} or not setting_difference(one, other)


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
    """Each measurement over its baseline, flagged where the two ran unlike math (strict fp32 against
    TF32) or unlike stacks among `stack_keys` (axis.stack_keys); not against a published figure,
    whose stack is unknown (its source marks it instead)."""
    baselines = [m for m in measurements if m.side == baseline]
    rows = []
    for m in measurements:
        if (base := find_baseline(m, baselines, baseline_source, stack_keys)) is None:
            rows.append(RelativeRow(None, None, measurement=m))
            continue
        stacks = stack_difference(m, base, stack_keys) if {m.source, base.source} == {MEASURED} else ""
        r = quotient(m, base, math_differs={m.math, base.math} == {"fp32", "tf32"}, stack_differs=stacks)
        rows.append(RelativeRow(**vars(r), measurement=m, baseline=base))
    return rows


def summarize(rows: list[RelativeRow]) -> tuple[list[SummaryRow], list[str]]:
    """Per (category, precision, gpu count, side, source): mean and geomean of the model ratios, with
    their 95% intervals, over the models the gpu and the baseline both have (so adding another gpu's
    runs moves nothing); and the series that share no model with the baseline (no mean for them)."""
    series: dict[tuple, list[RelativeRow]] = {}
    for row in rows:
        m = row.measurement
        series.setdefault((m.category, m.precision, m.gpu_count, m.side, m.source), []).append(row)
    summary, nothing_common = [], []
    for key, members_all in sorted(series.items()):
        members = [r for r in members_all if r.relative is not None and not r.math_differs]
        if members:
            models = tuple(sorted(r.measurement.workload for r in members))
            left_out = _left_out(members_all, rows)
            baselines = ", ".join(sorted({f"{r.baseline.precision} [{r.baseline.source}]" for r in members}))
            summary.append(SummaryRow(*key, *means([r.ratio for r in members]), models, left_out, baselines))
        elif any(r.baseline is None for r in members_all):
            category, precision, count, side, source = key
            nothing_common.append(f"{category} {precision} x{count} {side} [{source}]")
    return summary, sorted(nothing_common)


def _left_out(members: list[RelativeRow], rows: list[RelativeRow]) -> tuple[str, ...]:
    """The models of the gpu or of its baseline (the measurements its ratios were divided by, of
    the same category, GPU count, precision group and source) that its mean does not average, and
    why: the baseline has no run of it, the gpu has none, or the ratio sets unlike math."""
    reasons = {r.measurement.workload: "no baseline run" for r in members if r.baseline is None}
    reasons |= {r.measurement.workload: MATH_DIFFERS for r in members if r.math_differs}
    first, ours = members[0].measurement, {r.measurement.model for r in members}
    used = {
        (b.side, b.source, b.precision, first.category, first.gpu_count) for r in members if (b := r.baseline)
    }
    reasons |= {
        m.workload: f"no {first.side} run"
        for m in (r.measurement for r in rows)
        if (m.side, m.source, m.precision, m.category, m.gpu_count) in used and m.model not in ours
    }
    return tuple(f"{workload} ({why})" for workload, why in sorted(reasons.items()))


def check_comparable(measurements: list[Measurement], rows: list[RelativeRow], baseline: str) -> None:
    """Stop with what is missing when there is no baseline or nothing to set beside it."""
    if not measurements:
        raise CompareError(
            "nothing to compare: no FINISHED run with a throughput matches the filters (check "
            f"tracking.uri, tracking.experiment, gpus, models, precisions, gpu_counts, sources); {STUDY_HINT}"
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
