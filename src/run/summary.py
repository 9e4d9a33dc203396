"""The sweep summary's rows: one per point of the sweep, named by its own point, with its flags.

A row's name is its run name (`h200x1-resnet50-amp`), and where rows share one (a setting swept,
repeats of a point) what tells them apart: `[compile=True]`, `#2` for repeat 2. Its flags say what
a reader of its figure must know: measured beside another program, or short of its stopping rule.
"""

from __future__ import annotations

from collections import defaultdict

from src.config import points
from src.stats import rule_missed
from src.tracking import tags as tag

REPEAT = "benchmark.repeat"


def run_row(run, status: str, note: str, name: str = "") -> dict:
    """A run's row; `name`: the point's own run name where the run is another point's (a skip)."""
    params, tags = run.data.params, run.data.tags
    return {
        "name": name or run.info.run_name,
        "status": status,
        "throughput": run.data.metrics.get("throughput"),
        "unit": tags.get(tag.UNIT, ""),
        "step_time_ms": run.data.metrics.get("step_time_ms"),
        "error": note.splitlines()[0] if note else "",
        "start": run.info.start_time,
        "point": dict(points.point_config(params, tags)),
        "repeat": int(params.get(REPEAT, 0)),
        "flags": flags(run),
    }


def flags(run) -> dict[str, str]:
    """Short word -> what it means for this run's figure."""
    tags, params, metrics = run.data.tags, run.data.params, run.data.metrics
    found = {}
    if shared := tags.get(tag.GPU_FOREIGN_PROCESSES):
        found["shared"] = f"GPU shared with {shared}"
    steps = metrics.get("measured_steps")
    missed = rule_missed(
        tags.get(tag.STOP_REASON),
        None if steps is None else int(steps),
        int(params.get("benchmark.min_steps", 0)),
        metrics.get("step_time_ci95_rel"),
        float(params["benchmark.target_ci"]) if "benchmark.target_ci" in params else None,
    )
    if missed:
        found["missed"] = f"stopped at {missed}"
    return found


def tell_apart(rows: list[dict]) -> list[dict]:
    """Set each run row's `variant`: what differs from the rows of the same run name (the measured
    keys by their labels, then the repeat); '' where nothing does."""
    groups = defaultdict(list)
    for row in rows:
        if "point" in row:
            groups[row["name"]].append(row)
    for group in groups.values():
        keys = sorted({key for row in group for key in row["point"]})
        differ = [k for k in keys if len({row["point"].get(k) for row in group}) > 1]
        repeats = {row["repeat"] for row in group}
        for row in group:
            settings = ", ".join(f"{points.label(k)}={row['point'].get(k)}" for k in differ)
            repeat = f"#{row['repeat']}" if len(repeats) > 1 or row["repeat"] else ""
            row["variant"] = " ".join(part for part in (settings and f"[{settings}]", repeat) if part)
    return rows
