"""The addresses a sweep, import and compare print, and the saved views they write for the MLflow UI."""

from __future__ import annotations

import json

from src.tracking import store, ui, views


def test_the_printed_addresses_open_saved_views_that_the_experiment_holds(tracking_uri):
    experiment_id = store.ensure_experiment(tracking_uri, "gpubench")
    table, grouped = ui.how_to_open(tracking_uri, experiment_id).splitlines()
    assert table.endswith(
        f"#/experiments/{experiment_id}/runs?workflowType=machine_learning"
        "&viewStateShareKey=gpubench-runs&compareRunsMode=TABLE"
    )
    assert grouped.startswith("by gpu, throughput charted: http://127.0.0.1:5000/")
    assert grouped.endswith("viewStateShareKey=gpubench-by-gpu&compareRunsMode=CHART")
    tags = store.client(tracking_uri).get_experiment(experiment_id).tags
    # the envelope MLflow 3.17's Views menu reads: name, createdAt, updatedAt, state as a JSON string
    saved = {key: json.loads(tags[views.TAG_PREFIX + key]) for key in (views.RUNS, views.BY_GPU)}
    assert {v["name"] for v in saved.values()} == set(views.NAMES.values())
    runs, by_gpu = (json.loads(saved[key]["state"]) for key in (views.RUNS, views.BY_GPU))
    for column in (
        "tags.`gpu`",
        "tags.`model`",
        "tags.`precision`",
        "tags.`gpu_count`",
        "metrics.`throughput`",
    ):
        assert column in runs["selectedColumns"]
    assert runs["groupBy"] is None and runs["runsHiddenMode"] == "SHOW_ALL"
    assert by_gpu["groupBy"]["groupByKeys"] == [
        {"mode": "tag", "groupByData": "gpu"},
        {"mode": "tag", "groupByData": "source"},
    ]  # a publisher's generations are never averaged together
    assert by_gpu["runsHiddenMode"] == "SHOW_ALL"  # MLflow's default draws the first 10 groups only
    assert by_gpu["chartsSearchFilter"] == "throughput/"  # per workload: no chart averages unlike models


def test_a_store_that_takes_no_write_still_gets_the_plain_address(tmp_path):
    database = tmp_path / "mlflow.db"
    database.write_text("not sqlite")
    line = ui.how_to_open(f"sqlite:///{database}", "1")
    assert line.endswith("#/experiments/1/runs?workflowType=machine_learning") and "\n" not in line
