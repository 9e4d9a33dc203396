"""Relative throughput against a baseline, and category means as the seed study states them.

Lambda's A6000 vs 3090 article: per model, throughput over the baseline's at the same GPU count and
precision; per category, the arithmetic mean of those ratios. A gpu's mean averages the models it and
the baseline both have, so it never depends on which other gpus the store holds. Like math is set
against like math and like software against like software where the baseline has it; a ratio that
cannot be is flagged (`math_differs`, which leaves it out of the means, and `stack_differs`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from operator import attrgetter

from src.compare import charts
from src.compare.ratio import Ratio, describe, mean, quotient
from src.compare.report import Section, Table, ratio_columns
from src.compare.runs import (
    KINDS,
    MEASURED,
    CompareError,
    Measurement,
    alike,
    differing,
    grouped,
    unlike,
)
from src.results.recorded import THROUGHPUT

SERIES = ("category", "precision", "gpu_count", "gpu", "source")  # what names a category mean
MEANS = (
    *("category", "precision", "precision_group", "gpu_count", "gpu", "source"),
    *(*ratio_columns("relative_mean"), "interval", "difference", "flags", "n_models", "models"),
    *("models_left_out", "baselines"),
)
# what sets one model's points on a card apart, but its batch: a mean counts the one most like the others
SETTINGS = ("setting", "software", "card", "cap")
RELATIVE = (
    *("model", "variant", "category", "precision", "precision_group", "gpu_count", "gpu", "source"),
    *(THROUGHPUT, "unit", *ratio_columns("relative"), "interval", "difference", "flags", "stack_differs"),
    *("n_runs", "throughput_low", "throughput_high", "throughput_min", "throughput_max", "baseline_gpu"),
    *("baseline_precision", "baseline_source", "baseline_throughput", "scaling_efficiency", "per_watt"),
    *("per_watt_basis", "per_kusd", "anomalies", "stack", "run_ids"),
)
RELATIVE_SHOWN = (
    *("model", "variant", "precision", "gpu_count", "gpu", "source", THROUGHPUT, "unit", "n_runs"),
    *("relative", "baseline_precision", "baseline_source", "flags", "anomalies"),
)


@dataclass(frozen=True, kw_only=True)
class RelativeRow(Ratio):
    """A point over the baseline's: the ratio itself, its value None where there is no baseline."""

    measurement: Measurement
    baseline: Measurement | None = None  # the baseline's point this one is divided by

    @property
    def ratio(self):  # None: no baseline, no ratio
        return self if self.baseline else None


def relative_table(measurements, baseline, source=None, by=None):
    """Each point over the baseline's like point: the same model, GPU count, precision group and
    settings; preferred, in order, the same math (strict fp32 and TF32 are not alike), the row's own
    source (or `source` when set), the same stack, precision and batch. Flagged where the math or the
    stack differs (not against a published figure, whose stack is unknown: its source marks it). With
    by=, the card is part of the stack to match (by=torch must not set one card against another)."""
    baselines = [m for m in measurements if m.side == baseline and source in (None, m.source)]
    stack = ("software", "card") if by else ("software",)
    rows = []
    for m in measurements:
        base = alike(
            m,
            baselines,
            ("side",) if by else ("side", "gpu", "card"),
            ("math", "source", stack, "precision", "batch"),
        )
        if base is None:
            rows.append(RelativeRow(None, None, measurement=m))
            continue
        stacks = differing(m, base, stack) if m.source == base.source == MEASURED else ""
        r = quotient(m, base, math_differs={m.math, base.math} == {"fp32", "tf32"}, stack_differs=stacks)
        rows.append(RelativeRow(**vars(r), measurement=m, baseline=base))
    return rows


def scaling(measurements):
    """Point -> its throughput over gpu_count x that of the like point on one GPU."""
    singles = [m for m in measurements if m.gpu_count == 1]
    return {
        m.point: m.throughput / (m.gpu_count * one.throughput)
        for m in measurements
        if m.gpu_count > 1 and (one := alike(m, singles, ("gpu_count",)))
    }


