"""A multirun's parent MLflow run: opened before the first job, always closed.

Hydra skips `on_multirun_end` when a job raised, so the parent is also closed at interpreter exit
(after Ctrl-C or SIGTERM too: src.run.signals turns them into exceptions). If the tracking server is
away at that moment, the parent waits in the sweep's spool folder and `python -m src.sync` ends it
once its children have arrived.
"""

from __future__ import annotations

import atexit
import json
import sys
from pathlib import Path

from hydra.core.utils import JobStatus
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from src import console
from src.config.groups.tracking import tracking_errors
from src.errors import (
    JOB_FAILED,
    RESULT_SPOOLED,
    USAGE_ERROR,
    ConfigError,
    PointFailed,
    TrackingUnavailable,
    exit_with_error,
    first_line,
)
from src.results import recorded
from src.run import signals, summary
from src.tracking import credentials, job_run, owner, spool, store, ui


class SweepRunCallback(Callback):
    def __init__(self) -> None:
        self.uri: str | None = None
        self.parent_run_id: str | None = None
        self.sweep_dir: Path | None = None
        self.experiment_id: str | None = None
        self.spooled = False  # a run of this sweep waits in a spool folder
        self.failed = False  # a point failed (known here when the jobs run in this process)

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        """Open the parent run, or stop the sweep before any job with a clear error.

        Hydra turns exceptions raised by callbacks into warnings and carries on (every job would
        then run without a parent, into a store that may not work), so any failure here ends the
        process with one line and SystemExit, as a bad config does in a single run.
        """
        self.uri = credentials.adopt_uri_credentials(config.tracking.uri)
        self.sweep_dir = Path(config.hydra.sweep.dir)
        overrides = credentials.redact(" ".join(config.hydra.overrides.task))
        try:
            self._open_parent(config, overrides)
        except (ConfigError, TrackingUnavailable) as exc:
            exit_with_error(exc)
        except Exception as exc:
            exit_with_error(RuntimeError(f"the sweep could not start: {first_line(exc)}; nothing was run"))
        atexit.register(self.close)

    def _open_parent(self, config: DictConfig, overrides: str) -> None:
        errors = tracking_errors(config.tracking)
        if errors:
            raise ConfigError("invalid config:\n  " + "\n  ".join(errors))
        experiment_id = store.ensure_experiment(self.uri, config.tracking.experiment)
        owner.close_vanished(self.uri, [experiment_id])
        tags, whole = job_run.fit(
            {
                recorded.SCHEMA: str(recorded.SCHEMA_VERSION),
                recorded.SWEEP: "true",
                recorded.OVERRIDES: overrides,  # a long sweep's: cut to fit, whole in an artifact
                recorded.SWEEP_DIR: str(self.sweep_dir),
                **owner.tags(),
            },
            job_run.TAG_VALUE_MAX,
            "tags",
        )
        client = store.client(self.uri)
        name = f"sweep {self.sweep_dir.parent.name} {self.sweep_dir.name}"
        run = store.at_start(lambda: client.create_run(experiment_id, run_name=name, tags=tags), self.uri)
        for artifact, text in whole.items():
            store.at_start(lambda a=artifact, t=text: client.log_text(run.info.run_id, t, a), self.uri)
        self.parent_run_id, self.experiment_id = run.info.run_id, experiment_id
        self.sweep_dir.mkdir(parents=True, exist_ok=True)
        (self.sweep_dir / store.PARENT_RUN_FILE).write_text(
            json.dumps({"run_id": self.parent_run_id, "uri": credentials.bare(self.uri)})
        )

    def on_job_end(self, config: DictConfig, job_return, **kwargs) -> None:
        """Note a failed point on the parent: one that failed before its run existed shows nowhere else."""
        value = job_return._return_value  # the public property prints "Error executing job" and raises
        if not isinstance(value, PointFailed) and job_return.status != JobStatus.FAILED:
            return
        self.failed = True
        if not self.parent_run_id:
            return
        reason = value.reason if isinstance(value, PointFailed) else str(value) or type(value).__name__
        num, client = config.hydra.job.num, store.client(self.uri)
        client.set_tag(
            self.parent_run_id,
            f"{recorded.FAILED_JOB_PREFIX}{num}",
            " ".join(credentials.redact(reason).split())[:500],
        )
        if not (isinstance(value, PointFailed) and value.has_run):  # raised: it never got as far as its run
            client.set_tag(self.parent_run_id, f"{recorded.NO_RUN_JOB_PREFIX}{num}", "true")

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        """Every job returned: exit 2 if no point could run on this host, 1 if a point failed, 3 if
        a result (or the parent run) waits on disk for `python -m src.sync`."""
        rows = self.close()
        if rows and all(row.get("unavailable") for row in rows):
            # the same command on a host with none of its GPUs: say so in the exit status
            print(
                "error: no point of this sweep can run on this host (see the skipped lines)", file=sys.stderr
            )
            raise SystemExit(USAGE_ERROR)
        if self.failed or any(row["status"] == "FAILED" for row in rows or []):
            raise SystemExit(JOB_FAILED)  # before RESULT_SPOOLED: a failure matters more
        if self.spooled:
            raise SystemExit(RESULT_SPOOLED)

    def close(self) -> list[dict] | None:
        """End the parent run and print the sweep's summary; spool the parent if tracking is away.

        Returns the summary rows (None when there was no parent to end or it was spooled); sets
        `spooled` when a run of this sweep is kept in a spool folder, undelivered."""
        if self.parent_run_id is None:
            return None
        run_id, self.parent_run_id = self.parent_run_id, None
        interrupted = signals.received() is not None
        try:
            rows = finish_parent(store.client(self.uri), run_id, interrupted, self.sweep_dir)
            console.summary_table(rows)
            console.link_line(ui.how_to_open(self.uri, self.experiment_id))
        except Exception as exc:
            folder = spool.write_parent(self.sweep_dir / spool.SPOOL_DIR, self.uri, run_id, interrupted)
            console.warning(
                f"tracking unreachable ({first_line(exc)}): the sweep's "
                f"parent run is kept in {folder}; `python -m src.sync` ends it later"
            )
            rows = None
        runs, parents = spool.pending([self.sweep_dir])
        self.spooled = bool(runs or parents)
        if self.spooled:
            what = f"{len(runs)} job result(s)" + (" and the sweep's parent run" if parents else "")
            console.warning(
                f"{what} spooled under {self.sweep_dir}, not in the store yet; "
                f"`python -m src.sync` delivers them (exit status {RESULT_SPOOLED})"
            )
        return rows


