"""The sweep summary's rows (src/run/summary.py) from runs in a real store: each named by its own
point, flagged where its figure needs it, and the table still 80 columns wide."""

from __future__ import annotations

import io

from mlflow.tracking import MlflowClient
from rich.console import Console

from src import console
from src.run import summary

POINT = {
    "model.name": "resnet50",
    "batch_size": "256",
    "benchmark.target_ci": "0.01",
    "benchmark.min_steps": "20",
}


def _run(client, experiment, name: str, params: dict, tags: dict | None = None, steps: int = 50):
    run = client.create_run(experiment, run_name=name, tags={"stop_reason": "ci", **(tags or {})}).info.run_id
    for key, value in params.items():
        client.log_param(run, key, value)
    for key, value in {"throughput": 6100.0, "step_time_ms": 42.0, "measured_steps": steps,
                       "step_time_ci95_rel": 0.004}.items():  # fmt: skip
        client.log_metric(run, key, value)
    client.set_terminated(run)
    return client.get_run(run)


def test_rows_of_one_run_name_are_told_apart_by_what_differs_and_their_repeat(tracking_uri):
    client = MlflowClient(tracking_uri)
    experiment = client.create_experiment("gpubench")
    name = "h200x1-resnet50-amp"
    runs = [
        _run(client, experiment, name, POINT | {"benchmark.compile": "False", "benchmark.repeat": "0"}),
        _run(client, experiment, name, POINT | {"benchmark.compile": "False", "benchmark.repeat": "1"}),
        _run(client, experiment, name, POINT | {"benchmark.compile": "True", "benchmark.repeat": "0"}),
        _run(client, experiment, "h200x1-ssd300-amp", POINT | {"model.name": "ssd300"}),
    ]
    rows = summary.tell_apart([summary.run_row(r, "FINISHED", "") for r in runs])
    assert [r["variant"] for r in rows] == [
        "[compile=False] #0",
        "[compile=False] #1",
        "[compile=True] #0",
        "",
    ]


def test_a_figure_measured_beside_another_program_or_short_of_its_rule_is_flagged(tracking_uri, monkeypatch):
    client = MlflowClient(tracking_uri)
    experiment = client.create_experiment("gpubench")
    shared = {"gpu_foreign_processes": "pid 4242 python (2.0 GiB)"}
    runs = [
        _run(client, experiment, "h200x1-txl_large-tf32", POINT, shared),
        _run(client, experiment, "h200x1-txl_base-tf32", POINT, {"stop_reason": "time_limit"}, steps=9),
        _run(client, experiment, "h200x1-resnet50-tf32", POINT),
    ]
    rows = summary.tell_apart([summary.run_row(r, "FINISHED", "") for r in runs])
    assert [list(r["flags"]) for r in rows] == [["shared"], ["missed"], []]
    out = io.StringIO()
    monkeypatch.setattr(console, "console", Console(file=out, width=80, highlight=False))
    console.summary_table(rows)
    lines = out.getvalue().splitlines()
    assert max(map(len, lines)) <= 80
    assert any(
        line.split()[:1] == ["h200x1-txl_large-tf32"] and line.split()[-1] == "shared" for line in lines
    )
    assert "h200x1-txl_large-tf32: GPU shared with pid 4242 python (2.0 GiB)" in lines[-2]
    assert "h200x1-txl_base-tf32: stopped at time_limit after 9 of min_steps 20 steps" in lines[-1]


def test_a_point_done_by_another_points_run_is_named_as_itself(tracking_uri):
    """Ceilings at amp is the point ceilings at tf32 measured: the sweep's amp row says amp."""
    from src.run.sweep import finish_parent

    client = MlflowClient(tracking_uri)
    experiment = client.create_experiment("gpubench")
    parent = client.create_run(experiment, run_name="sweep", tags={"sweep": "true"}).info.run_id
    done = _run(client, experiment, "h200x1-ceilings-tf32", {"model.name": "ceilings"})
    client.set_tag(parent, "skipped.abc123.h200x1-ceilings-amp", done.info.run_id)
    (row,) = finish_parent(client, parent, interrupted=False)
    assert (row["name"], row["status"]) == ("h200x1-ceilings-amp", "SKIPPED")
    assert row["error"] == f"done earlier in run {done.info.run_id} (h200x1-ceilings-tf32)"
