"""The precision group: the math a job trains in (conf/precision/)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from omegaconf import MISSING, DictConfig

from src.config.checks import Errors, positive_int

PRECISIONS = ("fp32", "tf32", "amp", "bf16")
AUTO_PRECISION = "auto"  # precision=auto: the gpu profile's default_precision, once the device is known


@dataclass
class PrecisionConfig:
    name: str = MISSING
    autocast_dtype: str | None = None  # float16 | bfloat16 | None
    grad_scaling: bool = False
    allow_tf32: bool = False
    peak_key: str = MISSING  # which gpu.peak_tflops figure this math runs at


def check(cfg: DictConfig, errors: Errors) -> None:
    p = cfg.precision
    errors.need(p.name in PRECISIONS, "precision.name", p.name, f"one of {', '.join(PRECISIONS)}")
    errors.need(
        p.autocast_dtype in (None, "float16", "bfloat16"),
        "precision.autocast_dtype",
        p.autocast_dtype,
        "null, float16 or bfloat16",
    )
    errors.need(
        bool(p.peak_key), "precision.peak_key", p.peak_key, "the gpu.peak_tflops key this math runs at"
    )


def check_batch_table(table: Any, key: str, errors: Errors) -> None:
    """A precision -> batch size table (a model's defaults, or a GPU profile's per model)."""
    for precision, value in table.items():
        errors.need(
            precision in (*PRECISIONS, "default"),
            key,
            precision,
            f"keyed by {', '.join(PRECISIONS)} or default",
        )
        errors.need(positive_int(value), f"{key}.{precision}", value, "a positive integer")

