"""The job process's side of the step-time breakdown (src/rank/breakdown.py): combine the ranks'
shares into src/recorded.py's `Breakdown` (which names its metrics), and top_kernels.csv."""

from __future__ import annotations

import csv
import io
import statistics

from src import recorded
from src.reports import RankReport

CATEGORIES = recorded.SHARES
KERNEL_COLUMNS = ("kernel", "category", "calls", "total_ms", "share_of_span")


def combine(ranks: list[RankReport]) -> tuple[recorded.Breakdown | None, list[dict] | None]:
    """The mean share over ranks; time per profiled step and the cost (in all, and each phase's):
    the slowest rank's; the top kernels: rank 0's. (None, None) when the breakdown was off."""
    found = [r.breakdown for r in sorted(ranks, key=lambda r: r.rank) if r.breakdown]
    if not found:
        return None, None
    combined = recorded.Breakdown(
        shares={c: statistics.fmean(b["shares"][c] for b in found) for c in CATEGORIES},
        steps=found[0]["steps"],
        step_ms=max(b["step_ms"] for b in found),
        seconds=max(sum(b["phase_seconds"].values()) for b in found),
        phase_seconds={p: max(b["phase_seconds"][p] for b in found) for p in found[0]["phase_seconds"]},
    )
    return combined, found[0]["top_kernels"]


def files(top_kernels: list[dict] | None) -> dict[str, str]:
    if top_kernels is None:
        return {}
    out = io.StringIO()
    writer = csv.DictWriter(out, KERNEL_COLUMNS)
    writer.writeheader()
    for row in top_kernels:
        writer.writerow(
            row | {"total_ms": f"{row['total_ms']:.4f}", "share_of_span": f"{row['share_of_span']:.4f}"}
        )
    return {"top_kernels.csv": out.getvalue()}
