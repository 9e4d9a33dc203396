"""What the benchmark scripts share: run the suite's real command line and read its runs back."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_suite(args: list[str], store: Path, check: bool = True) -> float:
    """Run `python -m src.train ARGS` into the MLflow store at `store`; returns its wall time.

    Always with benchmark.rerun=true: a repeat must measure again, not resume the earlier run."""
    started = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "src.train",
            *args,
            f"tracking.uri={tracking_uri(store)}",
            f"hydra.run.dir={store}/run",
            f"hydra.sweep.dir={store}/sweep-{time.time_ns()}",
        ],
        cwd=ROOT,
        check=check,
    )
    return time.perf_counter() - started


def tracking_uri(store: Path) -> str:
    return f"sqlite:///{store}/mlflow.db"


def job_runs(store: Path, newest_first: bool = True):
    """All job runs (sweep parents left out) in the store."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri(store))
    exp = client.get_experiment_by_name("gpubench")
    order = "DESC" if newest_first else "ASC"
    runs = client.search_runs([exp.experiment_id], order_by=[f"attributes.start_time {order}"])
    return [r for r in runs if r.data.tags.get("sweep") != "true"]


def latest_throughput(store: Path) -> float:
    return job_runs(store)[0].data.metrics["throughput"]
