"""Commands that run at the same time on one host and one store: each keeps its own folder, files
and results; a new store is created once; a GPU measures one job at a time.

The processes are started in the same second on purpose: Hydra's `now` is frozen for all of them
(tests/frozen_now.py), which is what two commands started in the same second see.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from conftest import read_runs
from omegaconf import OmegaConf

from src.paths import PROJECT_ROOT

TINY = ["gpu=cpu", "benchmark=smoke", "model=resnet50", "model.builder=tests.workloads:by_name"]
FROZEN_NOW = PROJECT_ROOT / "tests" / "frozen_now.py"
HYDRA_DIRS = OmegaConf.load(PROJECT_ROOT / "conf" / "config.yaml").hydra


class SameSecond:
    """`python -m MODULE ARGS` with Hydra's `now` frozen (tests/frozen_now.py), and the project's
    own folder pattern (conf/config.yaml) rooted in `tmp` instead of the project."""

    def __init__(
        self, args: list[str], tmp: Path, uri: str, module: str = "src.train", env: dict | None = None
    ):
        dirs = []
        if module == "src.train":
            for key in ("run", "sweep"):
                pattern = HYDRA_DIRS[key]._get_node("dir")._value().replace("${project_root:}", str(tmp))
                dirs.append(f"hydra.{key}.dir='{pattern}'")
        self.log = tmp / f"{module}-{time.monotonic_ns()}.log"
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen(
                [sys.executable, str(FROZEN_NOW), module, *args, f"tracking.uri={uri}", *dirs],
                cwd=PROJECT_ROOT,
                env={**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200", **(env or {})},
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def wait(self, timeout: float = 600) -> int:
        return self.proc.wait(timeout)

    @property
    def output(self) -> str:
        return self.log.read_text()


def test_jobs_and_sweeps_started_in_the_same_second_keep_their_own_results(tmp_path):
    uri = f"sqlite:///{tmp_path}/mlruns/mlflow.db"
    from src.tracking import store

    store.ensure_experiment(uri, "gpubench")  # the store exists: only the folders race here
    clis = [
        SameSecond([*TINY, "model.name=tiny", "model.batch_size=3"], tmp_path, uri),
        SameSecond([*TINY, "model.name=tiny", "model.batch_size=8"], tmp_path, uri),
        SameSecond(["-m", *TINY, "model.name=tiny", "model.batch_size=5"], tmp_path, uri),
        SameSecond(["-m", *TINY, "model.name=tiny", "model.batch_size=6"], tmp_path, uri),
    ]
    for cli in clis:
        assert cli.wait() == 0, cli.output[-3000:]
    runs = read_runs(uri)
    jobs = [r for r in runs if r.data.tags.get("sweep") != "true"]
    assert sorted(int(r.data.params["model.batch_size"]) for r in jobs) == [3, 5, 6, 8]
    for run in jobs:  # each run measured its own batch, not its neighbour's
        assert run.data.metrics["batch_size"] == int(run.data.params["model.batch_size"])
    parents = {r.info.run_id: r for r in runs if r.data.tags.get("sweep") == "true"}
    assert len(parents) == 2 and all(p.info.status == "FINISHED" for p in parents.values())
    children = sorted(
        int(r.data.params["model.batch_size"]) for r in jobs if r.data.tags.get("mlflow.parentRunId")
    )
    assert children == [5, 6]
    assert (
        len({r.data.tags["mlflow.parentRunId"] for r in jobs if r.data.tags.get("mlflow.parentRunId")}) == 2
    )
    singles = sorted((tmp_path / "multirun" / "single").glob("*/*"))
    sweeps = sorted(p for p in (tmp_path / "multirun").glob("*/*") if p.parent.name != "single")
    assert len(singles) == 2 and len(sweeps) == 2, (singles, sweeps)
