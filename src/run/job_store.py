"""The job's one door into tracking: its experiment (made if missing, with the runs of processes
that vanished closed), the clean FINISHED run that already measured its point, its own run, and the
notes it leaves on its sweep's parent run."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from src.run import resume
from src.tracking import job_run, owner, store


class JobStore:
    def __init__(self, tracking: DictConfig):
        self.tracking = tracking
        self.experiment_id = store.ensure_experiment(tracking.uri, tracking.experiment)
        owner.close_vanished(tracking.uri, [self.experiment_id])

    def finished_run(self, digest: str, tags: dict, from_ranks):
        """The latest clean FINISHED run of this job's point, else None and why it measures."""
        return resume.finished_run(store.client(self.tracking.uri), self.experiment_id, digest, tags, from_ranks)

    def open_run(self, name: str, tags: dict, parent_run_id: str | None, spool_dir: Path) -> job_run.JobRun:
        """This job's run, RUNNING (tagged with its owner, as every run is)."""
        return job_run.JobRun(self.tracking, self.experiment_id, name, tags, parent_run_id, spool_dir)


def note_on_parent(uri: str, parent_run_id: str | None, key: str, value: str) -> None:
    """A tag on the sweep's parent run (a point skipped or unavailable); nothing outside a sweep."""
    if parent_run_id:
        store.client(uri).set_tag(parent_run_id, key, value)
