"""One job's MLflow run, written as the job goes and kept whole in a record for the spool."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from src import console
from src.errors import first_line
from src.results import recorded
from src.tracking import credentials, owner, spool
from src.tracking.store import at_start, away, client, retry

# What every backend MLflow supports takes (MLflow 3.17: mlflow/utils/validation.py and the columns of
# mlflow/store/tracking/dbmodels/models.py): a tag value is a varchar(8000) in PostgreSQL and MySQL
# (sqlite keeps anything, so only a team's server finds out), a param value longer than 6,000
# characters is refused (its column holds 8,000), a run's name is a varchar(250).
TAG_VALUE_MAX, PARAM_VALUE_MAX, RUN_NAME_MAX = 8000, 6000, 250
LONG_VALUES_DIR = "long_values"  # the whole of each value cut to fit: long_values/{tags,params}/KEY.txt


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
    """One job's MLflow run (or any other run gpubench writes): opened before training, tagged with
    its owner (src/tracking/owner.py), ended FINISHED, FAILED or KILLED.

    What is logged is held until `flush()` or `end()`, which send it in one log_batch and one
    artifact upload: a job writes twice (its set-up before training, its result after), not once
    per metric, tag group or file. Everything logged is also kept in a SpooledRun. If the server
    stops answering during the job, logging carries on into the record only; at the end the record
    is written to the job's spool folder and delivered with retries, and what is still undelivered
    waits for `python -m src.sync`.
    Every string passes through credentials.redact on its way in.
    """

    def __init__(
        self,
        tracking_cfg,
        experiment_id: str,
        name: str,
        tags: dict,
        parent_run_id: str | None = None,
        spool_dir: Path | None = None,
    ):
        from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID

        self.client = client(tracking_cfg.uri)
        self.experiment_id = experiment_id
        self.spool_dir, self.retries, self.backoff_s = spool_dir, tracking_cfg.retries, tracking_cfg.backoff_s
        name = name[:RUN_NAME_MAX]
        self.record = spool.SpooledRun(
            uri=credentials.bare(tracking_cfg.uri),  # a database's password stays in memory
            experiment=tracking_cfg.experiment,
            run_name=name,
            key=uuid.uuid4().hex,
            start_time=_now_ms(),
            parent_run_id=parent_run_id,
        )
        self.online = True
        self._pending = _Pending()
        self.spooled: Path | None = None  # the folder holding the result that the store did not take
        owner.close_vanished_once(tracking_cfg.uri)
        tags = {
            **tags,
            **owner.tags(),  # a process killed outright leaves it RUNNING: the next command ends it
            recorded.SCHEMA: str(recorded.SCHEMA_VERSION),
            recorded.IDEMPOTENCY_KEY: self.record.key,
        }
        if parent_run_id:
            tags[MLFLOW_PARENT_RUN_ID] = parent_run_id
        tags = self._fit(tags, TAG_VALUE_MAX, "tags")
        self.record.tags.update(tags)
        run = at_start(
            lambda: self.client.create_run(
                experiment_id, start_time=self.record.start_time, run_name=name, tags=tags
            ),
            tracking_cfg.uri,
        )
        self.run_id = self.record.run_id = run.info.run_id

    def _send(self, action) -> None:
        """Send now while the server answers; after the first failure, only keep the record.

        Without a spool folder (one-off commands such as compare) a failed call raises instead.
        """
        if self.spool_dir is None:
            action()
            return
        if not self.online:
            return
        try:
            action()
        except Exception as exc:
            self.online = False
            console.warning(
                f"tracking unreachable ({away(exc) or first_line(exc)}): the run goes on; its result is kept in "
                f"{self.spool_dir} until the server takes it"
            )

    def _fit(self, values: dict, limit: int, kind: str) -> dict[str, str]:
        """`values` redacted, each cut to `limit` characters; the whole of a cut one is logged as the
        artifact its cut value names."""
        fitted, whole = fit(_clean(values), limit, kind)
        self.log_files(whole)
        return fitted

    def log_params(self, params: dict) -> None:
        params = self._fit(params, PARAM_VALUE_MAX, "params")
        self.record.params.update(params)
        self._pending.params.update(params)

    def log_metrics(self, metrics: dict, step: int = 0) -> None:
        now = _now_ms()
        self.log_series([(k, v, now, step) for k, v in metrics.items() if v is not None])

    def log_series(self, points: list[tuple[str, float, int, int]]) -> None:
        """(key, value, timestamp ms, step) points."""
        items = [(k, float(v), stamp, step) for k, v, stamp, step in points]
        self.record.metrics += items
        self._pending.metrics += items

    def set_tags(self, tags: dict) -> None:
        tags = self._fit(tags, TAG_VALUE_MAX, "tags")
        self.record.tags.update(tags)
        self._pending.tags.update(tags)

    def log_text(self, text: str, name: str) -> None:
        text = credentials.redact(text)
        self.record.texts[name] = text
        self._pending.texts[name] = text

    def log_dict(self, data: Any, name: str) -> None:
        self.log_text(json.dumps(data, indent=2, default=str), name)

    def log_file(self, path: Path) -> None:
        self.record.files.append(str(path))
        self._pending.files.append(str(path))

    def log_files(self, files: dict[str, str]) -> None:
        for name, text in files.items():
            self.log_text(text, name)

    def flush(self) -> None:
        """Send what was logged since the last flush: one log_batch, one artifact upload."""
        from mlflow.entities import Metric, Param, RunTag

        pending, self._pending = self._pending, _Pending()
        if pending.metrics or pending.params or pending.tags:
            self._send(
                lambda: spool.log_batch(
                    self.client,
                    self.run_id,
                    metrics=[Metric(*m) for m in pending.metrics],
                    params=[Param(*p) for p in pending.params.items()],
                    tags=[RunTag(*t) for t in pending.tags.items()],
                )
            )
        if pending.texts or pending.files:
            self._send(lambda: spool.log_artifacts(self.client, self.run_id, pending.texts, pending.files))

    def end(self, status: str) -> None:
        """Send what is pending and end the run; if the server is away, spool the whole record and
        retry with backoff."""
        self.flush()
        self.record.status, self.record.end_time = status, _now_ms()
        self._send(lambda: self.client.set_terminated(self.run_id, status, end_time=self.record.end_time))
        if self.online:
            return
        folder = spool.write(self.record, self.spool_dir)  # first: nothing measured is lost
        try:
            retry(lambda: spool.deliver(self.client, folder), self.retries, self.backoff_s)
        except Exception as exc:
            console.warning(
                f"tracking still unreachable ({away(exc) or first_line(exc)}): run {self.record.run_name} is kept in "
                f"{folder}; `python -m src.sync` uploads it later"
            )
            self.spooled = folder
            return
        spool.remove(folder)
        console.note(f"tracking is back: run {self.record.run_name} delivered")


@dataclass
class _Pending:
    """What was logged and not yet sent."""

    metrics: list[tuple[str, float, int, int]] = field(default_factory=list)
    params: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)


def fit(values: dict[str, str], limit: int, kind: str) -> tuple[dict[str, str], dict[str, str]]:
    """(`values` with each cut to `limit` characters, {artifact name: whole text} of those cut): a
    cut value ends by saying how long it was and which artifact holds all of it."""
    fitted, whole = {}, {}
    for key, value in values.items():
        if len(value) <= limit:
            fitted[key] = value
            continue
        name = f"{LONG_VALUES_DIR}/{kind}/{key}.txt"
        said = f"\n\n[... {len(value):,} characters in all: the whole text is the run's artifact {name}]"
        fitted[key], whole[name] = value[: limit - len(said)] + said, value
    return fitted, whole


def _clean(values: dict) -> dict[str, str]:
    return {k: credentials.redact(str(v)) for k, v in values.items()}


def _now_ms() -> int:
    return int(time.time() * 1000)
