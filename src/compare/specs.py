"""The spec-sheet figures a run is judged by: the ones it logged, as its gpu profile and precision
were when it ran; today's conf/ profile stands in only for figures a run never logged (imported
runs log TDP and price but no peak or bandwidth; runs older than a figure lack it), and compare
says so in its report.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from omegaconf import OmegaConf

from src import recorded
from src.hardware import devices
from src.paths import PROJECT_ROOT
from src.recorded import positive_number


@dataclass(frozen=True)
class Spec:
    peak_key: str  # which peak the math ran at
    peak_tflops: float | None  # at that key, per GPU
    memory_bandwidth_gbs: float | None
    tdp_w: float | None  # per GPU
    price_usd: float | None  # per GPU
    from_profile: tuple[str, ...] = ()  # the figures the run never logged, taken from today's conf/


def run_spec(result: recorded.RunResult) -> Spec:
    """The run's figures as it logged them; a figure it never logged from today's profile (named in
    `from_profile`). A figure logged as None stays None: its profile had none when it ran."""
    logged, profile = result.spec, spec_sheet(result.gpu)
    fallen = logged.unlogged
    key = logged.peak_key or _precision_peak_keys().get(result.precision, result.precision)
    if "peak_tflops" in fallen:
        peaks = profile.get("peak_tflops")
        peak = positive_number(peaks.get(key)) if isinstance(peaks, dict) else None
    else:  # the peaks as logged, at the key the math ran at
        peak = positive_number(result.params.get(f"{recorded.PEAK_PARAM}.{key}"))
    figures = {
        name: positive_number(profile.get(name)) if name in fallen else getattr(logged, name)
        for name in recorded.SPEC_PARAMS
    }
    return Spec(key, peak, **figures, from_profile=fallen)


@cache
def spec_sheet(gpu: str) -> dict:
    """Today's gpu profile; {} for imported GPUs without a profile."""
    return devices.load_profile(gpu) or {}


@cache
def _precision_peak_keys() -> dict[str, str]:
    folder = PROJECT_ROOT / "conf" / "precision"
    return {path.stem: OmegaConf.load(path).get("peak_key", path.stem) for path in folder.glob("*.yaml")}
