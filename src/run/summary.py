"""The sweep summary's rows: one per point of the sweep, named by its own point, with its flags.

A row's name is its run name (`h200x1-resnet50-amp`), and where rows share one (a setting swept,
repeats of a point) what tells them apart: `[compile=True]`, `#2` for repeat 2. Its flags say what
a reader of its figure must know: measured beside another program, or short of its stopping rule.
"""

from __future__ import annotations

from collections import defaultdict

from src.config import points
from src.results import recorded, run_result

REPEAT = "benchmark.repeat"


def run_row(run, status: str, note: str, name: str = "") -> dict:
    """A run's row; `name`: the point's own run name where the run is another point's (a skip)."""
    result = run_result.read(run)
    return {
        "name": name or result.name,
        "status": status,
        recorded.THROUGHPUT: result.throughput,
        "unit": result.unit if recorded.UNIT in result.tags else "",
        recorded.STEP_TIME_MS: result.window.step_time_ms,
        "error": note.splitlines()[0] if note else "",
        "start": result.started_ms,
        "point": dict(points.point_config(result.params, result.tags)),
        "repeat": int(result.params.get(REPEAT, 0)),
        "flags": flags(result),
    }


def flags(result: run_result.RunResult) -> dict[str, str]:
    """Short word -> what it means for this run's figure."""
    found = {}
    if result.foreign:
        found["shared"] = f"GPU shared with {result.foreign}"
    if result.missed:
        found["missed"] = f"stopped at {result.missed}"
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
