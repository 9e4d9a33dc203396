"""scripts/measured_source.py reads a store's finished runs as an export holds them, with the ops
each run counted itself."""

from __future__ import annotations

import importlib.util
import json

import pytest
from mlflow.tracking import MlflowClient

from src.paths import PROJECT_ROOT
from src.results import recorded
from src.tracking import store


def load_script():
    spec = importlib.util.spec_from_file_location(
        "measured_source", PROJECT_ROOT / "scripts" / "measured_source.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_store_gives_each_finished_run_with_its_own_counted_ops(tracking_uri, tmp_path):
    client = MlflowClient(tracking_uri)
    experiment = store.ensure_experiment(tracking_uri, "gpubench")  # artifacts beside the store
    # as src/projection/counts.py writes them: per op its name, kind, math, and kernels, FLOPs and
    # bytes each as a line in the batch
    counts = {
        "batches": [2, 4],
        "counted": "cpu, torch 2.14.1",
        "rows": [["aten.mm", "product", "tf32", 1.0, 0.0, 0.0, 8.0, 0.0, 6.0]],
    }
    for name, status, with_counts in (
        ("h200x1-resnet50-tf32", "FINISHED", True),
        ("h200x1-ssd300-tf32", "FINISHED", False),
        ("h200x1-maskrcnn-tf32", "FAILED", True),
    ):
        run = client.create_run(experiment, run_name=name, tags={"gpu": "h200", "model": name.split("-")[1]})
        client.log_metric(run.info.run_id, "throughput", 100.0)
        if with_counts:
            (tmp_path / recorded.OP_COUNTS).write_text(json.dumps(counts))
            client.log_artifact(run.info.run_id, str(tmp_path / recorded.OP_COUNTS))
        client.set_terminated(run.info.run_id, status)

    exported = load_script().from_store(tracking_uri)

    assert sorted(exported) == ["h200x1-resnet50-tf32", "h200x1-ssd300-tf32"]  # the failed run is left out
    resnet50 = exported["h200x1-resnet50-tf32"]
    assert resnet50["throughput"] == 100.0 and resnet50["tags"] == {"gpu": "h200", "model": "resnet50"}
    assert resnet50["op_counts"] == counts
    assert "op_counts" not in exported["h200x1-ssd300-tf32"]  # counted on the CPU by the script instead


def test_a_sweeps_store_gives_its_jobs_each_with_the_params_it_ran_with(tracking_uri, tmp_path, monkeypatch):
    """A sweep's parent run and compare's report runs are no job's figures; a run's own params (a
    memory cap, a batch) are what it measured, which a config composed from its tags lacks."""
    from src.compare.runs import to_record
    from src.projection import shipped

    client = MlflowClient(tracking_uri)
    experiment = store.ensure_experiment(tracking_uri, "gpubench")
    parent = client.create_run(experiment, run_name="sweep", tags={recorded.SWEEP: "true"})
    client.set_terminated(parent.info.run_id)
    report = client.create_run(experiment, run_name="compare vs rtx3090", tags={recorded.REPORT: "true"})
    client.set_terminated(report.info.run_id)
    tags = {"gpu": "h200", "model": "resnet50", "precision": "amp", "gpu_count": "1", "benchmark": "default"}
    run = client.create_run(
        experiment, run_name="h200x1-resnet50-amp", tags=tags | {"memory_limit_gb": "24.0"}
    )
    for key, value in {"gpu.memory_limit_gb": "24.0", "model.batch_size": "8", "batch_size": "8"}.items():
        client.log_param(run.info.run_id, key, value)
    client.log_metric(run.info.run_id, "throughput", 1000.0)
    client.log_metric(run.info.run_id, "batch_size", 8.0)
    client.log_text(
        run.info.run_id, json.dumps({"batches": [2, 4], "counted": "cpu", "rows": []}), recorded.OP_COUNTS
    )
    client.set_terminated(run.info.run_id)
    out = tmp_path / "measured.json"
    monkeypatch.setattr("sys.argv", ["measured_source.py", "--store", tracking_uri, "--out", str(out)])

    load_script().main()

    (read,) = shipped.read(out).runs  # neither the parent nor the report
    assert read.params["gpu.memory_limit_gb"] == "24.0" and read.batch_size == 8
    assert ("gpu.memory_limit_gb", "24.0") in to_record(read).config  # compare's point: the capped one


def test_a_store_that_is_not_there_is_said_in_one_line_and_not_made(tmp_path, capsys, monkeypatch):
    missing = tmp_path / "typo" / "mlflow.db"
    argv = ["measured_source.py", "--store", f"sqlite:///{missing}", "--out", str(tmp_path / "out.json")]
    monkeypatch.setattr("sys.argv", argv)

    with pytest.raises(SystemExit) as exited:
        load_script().main()

    said = capsys.readouterr().err
    assert exited.value.code == 2 and said.startswith("error: ") and said.count("\n") == 1
    assert f"{missing} does not exist" in said and not missing.parent.exists()


def test_one_workload_measured_at_several_batches_keeps_each_batch(tracking_uri):
    """A run's name says its card, model and precision, not its batch: a sweep over batches gives
    one name several figures, and each batch is a point of its own (the latest run of each)."""
    client = MlflowClient(tracking_uri)
    experiment = store.ensure_experiment(tracking_uri, "gpubench")
    for batch, throughput in ((4, 10.0), (16, 30.0), (4, 11.0), (None, 20.0)):  # None: logged no batch
        run = client.create_run(experiment, run_name="h200x1-txl_large-tf32", tags={"gpu": "h200"})
        if batch:
            client.log_metric(run.info.run_id, "batch_size", float(batch))
        client.log_metric(run.info.run_id, "throughput", throughput)
        client.set_terminated(run.info.run_id)

    exported = load_script().from_store(tracking_uri)

    assert {name: run["throughput"] for name, run in exported.items()} == {
        "h200x1-txl_large-tf32-b4": 11.0,
        "h200x1-txl_large-tf32-b16": 30.0,
        "h200x1-txl_large-tf32": 20.0,
    }
