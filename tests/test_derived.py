"""Derived efficiency figures from known inputs, and the 1-GPU baseline that scaling is measured against."""

from __future__ import annotations

import pytest
from conftest import compose_cfg

from src.config.schema import TrackingConfig
from src.run.results import efficiency, mfu
from src.tracking import job_run, store


def test_figures_from_known_inputs():
    a6000 = compose_cfg(["gpu=a6000"]).gpu  # tf32 peak 77.4, fp32 38.7 TFLOPS; price 4437.5 USD
    assert mfu(38.7, a6000.peak_tflops.tf32) == pytest.approx(0.5)
    assert mfu(38.7, a6000.peak_tflops.fp32) == pytest.approx(1.0)
    metrics = {"throughput": 1000.0, "power_mean_w": 250.0}
    figures = efficiency(metrics, a6000, world=2, baseline_throughput=625.0)
    assert figures["throughput_per_watt"] == pytest.approx(1000 / 500)  # two GPUs at 250 W
    assert figures["throughput_per_kusd"] == pytest.approx(1000 / (2 * 4.4375))
    assert figures["scaling_efficiency"] == pytest.approx(1000 / (2 * 625))


def test_figures_without_their_inputs_are_left_out():
    cpu = compose_cfg(["gpu=cpu"]).gpu  # no peak, no price
    assert mfu(0.1, cpu.peak_tflops.get("fp32")) is None
    assert efficiency({"throughput": 10.0}, cpu, world=1) == {}
    a6000 = compose_cfg(["gpu=a6000"]).gpu
    one_gpu = efficiency({"throughput": 10.0}, a6000, world=1, baseline_throughput=10.0)
    assert set(one_gpu) == {"throughput_per_kusd"}  # no power measured, no scaling for 1 GPU


def test_scaling_baseline_is_the_latest_finished_single_gpu_run_of_the_same_setup(tracking_uri):
    experiment = store.ensure_experiment(tracking_uri, "gpubench")
    setup = {
        "gpu": "a6000",
        "model": "resnet50",
        "precision": "amp",
        "benchmark": "default",
        "compile": False,
        "channels_last": False,
        "cudnn_benchmark": True,
    }

    def job(throughput: float, status: str = "FINISHED", batch: int = 256, **changes) -> str:
        tags = {**setup, "gpu_count": 1, **changes}
        run = job_run.JobRun(TrackingConfig(uri=tracking_uri), experiment, "r", tags, None)
        run.log_params({"model.batch_size": batch})
        run.log_metrics({"throughput": throughput})
        run.end(status)
        return run.run_id

    job(500.0)
    wanted = job(600.0)
    job(700.0, status="FAILED")
    job(800.0, precision="fp32")
    job(900.0, gpu_count=2)
    job(950.0, batch=128)
    job(990.0, gpu="rtx3090")
    job(995.0, cudnn_benchmark=False)
    current = job_run.JobRun(
        TrackingConfig(uri=tracking_uri), experiment, "now", {**setup, "gpu_count": 2}, None
    )
    batch = {"model.batch_size": 256}
    assert current.single_gpu_baseline({**setup, "gpu_count": 2}, batch) == (wanted, 600.0)
    assert current.single_gpu_baseline({**setup, "model": "gpt2"}, batch) is None
