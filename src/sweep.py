"""A multirun's parent MLflow run: opened before the first job, always closed.

Hydra skips `on_multirun_end` when a job raised, so the parent is also closed at interpreter exit.
"""

from __future__ import annotations

import atexit
import json
from pathlib import Path

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from src import console, tracking


class SweepRunCallback(Callback):
    def __init__(self) -> None:
        self.uri: str | None = None
        self.parent_run_id: str | None = None

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        self.uri = config.tracking.uri
        experiment_id = tracking.ensure_experiment(self.uri, config.tracking.experiment)
        sweep_dir = Path(config.hydra.sweep.dir)
        overrides = " ".join(config.hydra.overrides.task)
        run = tracking.client(self.uri).create_run(
            experiment_id,
            run_name=f"sweep {sweep_dir.parent.name} {sweep_dir.name}",
            tags={"sweep": "true", "overrides": overrides, "sweep_dir": str(sweep_dir)},
        )
        self.parent_run_id = run.info.run_id
        sweep_dir.mkdir(parents=True, exist_ok=True)
        (sweep_dir / tracking.PARENT_RUN_FILE).write_text(
            json.dumps({"run_id": self.parent_run_id, "uri": self.uri})
        )
        atexit.register(self.close)

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        self.close()

    def close(self) -> None:
        """End the parent run FAILED if any child did not finish; print the sweep's summary."""
        if self.parent_run_id is None:
            return
        client = tracking.client(self.uri)
        parent = client.get_run(self.parent_run_id)
        children = client.search_runs(
            [parent.info.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{self.parent_run_id}'"
        )
        statuses = [c.info.status for c in children]
        if "KILLED" in statuses:
            status = "KILLED"
        elif statuses and all(s == "FINISHED" for s in statuses):
            status = "FINISHED"
        else:
            status = "FAILED"
        client.set_terminated(self.parent_run_id, status)
        self.parent_run_id = None
        console.summary_table(
            [
                {
                    "name": c.info.run_name,
                    "status": c.info.status,
                    "throughput": c.data.metrics.get("throughput"),
                    "unit": c.data.tags.get("unit", ""),
                    "step_time_ms": c.data.metrics.get("step_time_ms"),
                    "error": c.data.tags.get("error", "").splitlines()[0] if c.data.tags.get("error") else "",
                }
                for c in sorted(children, key=lambda c: c.info.start_time)
            ]
        )