def parent_status(child_statuses: list[str], failed_points: int, interrupted: bool, ran: bool = True) -> str:
    """`ran`: some point ran here or was done earlier (not every point skipped for want of GPUs)."""
    if interrupted or "KILLED" in child_statuses:
        return "KILLED"
    if failed_points or not ran or any(s != "FINISHED" for s in child_statuses):
        return "FAILED"
    return "FINISHED"


def finish_parent(client, run_id: str, interrupted: bool, sweep_dir: Path | None = None) -> list[dict]:
    """End a sweep's parent run from what its children say; returns the summary rows.

    A child still RUNNING now has lost its job process (killed hard): it is ended too, unless its
    result is waiting in the sweep's spool for `src.sync`.
    """
    parent = client.get_run(run_id)
    children = store.every_run(client, [parent.info.experiment_id], f"tags.mlflow.parentRunId = '{run_id}'")
    spooled = {spool.load(f).run_id for f in spool.pending([sweep_dir])[0]} if sweep_dir else set()
    statuses = {c.info.run_id: c.info.status for c in children}
    for child in children:
        if child.info.status == "RUNNING" and child.info.run_id not in spooled:
            statuses[child.info.run_id] = "KILLED" if interrupted else "FAILED"
            _end_lost_child(client, child.info.run_id, statuses[child.info.run_id])
    parent_tags = parent.data.tags
    failed = [k for k in parent_tags if k.startswith(recorded.FAILED_JOB_PREFIX)]
    skipped = {k: client.get_run(v) for k, v in parent_tags.items() if k.startswith(recorded.SKIPPED_PREFIX)}
    unavailable = _unavailable_rows(parent_tags)
    ran = bool(children or skipped or failed or not unavailable)
    client.set_terminated(run_id, parent_status(list(statuses.values()), len(failed), interrupted, ran))
    rows = [
        summary.run_row(c, statuses[c.info.run_id], c.data.tags.get(recorded.ERROR, "")) for c in children
    ]
    rows += [
        summary.run_row(
            s, "SKIPPED", f"done earlier in run {s.info.run_id} ({s.info.run_name})", _skipped_name(k)
        )
        for k, s in skipped.items()
    ]
    rows = summary.tell_apart(sorted(rows, key=lambda r: r.pop("start")))
    no_run = sorted(
        int(k.removeprefix(recorded.NO_RUN_JOB_PREFIX)) for k in parent_tags if k.startswith(recorded.NO_RUN_JOB_PREFIX)
    )
    return (
        rows
        + [_no_run_row(num, parent_tags.get(f"{recorded.FAILED_JOB_PREFIX}{num}", "")) for num in no_run]
        + unavailable
    )


def _end_lost_child(client, run_id: str, status: str) -> None:
    """End a child that is still RUNNING. After an interrupt its job process may be ending it at
    this very moment (the same error tag written twice): that process's own ending stands."""
    try:
        client.set_tag(run_id, recorded.ERROR, "its job process ended without closing the run")
        client.set_terminated(run_id, status)
    except Exception as exc:
        if not store.is_write_conflict(exc):
            raise


def _unavailable_rows(parent_tags: dict) -> list[dict]:
    """The points this host lacked the GPUs for, in sweep order."""
    notes = {
        int(k.removeprefix(recorded.UNAVAILABLE_PREFIX)): v
        for k, v in parent_tags.items()
        if k.startswith(recorded.UNAVAILABLE_PREFIX)
    }
    rows = []
    for num in sorted(notes):
        name, _, shortfall = notes[num].partition(": ")
        rows.append({"name": name, "status": "SKIPPED", "error": shortfall, "unavailable": True})
    return rows


def _no_run_row(num: int, reason: str) -> dict:
    """A point that failed before its run was opened (bad input): its job number, no figures."""
    return {"name": f"point #{num} (no run)", "status": "FAILED", "unit": "", "error": reason}


def _skipped_name(key: str) -> str:
    """The skipped point's own run name from its note's key (`skipped.<hash>.<name>`)."""
    return key.removeprefix(recorded.SKIPPED_PREFIX).partition(".")[2]
