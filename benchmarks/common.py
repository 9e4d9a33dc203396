"""What the benchmark scripts share: run the suite's real command line and read its runs back."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the suite's own modules, for every script that imports this one

from src.results import recorded  # noqa: E402


def suite_command(args: list[str], store: Path, rerun: bool = True) -> list[str]:
    """`python -m src.train ARGS` writing its runs and Hydra folders under `store`; run it from ROOT.

    With benchmark.rerun=true unless told otherwise: a repeat must measure again, not resume the
    earlier run."""
    return [
        sys.executable,
        "-m",
        "src.train",
        *args,
        *(["benchmark.rerun=true"] if rerun else []),
        f"tracking.uri={tracking_uri(store)}",
        f"hydra.run.dir={store}/run",
        f"hydra.sweep.dir={store}/sweep-{time.time_ns()}",
    ]


def run_suite(args: list[str], store: Path, check: bool = True) -> float:
    """Run `python -m src.train ARGS` into the MLflow store at `store`; returns its wall time."""
    started = time.perf_counter()
    subprocess.run(suite_command(args, store), cwd=ROOT, check=check)
    return time.perf_counter() - started


def tracking_uri(store: Path) -> str:
    return f"sqlite:///{store}/mlflow.db"


def store_runs(store: Path, newest_first: bool = True):
    """All runs in the store, sweep parents included, whatever their experiment."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri(store))
    experiments = [e.experiment_id for e in client.search_experiments()]
    order = "DESC" if newest_first else "ASC"
    return client.search_runs(experiments, order_by=[f"attributes.start_time {order}"])


def job_runs(store: Path, newest_first: bool = True):
    """All job runs (sweep parents left out) in the store."""
    return [r for r in store_runs(store, newest_first) if r.data.tags.get(recorded.SWEEP) != "true"]


def latest_throughput(store: Path) -> float:
    return job_runs(store)[0].data.metrics[recorded.THROUGHPUT]
