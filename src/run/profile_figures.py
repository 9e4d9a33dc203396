"""The job process's side of the step-time breakdown (src/rank/step_profiler.py): combine the ranks'
shares into src/results/recorded.py's `Breakdown` (which names its metrics), split the step by what bounds
it on its own card (`bounded`), and write top_kernels.csv and the counted ops (recorded.OP_COUNTS)."""

from __future__ import annotations

import csv
import io
import json
import statistics
from dataclasses import replace

from src.projection.counts import OpCounts
from src.projection.model import Card, ProjectionRefused, SourcePoint, figures, project
from src.results import recorded
from src.results.reports import RankReport

CATEGORIES = recorded.SHARES
KERNEL_COLUMNS = ("kernel", "category", "calls", "total_ms", "share_of_span")
BOUND_PARTS = dict(zip(("tensor-bound", "bandwidth-bound", "clock-bound"), recorded.BOUNDS, strict=True))


def combine(ranks: list[RankReport]) -> tuple[recorded.Breakdown | None, list[dict] | None]:
    """The mean share over ranks; time per profiled step and the cost (in all, and each phase's):
    the slowest rank's; the top kernels and the counted ops: rank 0's. (None, None) when the
    breakdown was off."""
    found = [r.breakdown for r in sorted(ranks, key=lambda r: r.rank) if r.breakdown]
    if not found:
        return None, None
    combined = recorded.Breakdown(
        shares={c: statistics.fmean(b["shares"][c] for b in found) for c in CATEGORIES},
        steps=found[0]["steps"],
        step_ms=max(b["step_ms"] for b in found),
        seconds=max(sum(b["phase_seconds"].values()) for b in found),
        phase_seconds={p: max(b["phase_seconds"][p] for b in found) for p in found[0]["phase_seconds"]},
        counts=found[0].get("op_counts"),
    )
    return combined, found[0]["top_kernels"]


def bounded(
    found: recorded.Breakdown, measured: recorded.Window, gpu: dict, precision: dict
) -> recorded.Breakdown:
    """The breakdown with the step's shares that are tensor-, bandwidth- and clock-bound on this card
    (its profile's figures: measured where it states them, else spec), the arithmetic a projection
    does (src/projection/model.py). As it was without counted ops or a profile with the figures."""
    if not (found.counts and measured.throughput and measured.batch_size):
        return found
    try:
        card = figures(Card.from_profile(gpu))
    except ProjectionRefused:  # a profile without a spec sheet (gpu=cpu): nothing to split against
        return found
    if card.card.runs_math(precision["peak_key"]) is None:
        return found
    point = SourcePoint(
        label=gpu["name"],
        gpu=gpu["name"],
        model="",
        precision=precision["name"],
        math=precision["peak_key"],
        gpu_count=1,
        batch=measured.batch_size,
        throughput=measured.throughput,
        interval=None,
        shares=found.shares,
        flops_per_item=None,
        memory_gb=None,
        run_ids=(),
        remeasure="",
        counts=OpCounts.from_json(found.counts),
        tf32=precision["allow_tf32"],
        items_per_step=measured.items_per_step,
    )
    factors = project(point, card, card, model_error=0.0).factors
    return replace(found, bounds={BOUND_PARTS[f.part]: f.share for f in factors if f.part in BOUND_PARTS})


def files(top_kernels: list[dict] | None, found: recorded.Breakdown | None = None) -> dict[str, str]:
    if top_kernels is None:
        return {}
    out = io.StringIO()
    writer = csv.DictWriter(out, KERNEL_COLUMNS)
    writer.writeheader()
    for row in top_kernels:
        writer.writerow(
            row | {"total_ms": f"{row['total_ms']:.4f}", "share_of_span": f"{row['share_of_span']:.4f}"}
        )
    counted = {recorded.OP_COUNTS: json.dumps(found.counts)} if found and found.counts else {}
    return {"top_kernels.csv": out.getvalue()} | counted
