"""The spec-sheet figures a run is judged by: the ones it logged, as its gpu profile and precision
were when it ran; today's conf/ profile stands in only for figures a run never logged (imported
runs log TDP and price but no peak or bandwidth; runs older than a figure lack it), and compare
says so in its report.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from omegaconf import OmegaConf

from src.hardware import devices
from src.paths import PROJECT_ROOT
from src.stats import positive_number

PEAK_PARAM = "gpu.peak_tflops"  # logged flattened: gpu.peak_tflops.<peak key>, or "{}" when empty
FIGURE_PARAMS = {
    "memory_bandwidth_gbs": "gpu.memory_bandwidth_gbs",
    "tdp_w": "gpu.tdp_w",
    "price_usd": "gpu.price_usd",
}
PEAK_KEY_PARAM = "precision.peak_key"


@dataclass(frozen=True)
class Spec:
    peak_key: str  # which peak the math ran at
    peak_tflops: float | None  # at that key, per GPU
    memory_bandwidth_gbs: float | None
    tdp_w: float | None  # per GPU
    price_usd: float | None  # per GPU
    from_profile: tuple[str, ...] = ()  # the figures the run never logged, taken from today's conf/


def run_spec(gpu: str, precision: str, tf32_math: bool, params: dict[str, str]) -> Spec:
    """The run's figures from its params; a figure it never logged from today's profile (named in
    `from_profile`). A figure logged as None stays None: its profile had none when it ran."""
    profile, fallen = spec_sheet(gpu), []

    def figure(name: str, param: str) -> float | None:
        if param in params:
            return positive_number(params[param])
        fallen.append(name)
        return positive_number(profile.get(name))

    if precision == "fp32" and tf32_math:  # published "fp32": TF32 tensor-core math, at TF32's peak
        key = "tf32"
    elif PEAK_KEY_PARAM in params:
        key = params[PEAK_KEY_PARAM]
    else:
        key = _precision_peak_keys().get(precision, precision)
        fallen.append("peak_key")
    if any(p == PEAK_PARAM or p.startswith(f"{PEAK_PARAM}.") for p in params):
        peak = positive_number(params.get(f"{PEAK_PARAM}.{key}"))
    else:
        peaks = profile.get("peak_tflops")
        peak = positive_number(peaks.get(key)) if isinstance(peaks, dict) else None
        fallen.append("peak_tflops")
    figures = {name: figure(name, param) for name, param in FIGURE_PARAMS.items()}
    return Spec(key, peak, **figures, from_profile=tuple(fallen))


@cache
def spec_sheet(gpu: str) -> dict:
    """Today's gpu profile; {} for imported GPUs without a profile."""
    return devices.load_profile(gpu) or {}


@cache
def _precision_peak_keys() -> dict[str, str]:
    folder = PROJECT_ROOT / "conf" / "precision"
    return {path.stem: OmegaConf.load(path).get("peak_key", path.stem) for path in folder.glob("*.yaml")}
