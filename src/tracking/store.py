"""MLflow access: the client, the store, the experiment, retries. Only job processes and entry points call this."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from src.errors import TrackingUnavailable, first_line
from src.paths import sqlite_path

# Tags that say how a job ran, beyond what it ran (gpu, model, precision): compare flags repeats
# that differ in them.
SETTING_TAGS = ("benchmark", "compile", "channels_last", "cudnn_benchmark")

PARENT_RUN_FILE = "parent_run.json"  # in a sweep's folder: how jobs find their parent run
# Fail fast per HTTP request (MLflow's default retries for minutes): the job keeps its result on
# disk and retries delivery itself. A user's own settings win.
HTTP_DEFAULTS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "30",
}
START_ATTEMPTS, START_BACKOFF_S = 3, 1.0


def prepare_store(uri: str) -> None:
    """Create the sqlite folder; the database itself is made by the first client call."""
    database = sqlite_path(uri)
    if database is not None:
        database.parent.mkdir(parents=True, exist_ok=True)


def client(uri: str):
    from mlflow.tracking import MlflowClient

    for key, value in HTTP_DEFAULTS.items():
        os.environ.setdefault(key, value)
    prepare_store(uri)
    return MlflowClient(tracking_uri=uri)


def ensure_experiment(uri: str, name: str) -> str:
    """The experiment's id, created on first use with artifacts beside an sqlite store.

    Called once before any job of a sweep starts: concurrent first-time migrations of a fresh
    sqlite database fail, so parallel jobs must find it ready.
    """
    mlflow_client = client(uri)
    experiment = at_start(lambda: mlflow_client.get_experiment_by_name(name), uri)
    if experiment is not None:
        return experiment.experiment_id
    database = sqlite_path(uri)
    artifact_location = (database.parent / "artifacts").as_uri() if database is not None else None

    def create_or_find() -> str:
        from mlflow.exceptions import MlflowException

        try:
            return mlflow_client.create_experiment(name, artifact_location=artifact_location)
        except MlflowException as exc:
            if exc.error_code != "RESOURCE_ALREADY_EXISTS":
                raise
            # another sweep created it since we looked (two workstations starting on one server)
            return mlflow_client.get_experiment_by_name(name).experiment_id

    return at_start(create_or_find, uri)


def retry(action, attempts: int, backoff_s: float):
    """Call `action` up to `attempts` times, sleeping backoff_s, 2 x backoff_s, ... in between."""
    for attempt in range(attempts):
        try:
            return action()
        except Exception:
            if attempt == attempts - 1:
                raise
            time.sleep(backoff_s * 2**attempt)


def at_start(action, uri: str):
    """A call made before any work: retried briefly (sqlite locks), then a clear error."""
    try:
        return retry(action, START_ATTEMPTS, START_BACKOFF_S)
    except Exception as exc:
        raise TrackingUnavailable(
            f"tracking.uri={uri!r}: the tracking store cannot be reached ({first_line(exc)}); nothing was run"
        ) from None


def read_parent_run(sweep_dir: Path) -> str | None:
    path = sweep_dir / PARENT_RUN_FILE
    if path.exists():
        return json.loads(path.read_text())["run_id"]
    return None
