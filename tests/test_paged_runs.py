"""Reading every run of an experiment takes several of MLflow's pages once a store holds more runs
than one page: a run changed, written or deleted between two pages must be read once, and none missed.
MLflow pages by offset; pages of two runs here stand for its pages of 1,000."""

from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

from src.published.__main__ import import_table
from src.tracking import store
from tests.test_import_results import POSITIVE_CELLS, PUBLISHED, import_cfg, table  # noqa: F401

PAGE = 2


@pytest.fixture
def small_pages(monkeypatch):
    """Every search answers at most PAGE runs a call; `after_first_page` runs once a page is served."""
    real = MlflowClient.search_runs
    hooks = []

    def search_runs(self, *args, max_results=1000, **kwargs):
        page = real(self, *args, max_results=min(max_results, PAGE), **kwargs)
        while hooks:
            hooks.pop()()
        return page

    monkeypatch.setattr(MlflowClient, "search_runs", search_runs)
    return hooks


def test_a_stopped_imports_run_deleted_on_the_first_page_leaves_no_figure_of_a_later_page_unseen(
    table,  # noqa: F811
    tracking_uri,
    small_pages,
):
    cfg = import_cfg("precision=fp32", "source=lambda", f"file={table}", f"tracking.uri={tracking_uri}")
    assert import_table(cfg, table).created == POSITIVE_CELLS
    client = MlflowClient(tracking_uri)
    published = client.get_experiment_by_name(PUBLISHED).experiment_id
    newest = client.search_runs([published], order_by=["attributes.start_time DESC"])[0]
    client.update_run(newest.info.run_id, status="RUNNING")  # as an import killed mid-run leaves it

    again = import_table(cfg, table)

    assert (again.repairs.half_written, again.created, again.already_there) == (1, 1, POSITIVE_CELLS - 1)
    keys = [r.data.tags["import_key"] for r in store.every_run(client, [published])]
    assert len(keys) == len(set(keys)) == POSITIVE_CELLS  # each figure held by one run


def test_a_run_that_finishes_between_two_pages_is_read_once(tracking_uri, small_pages):
    client = MlflowClient(tracking_uri)
    experiment = store.ensure_experiment(tracking_uri, "gpubench")
    for n in range(5):
        client.set_terminated(client.create_run(experiment, run_name=f"r{n}", start_time=n).info.run_id)
    # a job ends while the first page is read: the newest run, ahead of every page read so far
    small_pages.append(
        lambda: client.set_terminated(
            client.create_run(experiment, run_name="late", start_time=9).info.run_id
        )
    )

    read = [
        run.info.run_name for run in store.every_run(client, [experiment], "attributes.status = 'FINISHED'")
    ]

    assert sorted(read) == sorted({*read}) and {"r0", "r1", "r2", "r3", "r4"} <= set(read)


def test_every_run_of_a_vanished_process_is_ended_though_they_fill_several_pages(tracking_uri, small_pages):
    """Runs whose job process is gone (killed hard) are ended KILLED by the next command: all of them,
    also when ending the first page's runs moves the later pages of MLflow's offset paging."""
    import socket
    import subprocess

    from src.results import recorded
    from src.tracking import owner

    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid no process holds now
    tags = {recorded.OWNER_HOST: socket.gethostname(), recorded.OWNER_PID: str(gone.pid)}
    tags[recorded.OWNER_STARTED] = "a start time no process of this pid has now"
    client = MlflowClient(tracking_uri)
    experiment = store.ensure_experiment(tracking_uri, "gpubench")
    for n in range(5):
        client.create_run(experiment, run_name=f"r{n}", tags=tags)

    assert owner.close_vanished(tracking_uri) == 5
    assert {r.info.status for r in store.every_run(client, [experiment])} == {"KILLED"}
