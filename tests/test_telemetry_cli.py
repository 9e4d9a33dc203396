"""A real CLI run on a host without NVML: one notice, the job finishes, CPU-side telemetry is logged."""

from __future__ import annotations

import csv
import io

from conftest import read_runs, run_cli

from src.hardware.telemetry import SERIES_POINTS


def test_a_host_without_nvml_gets_one_notice_and_cpu_figures(tmp_path, tracking_uri, monkeypatch):
    # hide any NVML this machine may have, so the test means the same on a GPU host
    (tmp_path / "hidden").mkdir()
    (tmp_path / "hidden" / "pynvml.py").write_text("raise ImportError('hidden by the test')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "hidden"))

    # 10 ms samples: a smoke run's measured window is a fraction of a second
    result = run_cli(
        ["gpu=auto", "model=gpt2", "benchmark=smoke", "telemetry.interval_ms=10"], tmp_path, tracking_uri
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert output.count("NVML is not available (hidden by the test)") == 1

    (run,) = read_runs(tracking_uri)
    assert run.info.status == "FINISHED"
    assert run.data.tags["gpu"] == "cpu"
    metrics = run.data.metrics
    assert metrics["throughput"] > 0
    assert metrics["cpu_util_mean_pct"] >= 0 and metrics["host_mem_used_max_gb"] > 0
    assert "power_mean_w" not in metrics and "energy_per_item_j" not in metrics

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    path = client.download_artifacts(run.info.run_id, "telemetry.csv", str(tmp_path))
    rows = list(csv.DictReader(io.StringIO(open(path).read())))
    assert rows and {r["device"] for r in rows} == {"host"}
    history = client.get_metric_history(run.info.run_id, "telemetry/host/host_mem_used_gb")
    assert 0 < len(history) <= min(len(rows), SERIES_POINTS)  # every sample, or averaged down
