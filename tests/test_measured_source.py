"""scripts/measured_source.py reads a store's finished runs as an export holds them, with the ops
each run counted itself."""

from __future__ import annotations

import importlib.util
import json

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
