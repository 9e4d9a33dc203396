"""A ratio between two gpus on two software stacks, split into its hardware and software parts.

gpu X on stack B against baseline gpu Y on stack A is (X on B / X on A) x (X on A / Y on A), or
equally (X on B / Y on B) x (Y on B / Y on A): one more point, either X on the baseline's stack or
the baseline on X's, splits it. Where neither was run, the split names the runs that would make it.
"""

from __future__ import annotations

from src.compare.ratio import quotient
from src.compare.report import Section, Table, ratio_columns
from src.compare.runs import alike

COLUMNS = (
    *("model", "precision", "gpu_count", "gpu", "baseline_gpu", "relative", "stack_differs"),
    *ratio_columns("hardware"),
    *ratio_columns("software"),
    *("via", "missing"),
)


def _on_stack(like, measurements, software):
    """`like`'s point on another software stack."""
    return alike(
        like, [m for m in measurements if m.software == software], ("software", "card", "batch", "precision")
    )


def section(rows, measurements):
    """One row per cross-gpu ratio whose software stacks differ (GPU comparisons only)."""
    found = []
    for row in rows:
        m, base = row.measurement, row.baseline
        if not row.stack_differs or m.gpu == base.gpu:
            continue
        split = {"model": m.workload, "precision": m.precision, "gpu_count": m.gpu_count, "gpu": m.gpu}
        split |= {"baseline_gpu": base.gpu, "relative": row.value, "stack_differs": row.stack_differs}
        if bridge := _on_stack(m, measurements, base.software):
            split |= {"hardware": quotient(bridge, base), "software": quotient(m, bridge)}
            split["via"] = f"{m.gpu} on {base.gpu}'s stack (run {bridge.runs[0].run_id})"
        elif bridge := _on_stack(base, measurements, m.software):
            split |= {"hardware": quotient(m, bridge), "software": quotient(bridge, base)}
            split["via"] = f"{base.gpu} on {m.gpu}'s stack (run {bridge.runs[0].run_id})"
        else:
            split["missing"] = (
                f"run {m.gpu} {m.workload} {m.precision} x{m.gpu_count} on {_stack(base)}, "
                f"or {base.gpu} on {_stack(m)}"
            )
        found.append(split)
    if not found:
        return []
    shown = tuple(c for c in COLUMNS if not c.endswith(("_low", "_high")))
    table = Table(found, COLUMNS, "hardware_software.csv", shown)
    return [Section("Hardware and software parts of cross-stack ratios", tables=[table])]


def _stack(m):
    return " ".join(f"{k}={v}" for k, v in m.software.items()) or "its stack"
