"""A run kept on disk while the tracking server cannot take it, and its delivery.

When the end of a job cannot reach the server, the job writes everything its run should hold
(tags, params, metrics with their timestamps, artifacts, final status) to `spool/` in its Hydra
job folder, then retries; `python -m src.sync` delivers whatever is still there later.

Delivery is idempotent, so a record sent twice still leaves one complete run: the run is found by
its id, or by its idempotency-key tag when the id never came back, and created only when neither
exists; params already there are skipped, MLflow drops metrics identical to ones it holds, tags and
artifacts overwrite, and ending a run again only restates its status.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from src.results import recorded
from src.tracking.credentials import bare

SPOOL_DIR = "spool"
RUN_FILE = "run.json"  # a job's run
PARENT_FILE = "parent.json"  # a sweep's parent run, ended once its children have arrived
ARTIFACTS_DIR = "artifacts"
# MLflow's per-request limits for log_batch
MAX_METRICS, MAX_PARAMS, MAX_TAGS = 1000, 100, 100


@dataclass
class SpooledRun:
    uri: str
    experiment: str
    run_name: str
    key: str
    start_time: int  # ms since the epoch, as MLflow stores it
    run_id: str | None = None
    parent_run_id: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)
    metrics: list[tuple[str, float, int, int]] = field(default_factory=list)  # key, value, ms, step
    texts: dict[str, str] = field(default_factory=dict)  # artifact name -> content
    files: list[str] = field(default_factory=list)  # paths logged as artifacts
    status: str | None = None
    end_time: int | None = None


def write(record: SpooledRun, folder: Path) -> Path:
    """Write the record and copies of its artifacts to `folder`; the JSON goes last, atomically."""
    _write_artifacts(folder / ARTIFACTS_DIR, record.texts, record.files)
    data = asdict(record) | {"texts": {}, "files": []}  # the artifacts now live in the folder
    tmp = folder / (RUN_FILE + ".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(folder / RUN_FILE)
    return folder


def load(folder: Path) -> SpooledRun:
    data = json.loads((folder / RUN_FILE).read_text())
    data["metrics"] = [tuple(m) for m in data["metrics"]]
    return SpooledRun(**data)


def deliver(client, folder: Path) -> str:
    """Upload the record in `folder` into its run; returns the run id. Safe to repeat."""
    from mlflow.entities import Metric, Param, RunTag

    record = load(folder)
    run = _find_or_create_run(client, record)
    run_id = run.info.run_id
    known = run.data.params
    log_batch(
        client,
        run_id,
        metrics=[Metric(*m) for m in record.metrics],
        params=[Param(k, v) for k, v in record.params.items() if k not in known],
        tags=[RunTag(k, v) for k, v in record.tags.items()],
    )
    if recorded.ERROR in run.data.tags and recorded.ERROR not in record.tags:
        # ended KILLED while its result waited here (its process had gone): the result says otherwise
        client.delete_tag(run_id, recorded.ERROR)
    artifacts = folder / ARTIFACTS_DIR
    if artifacts.is_dir() and any(artifacts.iterdir()):
        client.log_artifacts(run_id, str(artifacts))
    if record.status:
        client.set_terminated(run_id, record.status, end_time=record.end_time)
    return run_id


def log_batch(client, run_id: str, metrics=(), params=(), tags=()) -> None:
    """log_batch within MLflow's per-request limits."""
    metrics, params, tags = list(metrics), list(params), list(tags)
    while metrics or params or tags:
        client.log_batch(
            run_id, metrics=metrics[:MAX_METRICS], params=params[:MAX_PARAMS], tags=tags[:MAX_TAGS]
        )
        metrics, params, tags = metrics[MAX_METRICS:], params[MAX_PARAMS:], tags[MAX_TAGS:]


def log_artifacts(client, run_id: str, texts: dict[str, str], files: list[str]) -> None:
    """Texts (name -> content) and files as the run's artifacts, in one upload."""
    with tempfile.TemporaryDirectory() as folder:
        _write_artifacts(Path(folder), texts, files)
        client.log_artifacts(run_id, folder)


def _write_artifacts(folder: Path, texts: dict[str, str], files: list[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in texts.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)  # a name may hold a folder
        (folder / name).write_text(text)
    for path in files:
        shutil.copy2(path, folder / Path(path).name)


def _find_or_create_run(client, record: SpooledRun):
    from mlflow.exceptions import MlflowException
    from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID

    if record.run_id:
        try:
            return client.get_run(record.run_id)
        except MlflowException as exc:
            if exc.error_code != "RESOURCE_DOES_NOT_EXIST":
                raise
    experiment = client.get_experiment_by_name(record.experiment)
    if experiment is not None:
        found = client.search_runs(
            [experiment.experiment_id],
            filter_string=f"tags.`{recorded.IDEMPOTENCY_KEY}` = '{record.key}'",
            max_results=1,
        )
        if found:
            return found[0]
        experiment_id = experiment.experiment_id
    else:
        experiment_id = client.create_experiment(record.experiment)
    tags = {**record.tags, recorded.IDEMPOTENCY_KEY: record.key}
    if record.parent_run_id:
        tags[MLFLOW_PARENT_RUN_ID] = record.parent_run_id
    return client.create_run(experiment_id, start_time=record.start_time, tags=tags, run_name=record.run_name)


def write_parent(folder: Path, uri: str, run_id: str, interrupted: bool) -> Path:
    """Remember a sweep's parent run that could not be ended; sync ends it after its children."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / PARENT_FILE).write_text(json.dumps({"uri": bare(uri), "run_id": run_id, "interrupted": interrupted}))
    return folder


def pending(roots: list[Path]) -> tuple[list[Path], list[Path]]:
    """Spool folders under `roots`: (jobs' runs, sweeps' parent runs)."""
    runs, parents = [], []
    for root in roots:
        runs += sorted(p.parent for p in root.rglob(f"{SPOOL_DIR}/{RUN_FILE}"))
        parents += sorted(p.parent for p in root.rglob(f"{SPOOL_DIR}/{PARENT_FILE}"))
    return runs, parents


def remove(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
