"""GPU telemetry: a thread of the job process samples the job's GPUs through NVML while the ranks train.

Per chosen GPU and interval: utilisation, memory in use, power, the cumulative energy counter,
temperature, SM and memory clocks, clock-event (throttle) reasons and, less often, PCIe throughput;
plus the host's CPU utilisation and memory, which are read even where NVML is missing. The whole
job goes to MLflow as series and to telemetry.csv; the summary covers the ranks' measured window.
"""

from __future__ import annotations

import contextlib
import csv
import io
import math
import statistics
import threading
import time
from collections.abc import Callable

from src import console
from src.hardware import host, nvml, system_metrics
from src.results import recorded

GPU_FIELDS = (
    "gpu_util_pct",
    "mem_util_pct",
    "mem_used_gb",
    "power_w",
    recorded.ENERGY_J,  # cumulative since the driver loaded (the metric: its rise over the window)
    "temperature_c",
    "sm_clock_mhz",
    "mem_clock_mhz",
    "clock_event_reasons",  # NVML bitmask
    "pcie_tx_mbs",
    "pcie_rx_mbs",
)
HOST_FIELDS = ("cpu_util_pct", "host_mem_used_gb")
NOT_SERIES = {recorded.ENERGY_J, "clock_event_reasons"}  # a counter and a bitmask: telemetry.csv only
# MLflow's sqlite store takes a few thousand points a second: bound the series, not the CSV
SERIES_POINTS = 200

# nvml.h clock-event reasons; HW slowdown (0x8) may be heat or power, so it counts only as "throttled"
POWER_REASONS = 0x04 | 0x80  # SW power cap, HW power brake
THERMAL_REASONS = 0x20 | 0x40  # SW and HW thermal slowdown
THROTTLE_REASONS = POWER_REASONS | THERMAL_REASONS | 0x08


def _fields(label: str) -> tuple[str, ...]:
    return HOST_FIELDS if label == "host" else GPU_FIELDS


def _attr(obj, name: str, scale: float = 1.0) -> float | None:
    return None if obj is None else getattr(obj, name) * scale


class GpuReader:
    """One GPU's figures for one sample, in GPU_FIELDS order; None for what it cannot report."""

    def __init__(self, call: nvml.Caller, pcie_every: int):
        self.call, self.pcie_every = call, pcie_every

    def read(self, tick: int) -> tuple:
        call = self.call
        util = call("nvmlDeviceGetUtilizationRates")
        memory = call("nvmlDeviceGetMemoryInfo")
        # PCIe counters are sampled by NVML over 20 ms while the call blocks: only every n-th tick
        pcie = self.pcie_every > 0 and tick % self.pcie_every == 0
        return (
            _attr(util, "gpu"),
            _attr(util, "memory"),
            _attr(memory, "used", 1e-9),
            nvml.scaled(call("nvmlDeviceGetPowerUsage"), 1e-3),  # mW
            nvml.scaled(call("nvmlDeviceGetTotalEnergyConsumption"), 1e-3),  # mJ
            call("nvmlDeviceGetTemperature", nvml.TEMPERATURE_GPU),
            call("nvmlDeviceGetClockInfo", nvml.CLOCK_SM),
            call("nvmlDeviceGetClockInfo", nvml.CLOCK_MEM),
            call.first(
                ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons")
            ),
            nvml.scaled(call("nvmlDeviceGetPcieThroughput", nvml.PCIE_TX), 1e-3) if pcie else None,  # KB/s
            nvml.scaled(call("nvmlDeviceGetPcieThroughput", nvml.PCIE_RX), 1e-3) if pcie else None,
        )


class HostReader:
    """Host CPU utilisation (from /proc/stat between samples) and memory in use; None off Linux."""

    def __init__(self):
        self._last = _cpu_times()

    def read(self, tick: int) -> tuple:
        now, last = _cpu_times(), self._last
        self._last = now
        util = None
        if now and last and now[1] > last[1]:
            util = 100.0 * (1.0 - (now[0] - last[0]) / (now[1] - last[1]))
        return (util, _host_mem_used_gb())


def _cpu_times() -> tuple[int, int] | None:
    """(idle, total) jiffies of all CPUs."""
    try:
        with open("/proc/stat") as f:
            values = [int(v) for v in f.readline().split()[1:9]]  # user .. steal (guest is in user)
    except (OSError, ValueError):
        return None
    return values[3] + values[4], sum(values)  # idle + iowait