def summarize(rows, baseline):
    """Per (category, precision, gpu count, side, source): the mean of the model ratios with its 95%
    interval, over the models the gpu and the baseline both have (so adding another gpu's runs moves
    nothing), the models left out and why; and the series that share no model with the baseline."""
    series = grouped(
        (attrgetter("category", "precision", "gpu_count", "side", "source")(r.measurement), r) for r in rows
    )
    summary, nothing_common = [], []
    for key, members_all in sorted(series.items()):
        members, set_aside = once_per_model([r for r in members_all if r.ratio and not r.math_differs])
        named = dict(zip(SERIES, key, strict=True))
        if not members:
            if any(r.baseline is None for r in members_all):
                nothing_common.append("{category} {precision} x{gpu_count} {gpu} [{source}]".format(**named))
            continue
        means = mean([r.ratio for r in members])
        models = sorted(r.measurement.workload for r in members)
        baselines = sorted({f"{r.baseline.precision} [{r.baseline.source}]" for r in members})
        summary.append(
            named
            | {
                "precision_group": members[0].measurement.precision_group,
                "relative_mean": means,
                "interval": "baseline" if named["gpu"] == baseline else describe(means.spread),
                "flags": " ".join(means.flags),
                "difference": means.difference,
                "n_models": len(models),
                "models": " ".join(models),
                "models_left_out": "; ".join(_left_out(members_all, set_aside, rows)),
                "baselines": ", ".join(baselines),
            }
        )
    return summary, sorted(nothing_common)


def once_per_model(rows):
    """A mean's ratios, each model once per card (with by=, a side spans cards): of a model's several
    points (compile on and off, two sizes, two caps), the one least unlike the other models' points in
    settings, stack and cap, the first on a tie; and the others, each with the one counted instead."""

    def apart(row):  # how unlike the other models' points it is in settings, stack and cap
        m = row.measurement
        return sum(
            unlike(m, r.measurement, KINDS, (SETTINGS,))[0] for r in rows if r.measurement.model != m.model
        )

    def model_on_card(row):
        return row.measurement.model, row.measurement.gpu

    chosen = {
        key: min(points, key=apart) for key, points in grouped((model_on_card(r), r) for r in rows).items()
    }
    return list(chosen.values()), [
        (r, chosen[model_on_card(r)]) for r in rows if r is not chosen[model_on_card(r)]
    ]


def _left_out(members, set_aside, rows):
    """The models of the gpu or of its baseline (the points its ratios were divided by, of the same
    category, GPU count, precision group and source) that its mean does not average, and why: the
    baseline has no run of it, the gpu has none, the ratio sets unlike math, or the mean counts
    another setting of the model."""
    reasons = {r.measurement.workload: "no baseline run" for r in members if r.baseline is None}
    reasons |= {r.measurement.workload: "math_differs" for r in members if r.math_differs}
    reasons |= {
        r.measurement.workload: f"other settings; the mean counts {kept.measurement.workload}"
        for r, kept in set_aside
    }
    first, ours = members[0].measurement, {r.measurement.model for r in members}
    used = {
        (b.side, b.source, b.precision, first.category, first.gpu_count) for r in members if (b := r.baseline)
    }
    reasons |= {
        m.workload: f"no {first.side} run"
        for m in (r.measurement for r in rows)
        if (m.side, m.source, m.precision, m.category, m.gpu_count) in used and m.model not in ours
    }
    by_reason = grouped((why, workload) for workload, why in sorted(reasons.items()))
    return [f"{', '.join(workloads)} ({why})" for why, workloads in by_reason.items()]


def check_comparable(measurements, rows, baseline, hint):
    """Stop with what is missing when there is no baseline or nothing to set beside it."""
    if not measurements:
        raise CompareError(
            "nothing to compare: no FINISHED run with a throughput matches the filters (check "
            f"tracking.uri, tracking.experiment, gpus, models, precisions, gpu_counts, sources); {hint}"
        )
    gpus = sorted({m.side for m in measurements})
    if baseline not in gpus:
        raise CompareError(
            f"baseline={baseline}: no FINISHED run of gpu {baseline!r} matches the filters; "
            f"gpus found: {', '.join(gpus)}"
        )
    if not any(r.ratio and r.measurement.side != baseline for r in rows):
        ours = [m for m in measurements if m.side == baseline]
        others = [m for m in measurements if m.side != baseline]
        apart = sorted(
            {f"{m.side} {_point(m)} ({why})" for m in others for b in ours if (why := _apart(m, b))}
        )
        if apart:
            raise CompareError(
                f"nothing to compare: no other gpu's point is like baseline={baseline}'s; these share its "
                f"model, gpu count and precision group but not its settings: {'; '.join(apart)}"
            )
        raise CompareError(
            f"nothing to compare: no other gpu shares a model, gpu count and precision group with "
            f"baseline={baseline}. Baseline has: {'; '.join(sorted({_point(m) for m in ours}))}. "
            f"Others have: {'; '.join(sorted({f'{m.side} {_point(m)}' for m in others})) or 'no runs'}"
        )


