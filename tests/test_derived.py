"""Derived efficiency figures from known inputs."""

from __future__ import annotations

import pytest
from conftest import compose_cfg

from src.run.results import efficiency, mfu


def test_figures_from_known_inputs():
    a6000 = compose_cfg(["gpu=a6000"]).gpu  # tf32 peak 77.4, fp32 38.7 TFLOPS; price 4437.5 USD
    assert mfu(38.7, a6000.peak_tflops.tf32) == pytest.approx(0.5)
    assert mfu(38.7, a6000.peak_tflops.fp32) == pytest.approx(1.0)
    metrics = {"throughput": 1000.0, "power_mean_w": 250.0}
    figures = efficiency(metrics, a6000, world=2)
    assert figures["throughput_per_watt"] == pytest.approx(1000 / 500)  # two GPUs at 250 W
    assert figures["throughput_per_kusd"] == pytest.approx(1000 / (2 * 4.4375))


def test_figures_without_their_inputs_are_left_out():
    cpu = compose_cfg(["gpu=cpu"]).gpu  # no peak, no price
    assert mfu(0.1, cpu.peak_tflops.get("fp32")) is None
    assert efficiency({"throughput": 10.0}, cpu, world=1) == {}
    a6000 = compose_cfg(["gpu=a6000"]).gpu
    assert set(efficiency({"throughput": 10.0}, a6000, world=1)) == {"throughput_per_kusd"}  # no power
