"""The telemetry group: NVML sampling of the job's GPUs while the ranks train."""

from __future__ import annotations

from dataclasses import dataclass

from omegaconf import DictConfig

from src.config.checks import Errors, positive_int


@dataclass
class TelemetryConfig:
    enabled: bool = True
    interval_ms: int = 100  # one NVML sample of every chosen GPU per interval
    pcie_interval_ms: int = 1000  # NVML's PCIe throughput read blocks ~20 ms: take it less often; 0: never


def check(cfg: DictConfig, errors: Errors) -> None:
    t = cfg.telemetry
    errors.need(
        positive_int(t.interval_ms) and t.interval_ms >= 10,
        "telemetry.interval_ms",
        t.interval_ms,
        "an integer >= 10 (milliseconds between samples)",
    )
    errors.need(
        t.pcie_interval_ms == 0 or (positive_int(t.pcie_interval_ms) and t.pcie_interval_ms >= t.interval_ms),
        "telemetry.pcie_interval_ms",
        t.pcie_interval_ms,
        f"0 (off) or an integer >= telemetry.interval_ms ({t.interval_ms})",
    )
