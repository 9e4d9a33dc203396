"""Ending a sweep's parent run while its interrupted jobs are still ending their own runs
(src/run/sweep.py finish_parent): a write that collides with a job's own is not an outage."""

from __future__ import annotations

import sqlite3

import pytest
import sqlalchemy.exc
from mlflow.tracking import MlflowClient

from src.results import recorded
from src.run.sweep import finish_parent


def _sweep_with_two_running_children(uri: str) -> tuple[MlflowClient, str, list[str]]:
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("gpubench")
    parent = client.create_run(experiment, run_name="sweep").info.run_id
    children = [
        client.create_run(experiment, run_name=f"job{i}", tags={"mlflow.parentRunId": parent}).info.run_id
        for i in range(2)
    ]
    return client, parent, children


def test_a_child_ending_itself_at_the_same_moment_leaves_the_parent_ended_not_spooled(tracking_uri, monkeypatch):
    client, parent, (racing, lost) = _sweep_with_two_running_children(tracking_uri)
    own_process = MlflowClient(tracking_uri=tracking_uri)
    real_set_tag = client.set_tag

    def set_tag(run_id, key, value):
        if run_id == racing and key == recorded.ERROR:
            # the job's own process inserted the same tag between MLflow's check and its insert
            own_process.set_tag(racing, recorded.ERROR, "interrupted (SIGTERM)")
            own_process.set_terminated(racing, "KILLED")
            raise sqlalchemy.exc.IntegrityError(
                "INSERT INTO tags", {}, sqlite3.IntegrityError("UNIQUE constraint failed: tags.key, tags.run_uuid")
            )
        return real_set_tag(run_id, key, value)

    monkeypatch.setattr(client, "set_tag", set_tag)
    rows = finish_parent(client, parent, interrupted=True)
    assert client.get_run(parent).info.status == "KILLED"
    assert {r["name"]: r["status"] for r in rows} == {"job0": "KILLED", "job1": "KILLED"}
    assert client.get_run(racing).data.tags[recorded.ERROR] == "interrupted (SIGTERM)"  # its own word stands
    assert client.get_run(lost).data.tags[recorded.ERROR] == "its job process ended without closing the run"
    assert client.get_run(lost).info.status == "KILLED"


def test_a_store_that_fails_otherwise_still_stops_the_ending(tracking_uri, monkeypatch):
    client, parent, _ = _sweep_with_two_running_children(tracking_uri)

    def set_tag(run_id, key, value):
        raise sqlalchemy.exc.OperationalError("UPDATE", {}, sqlite3.OperationalError("disk I/O error"))

    monkeypatch.setattr(client, "set_tag", set_tag)
    with pytest.raises(sqlalchemy.exc.OperationalError):  # the caller spools the parent
        finish_parent(client, parent, interrupted=True)


def test_every_child_is_ended_and_summarised_when_they_fill_more_than_one_page(tracking_uri, monkeypatch):
    """MLflow answers a search a page at a time (1,000 runs; two here): a sweep of more jobs than one
    page still has each of them ended and in its summary."""
    client, parent, _ = _sweep_with_two_running_children(tracking_uri)
    experiment = client.get_run(parent).info.experiment_id
    client.create_run(experiment, run_name="job2", tags={"mlflow.parentRunId": parent})
    real_search = MlflowClient.search_runs

    def two_a_page(self, *args, max_results=1000, **kwargs):
        return real_search(self, *args, max_results=min(max_results, 2), **kwargs)

    monkeypatch.setattr(MlflowClient, "search_runs", two_a_page)
    rows = finish_parent(client, parent, interrupted=True)
    assert {r["name"]: r["status"] for r in rows} == {"job0": "KILLED", "job1": "KILLED", "job2": "KILLED"}