def _apart(one, base):
    """The settings that keep two points apart, told ('image_size 32 vs 224', a key one lacks at its
    default), where they share a model, gpu count and precision group; '' where they do not share
    those or no such setting differs. As the matcher holds them: a published figure logs no settings,
    so against one only those both logged count."""
    if any(one.keys[k] != base.keys[k] for k in ("model", "gpu_count", "precision_group")):
        return ""
    return differing(one, base, ("setting",), both_logged=not one.source == base.source == MEASURED)


def _point(m):
    return f"{m.workload} x{m.gpu_count} {m.precision}"


def sections(c, console, stated):
    """Category means and per-model ratios (report.md and the console show the baseline's own rows,
    1.0 by definition, in the CSVs only); `console`: the means printed too; `stated`: the study's
    figures the data gives otherwise (src/compare/study.marks), marked on the category chart."""
    per_model = [_relative_row(r, c.scaling, c.flagged) for r in c.rows]
    shown = [s for s in c.summary if s["gpu"] != c.baseline]
    point = (*SERIES, "relative_mean")
    title = f"Throughput relative to {c.baseline}, mean over the models each gpu and {c.baseline} both have"
    written, printed = (*point, "flags", "models", "models_left_out"), (*point, "n_models") if console else ()
    means = Table(
        c.summary, MEANS, "summary.csv", written, printed, heads=3, title=title if shown else "", read=shown
    )
    said = [
        f"Throughput relative to {c.baseline}: no category mean; no other gpu shares a model, GPU count, "
        f"precision and settings with {c.baseline}'s runs"
    ]
    if shown:
        left_out = grouped(  # (gpu, what its means leave out) -> those means: a line each, not one per mean
            (
                (f"{s['gpu']} [{s['source']}]", s["models_left_out"]),
                f"{s['category']} {s['precision']} x{s['gpu_count']}",
            )
            for s in shown
            if s["models_left_out"]
        )
        said = [f"{gpu}: left out of {', '.join(means)}: {why}" for (gpu, why), means in left_out.items()]
    relative = Table(per_model, RELATIVE, "relative_throughput.csv", RELATIVE_SHOWN)
    relative.read = [r for r in per_model if r["gpu"] != c.baseline]
    category = functools.partial(charts.category, c.summary, c.baseline, stated)
    return [
        Section("Category means", tables=[means], said=said if console else [], draw=category),
        Section(
            "Per model",
            tables=[relative],
            draw=functools.partial(charts.per_model, c.rows, c.baseline, c.flagged),
        ),
    ]


def _relative_row(row, efficiency, flagged):
    m, base = row.measurement, row.baseline
    low, high = m.interval or (None, None)
    # the ratio's own columns (difference, stack_differs), the point's, then those said otherwise
    return {name: getattr(row, name, getattr(m, name, None)) for name in RELATIVE} | {
        "gpu": m.side,
        "relative": row.ratio,
        "interval": describe(m.spread if base is None or base is m else row.spread),
        "flags": " ".join(row.flags),
        "throughput_low": low,
        "throughput_high": high,
        **{f"baseline_{name}": base and getattr(base, name) for name in ("precision", "source", THROUGHPUT)},
        "baseline_gpu": base and base.side,
        "scaling_efficiency": efficiency.get(m.point),
        "anomalies": " ".join(flagged.get(m.point, [])),
        "stack": " ".join(f"{k}={v}" for k, v in m.stack),
        "run_ids": " ".join(r.run_id for r in m.runs),
    }
