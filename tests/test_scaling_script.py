"""benchmarks/scaling.py: efficiency from the newest finished run at each GPU count."""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace

import pytest

from src.paths import PROJECT_ROOT

_spec = importlib.util.spec_from_file_location("scaling", PROJECT_ROOT / "benchmarks" / "scaling.py")
scaling = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(scaling)


def fake_run(start, count, throughput, status="FINISHED", model="resnet50"):
    tags = {"gpu": "h200", "model": model, "precision": "amp", "gpu_count": str(count), "unit": "images/s"}
    return SimpleNamespace(
        info=SimpleNamespace(start_time=start, status=status),
        data=SimpleNamespace(tags=tags, metrics={"throughput": throughput}),
    )


def test_efficiency_is_throughput_over_n_times_one_gpu_newest_finished_runs():
    runs = [
        fake_run(3, 2, 1900.0),
        fake_run(1, 1, 900.0),  # older: replaced by the run at start 2
        fake_run(2, 1, 1000.0),
        fake_run(4, 2, 5000.0, status="FAILED"),  # a failed run shows no throughput
        fake_run(5, 2, 700.0, model="txl_base"),  # no 1-GPU run: no efficiency
    ]
    rows = {(r["model"], r["gpus"]): r for r in scaling.scaling_rows(runs)}
    assert rows[("resnet50", 1)]["throughput"] == 1000.0 and rows[("resnet50", 1)]["efficiency"] is None
    assert rows[("resnet50", 2)]["efficiency"] == pytest.approx(1900.0 / (2 * 1000.0))
    assert rows[("txl_base", 2)]["efficiency"] is None
