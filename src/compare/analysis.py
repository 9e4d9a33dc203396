"""Relative throughput against a baseline gpu, and category means as the seed study states them.

Lambda's A6000 vs 3090 article: per model, throughput over the baseline's at the same GPU count and
precision; per category, the arithmetic mean of those ratios. The geometric mean is given too: it
does not let one model's large ratio outweigh another's small one. A category mean averages only
the models that every gpu of its (category, precision group, GPU count) has, so means set side by
side are over the same models.
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
    models: tuple[str, ...]  # the models averaged: those every gpu of the group has
    left_out: tuple[str, ...]  # this gpu's models that some other gpu of the group lacks
    baselines: str  # which baseline measurements the ratios used, e.g. "fp32 [lambda]"

    @property
    def n_models(self) -> int:
        return len(self.models)


def find_baseline(
    measurement: Measurement, baselines: list[Measurement], baseline_source: str | None
) -> Measurement | None:
    """The baseline's measurement of the same model, sizes, settings and GPU count.

    Same precision group always; the per-GPU batch may differ (gpu profiles size it by memory, as
    Lambda did) and a published figure, which logs no sizes, stands for its model as published.
    Preferred: the row's own source (or `baseline_source` when set), the same precision, the same
    batch.
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
            b.source != measurement.source,
            b.precision != measurement.precision,
            b.config != measurement.config,
            b.source,
        ),
        default=None,
    )


def same_workload(one: tuple, other: tuple) -> bool:
    """The keys both configs have agree, the per-GPU batch aside."""
    a, b = dict(one), dict(other)
    return all(a[k] == b[k] for k in a.keys() & b.keys() if k != "batch_size")


def relative_table(
    measurements: list[Measurement], baseline: str, baseline_source: str | None = None
) -> list[RelativeRow]:
    baselines = [m for m in measurements if m.gpu == baseline]
    return [RelativeRow(m, find_baseline(m, baselines, baseline_source)) for m in measurements]


def summarize(rows: list[RelativeRow]) -> tuple[list[SummaryRow], list[str]]:
    """Per (category, precision, gpu count, gpu, source): mean and geomean of the model ratios,
    over the models every gpu of its (category, precision group, gpu count) has.

    Also returns the series that share no model with the rest of their group (no mean for them).
    """
    groups: dict[tuple, dict[tuple, dict[str, RelativeRow]]] = {}
    for row in rows:
        if row.relative is not None:
            m = row.measurement
            group = groups.setdefault((m.category, precision_group(m.precision), m.gpu_count), {})
            group.setdefault((m.precision, m.gpu, m.source), {})[m.workload] = row
    summary, nothing_common = [], []
    for (category, _, count), series in groups.items():
        common = set.intersection(*(set(models) for models in series.values()))
        for (precision, gpu, source), models in series.items():
            members = [row for workload, row in models.items() if workload in common]
            if not members:
                nothing_common.append(f"{category} {precision} x{count} {gpu} [{source}]")
                continue
            ratios = [r.relative for r in members]
            summary.append(
                SummaryRow(
                    category,
                    precision,
                    count,
                    gpu,
                    source,
                    relative_mean=statistics.fmean(ratios),
                    relative_geomean=math.exp(statistics.fmean(math.log(r) for r in ratios)),
                    models=tuple(sorted(common)),
                    left_out=tuple(sorted(set(models) - common)),
                    baselines=", ".join(
                        sorted({f"{r.baseline.precision} [{r.baseline.source}]" for r in members})
                    ),
                )
            )
    summary.sort(key=lambda s: (s.category, s.precision, s.gpu_count, s.gpu, s.source))
    return summary, sorted(nothing_common)


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
    return f"{m.workload} x{m.gpu_count} {m.precision}"
