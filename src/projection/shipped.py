"""The project's own measured points, shipped with it (reference/measured/): read as runs, by the same
reader as the store's (src/results/run_result.py), with each training run's counted ops.

So a host without a GPU, or a store without runs of a card, still has points to project: compare's
`project=[...]` and benchmarks/projection_check.py read them where the store has none to project.
reference/measured/README.md says where each file was measured.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from src.paths import PROJECT_ROOT
from src.projection.counts import OpCounts
from src.results import run_result

SHIPPED = PROJECT_ROOT / "reference" / "measured"  # each file one set of runs; its README says where each ran


@dataclass(frozen=True)
class _Info:
    run_id: str
    run_name: str
    status: str = "FINISHED"
    start_time: int = 0


@dataclass(frozen=True)
class _Data:
    tags: dict
    metrics: dict
    params: dict


@dataclass(frozen=True)
class _Run:
    """What run_result.read reads of an MLflow run."""

    info: _Info
    data: _Data


@dataclass(frozen=True)
class Shipped:
    path: Path
    runs: tuple[run_result.RunResult, ...]
    counts: dict[str, OpCounts]  # run id -> its step's ops

    @property
    def name(self) -> str:
        return str(self.path.relative_to(PROJECT_ROOT))


@cache
def read(path: Path = SHIPPED) -> Shipped:
    """The shipped runs of a file, or of every file of a folder, each with the id `<file stem>/<run name>`."""
    runs, counts = [], {}
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    for file in files:
        for name, run in json.loads(file.read_text())["runs"].items():
            run_id = f"{file.stem}/{name}"
            started = int(float(run["tags"].get("owner.started", 0)) * 1000)
            info = _Info(run_id, name, start_time=started)
            runs.append(run_result.read(_Run(info, _Data(run["tags"], run["metrics"], run["params"]))))
            if "op_counts" in run:
                counts[run_id] = OpCounts.from_json(run["op_counts"])
    return Shipped(path, tuple(runs), counts)
