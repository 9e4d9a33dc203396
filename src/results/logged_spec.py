"""The spec-sheet figures a run logged with its params (its gpu profile and precision), read back:
part of src/results/run_result.py's reader, which gives them as `RunResult.spec`."""

from __future__ import annotations

import math
from dataclasses import dataclass

# the config's flattened keys the spec figures are logged under
PEAK_PARAM = "gpu.peak_tflops"  # logged flattened: gpu.peak_tflops.<peak key>, or "{}" when empty
PEAK_KEY_PARAM = "precision.peak_key"
SPEC_PARAMS = {
    "memory_bandwidth_gbs": "gpu.memory_bandwidth_gbs",
    "tdp_w": "gpu.tdp_w",
    "price_usd": "gpu.price_usd",
    "memory_gb": "gpu.memory_gb",
}


@dataclass(frozen=True)
class Spec:
    """The spec-sheet figures a run logged from its gpu profile and precision (None: not logged)."""

    peak_key: str | None  # which peak the math ran at
    peak_tflops: float | None  # at that key, per GPU
    memory_bandwidth_gbs: float | None
    tdp_w: float | None  # per GPU
    price_usd: float | None  # per GPU
    memory_gb: float | None  # per GPU, as the profile states it (a memory cap aside)
    unlogged: tuple[str, ...] = ()  # the figures the run never logged (logged as None is logged)


def read_spec(precision: str, tf32_math: bool, params: dict) -> Spec:
    """The spec figures as the run logged them; a figure logged as None stays None (its profile
    had none when it ran), one never logged is named in `unlogged`."""
    unlogged = []
    if precision == "fp32" and tf32_math:  # published "fp32": TF32 tensor-core math, at TF32's peak
        key = "tf32"
    elif PEAK_KEY_PARAM in params:
        key = params[PEAK_KEY_PARAM]
    else:
        key = None
        unlogged.append("peak_key")
    if any(p == PEAK_PARAM or p.startswith(f"{PEAK_PARAM}.") for p in params):
        peak = positive_number(params.get(f"{PEAK_PARAM}.{key}"))
    else:
        peak = None
        unlogged.append("peak_tflops")
    figures = {}
    for name, param in SPEC_PARAMS.items():
        figures[name] = positive_number(params.get(param))
        if param not in params:
            unlogged.append(name)
    return Spec(key, peak, **figures, unlogged=tuple(unlogged))


def positive_number(value) -> float | None:
    """A logged figure as a number; None when absent, "None" (a profile without it), 0 or less."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number > 0 and math.isfinite(number) else None
