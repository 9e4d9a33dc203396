"""Derived efficiency figures from known inputs."""

from __future__ import annotations

import pytest
from conftest import compose_cfg

from src.results.recorded import Window
from src.run.outcome import efficiency, mfu


def test_figures_from_known_inputs():
    a6000 = compose_cfg(["gpu=a6000"]).gpu  # tf32 peak 77.4, fp32 38.7 TFLOPS; price 4437.5 USD
    assert mfu(38.7, a6000.peak_tflops.tf32) == pytest.approx(0.5)
    assert mfu(38.7, a6000.peak_tflops.fp32) == pytest.approx(1.0)
    measured = Window(throughput=1000.0, achieved_tflops_per_gpu=38.7)
    figures = efficiency(measured, a6000.peak_tflops.fp32, 250.0, a6000, world=2)
    assert figures.mfu == pytest.approx(1.0)
    assert figures.throughput_per_watt == pytest.approx(1000 / 500)  # two GPUs at 250 W
    assert figures.throughput_per_kusd == pytest.approx(1000 / (2 * 4.4375))


def test_figures_without_their_inputs_are_left_out():
    cpu = compose_cfg(["gpu=cpu"]).gpu  # no peak, no price
    assert mfu(0.1, cpu.peak_tflops.get("fp32")) is None
    unpriced = efficiency(Window(throughput=10.0, achieved_tflops_per_gpu=0.1), None, None, cpu, world=1)
    assert unpriced == Window(throughput=10.0, achieved_tflops_per_gpu=0.1)
    a6000 = compose_cfg(["gpu=a6000"]).gpu
    unpowered = efficiency(Window(throughput=10.0), None, None, a6000, world=1)
    assert set(unpowered.metrics()) == {"throughput", "throughput_per_kusd"}  # no power, no peak
