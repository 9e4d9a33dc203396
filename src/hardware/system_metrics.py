"""The sampled series under MLflow's own names too, so the run page's System metrics tab draws them.

MLflow's system-metrics sampler logs `system/gpu_<i>_utilization_percentage` and the like, and the
UI's System metrics tab charts the `system/` keys. The series that have an MLflow name are logged a
second time under it (in MLflow's unit: megabytes, not GB); the others (clocks, temperature, PCIe)
stay under `telemetry/` only. `<i>` is the job's own device index, as `gpu<i>` is.
"""

from __future__ import annotations

import re

PREFIX = "system/"
# telemetry field -> (MLflow's name, factor from our unit to its)
GPU_NAMES = {
    "gpu_util_pct": ("gpu_{i}_utilization_percentage", 1.0),
    "mem_used_gb": ("gpu_{i}_memory_usage_megabytes", 1e3),
    "power_w": ("gpu_{i}_power_usage_watts", 1.0),
}
HOST_NAMES = {
    "cpu_util_pct": ("cpu_utilization_percentage", 1.0),
    "host_mem_used_gb": ("system_memory_usage_megabytes", 1e3),
}
_SERIES = re.compile(r"telemetry/(host|gpu(\d+))/(\w+)")


def mlflow_name(key: str) -> tuple[str, float] | None:
    """`telemetry/gpu0/power_w` -> (`system/gpu_0_power_usage_watts`, 1.0); None without one."""
    found = _SERIES.fullmatch(key)
    if found is None:
        return None
    label, index, field = found.groups()
    named = HOST_NAMES.get(field) if label == "host" else GPU_NAMES.get(field)
    if named is None:
        return None
    name, factor = named
    return PREFIX + name.format(i=index), factor


def with_mlflow_names(points: list[tuple]) -> list[tuple]:
    """(key, value, timestamp ms, step) points, plus a copy under MLflow's name of each that has one."""
    copies = []
    for key, value, stamp, step in points:
        named = mlflow_name(key)
        if named is not None:
            copies.append((named[0], value * named[1], stamp, step))
    return points + copies
