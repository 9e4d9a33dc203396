"""GPU telemetry under MLflow's own system-metric names, which the run page's System metrics tab draws."""

from __future__ import annotations

import time
from types import SimpleNamespace

from fake_nvml import FakeNvml, install, mixed_host

from src.hardware import devices, system_metrics, telemetry


class RecordingRun:
    def __init__(self):
        self.series, self.files = [], {}

    def log_series(self, points):
        self.series += points

    def log_files(self, files):
        self.files.update(files)


def test_the_watch_logs_each_gpus_series_under_mlflows_names_too(monkeypatch):
    install(monkeypatch, FakeNvml(mixed_host()))  # gpu0: the A6000 at 280 W, 20 GB; gpu1: 340 W
    run = RecordingRun()
    cfg = SimpleNamespace(enabled=True, interval_ms=10, pcie_interval_ms=20)
    with telemetry.Watch(cfg, devices.list_devices(), run):
        time.sleep(0.15)
    values = {}
    for key, value, _, _ in run.series:
        values.setdefault(key, set()).add(value)
    assert values["system/gpu_0_power_usage_watts"] == {280.0}
    assert values["system/gpu_1_power_usage_watts"] == {340.0}
    assert values["system/gpu_0_memory_usage_megabytes"] == {20e3}
    assert values["system/gpu_0_utilization_percentage"] == values["telemetry/gpu0/gpu_util_pct"]
    assert "system/cpu_utilization_percentage" in values and "system/system_memory_usage_megabytes" in values
    # same samples, same steps and times as the telemetry/ series
    ours = [(s, t) for k, _, t, s in run.series if k == "telemetry/gpu1/power_w"]
    theirs = [(s, t) for k, _, t, s in run.series if k == "system/gpu_1_power_usage_watts"]
    assert ours == theirs and ours
    # a field MLflow has no name for stays under telemetry/ only
    assert not [k for k in values if k.startswith("system/") and "clock" in k]


def test_only_fields_with_an_mlflow_name_are_copied():
    assert system_metrics.mlflow_name("telemetry/gpu12/mem_used_gb") == (
        "system/gpu_12_memory_usage_megabytes",
        1e3,
    )
    assert system_metrics.mlflow_name("telemetry/gpu0/temperature_c") is None
    assert system_metrics.mlflow_name("throughput") is None
