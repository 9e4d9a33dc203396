"""Relative throughput against a baseline gpu, and category means as the seed study states them.

Lambda's A6000 vs 3090 article: per model, throughput over the baseline's at the same GPU count and
precision; per category, the arithmetic mean of those ratios. The geometric mean is given too: it
does not let one model's large ratio outweigh another's small one.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from src.compare.runs import CompareError, Measurement

# Precisions compared in one panel of the charts; each stays distinct in the tables.
PRECISION_GROUPS = {"fp32": "fp32", "tf32": "fp32", "amp": "mixed", "bf16": "mixed"}
GROUP_TITLES = {"fp32": "fp32 and tf32", "mixed": "mixed precision (amp, bf16)"}


def precision_group(precision: str) -> str:
    return PRECISION_GROUPS.get(precision, precision)


@dataclass
class RelativeRow:
    measurement: Measurement
    baseline: Measurement | None  # the baseline gpu's measurement this one is divided by

    @property
    def relative(self) -> float | None:
        return self.measurement.throughput / self.baseline.throughput if self.baseline else None


@dataclass
class SummaryRow:
    category: str
    precision: str
    gpu_count: int
    gpu: str
    source: str
    relative_mean: float
    relative_geomean: float
    models: tuple[str, ...]
    baselines: str  # which baseline measurements the ratios used, e.g. "fp32 [lambda]"

    @property
    def n_models(self) -> int:
        return len(self.models)


def find_baseline(
    measurement: Measurement, baselines: list[Measurement], baseline_source: str | None
) -> Measurement | None:
    """The baseline's measurement of the same model and GPU count.

    Same precision group always; then preferred: the row's own source (or `baseline_source`
    when set), then the same precision.
    """
    group = precision_group(measurement.precision)
    candidates = [
        b
        for b in baselines
        if b.model == measurement.model
        and b.gpu_count == measurement.gpu_count
        and precision_group(b.precision) == group
        and (baseline_source is None or b.source == baseline_source)
    ]
    return min(
        candidates,
        key=lambda b: (b.source != measurement.source, b.precision != measurement.precision, b.source),
        default=None,
    )


def relative_table(
    measurements: list[Measurement], baseline: str, baseline_source: str | None = None
) -> list[RelativeRow]:
    baselines = [m for m in measurements if m.gpu == baseline]
    return [RelativeRow(m, find_baseline(m, baselines, baseline_source)) for m in measurements]


def summarize(rows: list[RelativeRow]) -> list[SummaryRow]:
    """Per (category, precision, gpu count, gpu, source): mean and geomean of the model ratios."""
    groups: dict[tuple, list[RelativeRow]] = {}
    for row in rows:
        if row.relative is not None:
            m = row.measurement
            groups.setdefault((m.category, m.precision, m.gpu_count, m.gpu, m.source), []).append(row)
    summary = []
    for key in sorted(groups):
        members = groups[key]
        ratios = [r.relative for r in members]
        baselines = sorted({f"{r.baseline.precision} [{r.baseline.source}]" for r in members})
        summary.append(
            SummaryRow(
                *key,
                relative_mean=statistics.fmean(ratios),
                relative_geomean=math.exp(statistics.fmean(math.log(r) for r in ratios)),
                models=tuple(sorted(r.measurement.model for r in members)),
                baselines=", ".join(baselines),
            )
        )
    return summary


def check_comparable(measurements: list[Measurement], rows: list[RelativeRow], baseline: str) -> None:
    """Stop with what is missing when there is no baseline or nothing to set beside it."""
    if not measurements:
        raise CompareError(
            "nothing to compare: no FINISHED run with a throughput matches the filters "
            "(check tracking.uri, tracking.experiment, gpus, models, precisions, gpu_counts, sources)"
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
    return f"{m.model} x{m.gpu_count} {m.precision}"
