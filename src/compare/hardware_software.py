"""A ratio between two gpus on two software stacks, split into its hardware and software parts.

gpu X on stack B against baseline gpu Y on stack A is (X on B / X on A) x (X on A / Y on A), or
equally (X on B / Y on B) x (Y on B / Y on A): one more point, either X on the baseline's stack or
the baseline on X's, splits it. Where neither was run, the split names the runs that would make it.
"""

from __future__ import annotations

from src.compare.analysis import RelativeRow, same_workload
from src.compare.ratio import columns, quotient
from src.compare.runs import Measurement

CSV = "hardware_software.csv"
NAMED = ("model", "precision", "gpu_count", "gpu", "baseline_gpu", "relative", "stack_differs")  # the ratio
COLUMNS = (*NAMED, *columns("hardware", None), *columns("software", None), "via", "missing")


def _find(measurements: list[Measurement], like: Measurement, software: dict) -> Measurement | None:
    """`like`'s point on another software stack."""
    alike = (like.gpu, like.source, like.math, software)
    found = (m for m in measurements if (m.gpu, m.source, m.math, m.software) == alike)
    return next((m for m in found if same_workload(m, like)), None)


def records(rows: list[RelativeRow], measurements: list[Measurement]) -> list[dict]:
    """One record per cross-gpu ratio whose software stacks differ."""
    records = []
    for row in rows:
        m, base = row.measurement, row.baseline
        if base is None or m.gpu == base.gpu or not row.stack_differs:
            continue
        hardware = software = None
        via = missing = ""
        if (bridge := _find(measurements, m, base.software)) is not None:
            hardware, software = quotient(bridge, base), quotient(m, bridge)
            via = f"{m.gpu} on {base.gpu}'s stack (run {bridge.runs[0].run_id})"
        elif (bridge := _find(measurements, base, m.software)) is not None:
            hardware, software = quotient(m, bridge), quotient(bridge, base)
            via = f"{base.gpu} on {m.gpu}'s stack (run {bridge.runs[0].run_id})"
        else:
            missing = (
                f"run {m.gpu} {m.workload} {m.precision} x{m.gpu_count} on {_stack(base)}, "
                f"or {base.gpu} on {_stack(m)}"
            )
        named = (m.workload, m.precision, m.gpu_count, m.gpu, base.gpu, row.relative, row.stack_differs)
        parts = columns("hardware", hardware) | columns("software", software)
        records.append(dict(zip(NAMED, named, strict=True)) | parts | {"via": via, "missing": missing})
    return records


def _stack(m: Measurement) -> str:
    return " ".join(f"{k}={v}" for k, v in m.software.items()) or "its stack"