def _host_mem_used_gb() -> float | None:
    info = host.meminfo()
    if not info or "MemAvailable" not in info:
        return None
    return (info["MemTotal"] - info["MemAvailable"]) / 1e9


class Sampler:
    """Calls every source's read(tick) each interval from a daemon thread; rows (time, *values)."""

    def __init__(self, sources: dict[str, Callable[[int], tuple]], interval_s: float):
        self.sources, self.interval_s = sources, interval_s
        self.rows: dict[str, list[tuple]] = {label: [] for label in sources}
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="telemetry", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        tick, due = 0, time.monotonic()
        while True:
            try:
                for label, read in self.sources.items():
                    self.rows[label].append((time.time(), *read(tick)))  # wall clock, as the ranks'
            except Exception as exc:  # a fault here must end the sampling, never the job
                self.error = f"{type(exc).__name__}: {exc}"
                return
            if self._stop.is_set():  # the sample after stop() closes the series past the window
                return
            tick += 1
            due += self.interval_s
            wait = due - time.monotonic()
            if wait < 0:  # fell behind (a slow read): carry on from now rather than burst
                due, wait = time.monotonic(), 0.0
            self._stop.wait(wait)


def summarize(
    rows: dict[str, list[tuple]], window: tuple[float, float], items: float, world: int
) -> recorded.Telemetry:
    """Figures over the measured window [start, end] only; `items` over all `world` ranks."""
    start, end = window
    gpus = [label for label in rows if label != "host"]
    inside = {label: [r for r in rows[label] if start <= r[0] <= end] for label in rows}

    def values(label: str, field: str) -> list[float]:
        i = 1 + _fields(label).index(field)
        return [r[i] for r in inside[label] if r[i] is not None]

    def mean(labels: list[str], field: str, of=lambda v: v) -> float | None:
        """The mean over devices of each device's mean (devices may differ in sample count)."""
        means = [statistics.fmean(map(of, found)) for label in labels if (found := values(label, field))]
        return statistics.fmean(means) if means else None

    def peak(labels: list[str], field: str) -> float | None:
        return max((v for label in labels for v in values(label, field)), default=None)

    def share(mask: int) -> float | None:
        return mean(gpus, "clock_event_reasons", of=lambda reasons: bool(int(reasons) & mask))

    samples, energy_j, per_item_j = None, None, None
    if gpus:
        samples = min(len(inside[g]) for g in gpus)
        energy = [_window_energy_j(rows[g], start, end) for g in gpus]
        if all(e is not None for e in energy):
            energy_j = sum(energy)
            # per GPU over items per rank: right also when other nodes hold the rest of the ranks
            per_item_j = energy_j / len(gpus) / (items / world) if items else None
    has_host = "host" in rows
    return recorded.Telemetry(
        power_mean_w=mean(gpus, "power_w"),  # per GPU
        power_max_w=peak(gpus, "power_w"),
        sm_clock_mean_mhz=mean(gpus, "sm_clock_mhz"),
        mem_clock_mean_mhz=mean(gpus, "mem_clock_mhz"),
        temperature_max_c=peak(gpus, "temperature_c"),
        gpu_util_mean_pct=mean(gpus, "gpu_util_pct"),
        mem_util_mean_pct=mean(gpus, "mem_util_pct"),
        mem_used_max_gb=peak(gpus, "mem_used_gb"),
        throttled_power_share=share(POWER_REASONS),
        throttled_thermal_share=share(THERMAL_REASONS),
        throttled_share=share(THROTTLE_REASONS),
        pcie_tx_mean_mbs=mean(gpus, "pcie_tx_mbs"),
        pcie_rx_mean_mbs=mean(gpus, "pcie_rx_mbs"),
        cpu_util_mean_pct=mean(["host"], "cpu_util_pct") if has_host else None,
        host_mem_used_max_gb=peak(["host"], "host_mem_used_gb") if has_host else None,
        telemetry_samples_per_gpu=samples,
        energy_j=energy_j,
        energy_per_item_j=per_item_j,
    )


def _window_energy_j(rows: list[tuple], start: float, end: float) -> float | None:
    """The energy counter's rise over the window, read between the samples either side of each end."""
    index = 1 + GPU_FIELDS.index(recorded.ENERGY_J)
    points = [(r[0], r[index]) for r in rows if r[index] is not None]
    at_start, at_end = _interpolate(points, start), _interpolate(points, end)
    return None if at_start is None or at_end is None else at_end - at_start


