"""MLflow access: the store, the experiment, and writing one job's run. Only job processes call this."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

PARENT_RUN_FILE = "parent_run.json"  # in a sweep's folder: how jobs find their parent run


def prepare_store(uri: str) -> None:
    """Create the sqlite folder; the database itself is made by the first client call."""
    if uri.startswith("sqlite:///"):
        Path(uri.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)


def client(uri: str):
    from mlflow.tracking import MlflowClient

    prepare_store(uri)
    return MlflowClient(tracking_uri=uri)


def ensure_experiment(uri: str, name: str) -> str:
    """The experiment's id, created on first use with artifacts beside an sqlite store.

    Called once before any job of a sweep starts: concurrent first-time migrations of a fresh
    sqlite database fail, so parallel jobs must find it ready.
    """
    mlflow_client = client(uri)
    experiment = mlflow_client.get_experiment_by_name(name)
    if experiment is not None:
        return experiment.experiment_id
    artifact_location = None
    if uri.startswith("sqlite:///"):
        artifact_location = (Path(uri.removeprefix("sqlite:///")).parent / "artifacts").as_uri()
    return mlflow_client.create_experiment(name, artifact_location=artifact_location)


def flatten(cfg: DictConfig | dict, prefix: str = "") -> dict[str, Any]:
    data = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else cfg
    flat: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


class JobRun:
    """One job's MLflow run: opened before training, ended FINISHED, FAILED or KILLED."""

    def __init__(self, uri: str, experiment_id: str, name: str, tags: dict, parent_run_id: str | None):
        from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID

        self.client = client(uri)
        self.experiment_id = experiment_id
        if parent_run_id:
            tags = {**tags, MLFLOW_PARENT_RUN_ID: parent_run_id}
        run = self.client.create_run(experiment_id, run_name=name, tags={k: str(v) for k, v in tags.items()})
        self.run_id = run.info.run_id

    def log_params(self, params: dict) -> None:
        from mlflow.entities import Param

        self.client.log_batch(self.run_id, params=[Param(k, str(v)[:6000]) for k, v in params.items()])

    def log_metrics(self, metrics: dict, step: int = 0) -> None:
        now = _now_ms()
        self.log_series([(k, v, now, step) for k, v in metrics.items() if v is not None])

    def log_series(self, points: list[tuple[str, float, int, int]]) -> None:
        """(key, value, timestamp ms, step) points, sent in batches rather than one call each."""
        from mlflow.entities import Metric

        items = [Metric(k, float(v), stamp, step) for k, v, stamp, step in points]
        for i in range(0, len(items), 1000):  # MLflow takes at most 1000 metrics per batch
            self.client.log_batch(self.run_id, metrics=items[i : i + 1000])

    def single_gpu_baseline(self, tags: dict, params: dict) -> tuple[str, float] | None:
        """(run id, throughput) of the latest FINISHED 1-GPU run of this job's setup, if any.

        Same gpu, model, precision, benchmark, compile and channels_last tags and the same `params`
        (the per-GPU batch: scaling is judged at equal work per GPU).
        """
        keys = ("gpu", "model", "precision", "benchmark", "compile", "channels_last")
        filters = [f"tags.{k} = '{tags[k]}'" for k in keys]
        filters += ["tags.gpu_count = '1'", "attributes.status = 'FINISHED'"]
        filters += [f"params.`{k}` = '{v}'" for k, v in params.items()]
        runs = self.client.search_runs(
            [self.experiment_id],
            filter_string=" and ".join(filters),
            order_by=["attributes.start_time DESC"],
            max_results=1,
        )
        if not runs or "throughput" not in runs[0].data.metrics:
            return None
        return runs[0].info.run_id, runs[0].data.metrics["throughput"]

    def set_tags(self, tags: dict) -> None:
        from mlflow.entities import RunTag

        self.client.log_batch(self.run_id, tags=[RunTag(k, str(v)) for k, v in tags.items()])

    def log_text(self, text: str, name: str) -> None:
        self.client.log_text(self.run_id, text, name)

    def log_dict(self, data: Any, name: str) -> None:
        self.log_text(json.dumps(data, indent=2, default=str), name)

    def log_file(self, path: Path) -> None:
        self.client.log_artifact(self.run_id, str(path))

    def log_files(self, files: dict[str, str]) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            for name, text in files.items():
                (Path(tmp) / name).write_text(text)
            self.client.log_artifacts(self.run_id, tmp)

    def end(self, status: str) -> None:
        self.client.set_terminated(self.run_id, status)


def _now_ms() -> int:
    import time

    return int(time.time() * 1000)


def read_parent_run(sweep_dir: Path) -> str | None:
    path = sweep_dir / PARENT_RUN_FILE
    if path.exists():
        return json.loads(path.read_text())["run_id"]
    return None