def _interpolate(points: list[tuple[float, float]], t: float) -> float | None:
    before = [p for p in points if p[0] <= t]
    after = [p for p in points if p[0] >= t]
    if not before or not after:
        return None
    (t0, v0), (t1, v1) = before[-1], after[0]
    return v0 if t1 == t0 else v0 + (v1 - v0) * (t - t0) / (t1 - t0)


def series_points(rows: dict[str, list[tuple]], max_points: int = SERIES_POINTS) -> list[tuple]:
    """(key, value, timestamp ms, step) points keyed telemetry/<device>/<field>, at most `max_points`
    per series: consecutive samples are averaged in equal runs, stamped with the run's first sample
    (its time, and its index as the step). telemetry.csv keeps every sample."""
    points = []
    for label, device_rows in rows.items():
        fields = _fields(label)
        run = math.ceil(len(device_rows) / max_points) or 1
        for step in range(0, len(device_rows), run):
            chunk = device_rows[step : step + run]
            stamp = int(chunk[0][0] * 1000)
            for i, field in enumerate(fields, start=1):
                found = [r[i] for r in chunk if r[i] is not None]
                if found and field not in NOT_SERIES:
                    points.append((f"telemetry/{label}/{field}", statistics.fmean(found), stamp, step))
    return points


def to_csv(rows: dict[str, list[tuple]]) -> str:
    """One line per device and sample, in time order; a field the device lacks is left empty."""
    columns = GPU_FIELDS + HOST_FIELDS
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["time", "device", *columns])
    lines = []
    for label, device_rows in rows.items():
        fields = _fields(label)
        for row in device_rows:
            values = dict(zip(fields, row[1:], strict=True))
            cells = ("" if values.get(c) is None else round(values[c], 3) for c in columns)
            lines.append((round(row[0], 3), label, *cells))
    writer.writerows(sorted(lines, key=lambda line: line[0]))
    return out.getvalue()


class Watch:
    """Samples from entering to leaving the block, then logs the series and telemetry.csv to `run`.

    Nothing here may fail the job: a telemetry fault becomes a notice and missing figures.
    """

    def __init__(self, cfg, devices: list, run):
        self.cfg, self.devices, self.run = cfg, devices, run
        self.sampler: Sampler | None = None
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> Watch:
        if self.cfg.enabled:
            try:
                self.sampler = Sampler(self._sources(), self.cfg.interval_ms / 1000)
                self.sampler.start()
            except Exception as exc:
                self._stack.close()
                self.sampler = None
                console.warning(f"telemetry not started: {exc}")
        return self

    def _sources(self) -> dict[str, Callable[[int], tuple]]:
        sources = {"host": HostReader().read}
        if self.devices:
            lib = self._stack.enter_context(nvml.session())
            if lib is not None:
                every = self.cfg.pcie_interval_ms // self.cfg.interval_ms
                for i, device in enumerate(self.devices):  # gpu<i> is local rank i's device
                    handle = lib.nvmlDeviceGetHandleByIndex(device.index)
                    sources[f"gpu{i}"] = GpuReader(nvml.Caller(lib, handle), every).read
        return sources

    def __exit__(self, *exc_info) -> bool:
        if self.sampler is None:
            return False
        self.sampler.stop()
        self._stack.close()
        if self.sampler.error:
            console.warning(f"telemetry stopped early: {self.sampler.error}")
        try:
            self.run.log_series(system_metrics.with_mlflow_names(series_points(self.sampler.rows)))
            self.run.log_files({"telemetry.csv": to_csv(self.sampler.rows)})
        except Exception as exc:
            console.warning(f"telemetry not logged: {exc}")
        return False  # the block's own exception, if any, goes on

    def summary(self, outcome) -> recorded.Telemetry:
        """Window figures for the job's metrics, from its outcome (src/run/outcome.py's JobOutcome:
        its window, measured_items and world_size); none when telemetry is off or failed."""
        if self.sampler is None:
            return recorded.Telemetry()
        try:
            return summarize(self.sampler.rows, outcome.window, outcome.measured_items, outcome.world_size)
        except Exception as exc:
            console.warning(f"telemetry not summarised: {exc}")
            return recorded.Telemetry()
