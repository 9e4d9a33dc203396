"""The telemetry sampler and its window summary, against a fake NVML module."""

from __future__ import annotations

import re
import time
from types import SimpleNamespace

import pytest
from conftest import compose_cfg
from fake_nvml import FakeNvml, install, mixed_host

from src.config.finalise import finalize
from src.errors import ConfigError
from src.hardware import devices, nvml, telemetry
from src.paths import PROJECT_ROOT
from src.results import recorded

GPU = telemetry.GPU_FIELDS


def gpu_row(t: float, **values) -> tuple:
    return (t, *(values.get(f) for f in GPU))


def two_gpus_ten_seconds() -> dict[str, list[tuple]]:
    """Samples at t = 0..10 s; 300 W inside the window (2.5, 7.5), spikes outside it."""
    rows: dict[str, list[tuple]] = {"gpu0": [], "gpu1": [], "host": []}
    for t in range(11):
        outside = t < 2 or t > 8
        for label in ("gpu0", "gpu1"):
            reasons = {3: 0x04, 4: 0x40, 5: 0x08}.get(t, 0) if label == "gpu0" else 0
            rows[label].append(
                gpu_row(
                    t,
                    power_w=900.0 if outside else 300.0,
                    energy_j=1000.0 + 300.0 * t,  # 300 J/s: a linear counter
                    temperature_c=95 if outside else 60 + t,
                    sm_clock_mhz=1000 if label == "gpu0" else 2000,
                    gpu_util_pct=100,
                    clock_event_reasons=reasons,
                )
            )
        rows["host"].append((t, 50.0 if not outside else 0.0, 8.0))
    return rows


def test_window_summary_covers_only_the_measured_window():
    summary = telemetry.summarize(two_gpus_ten_seconds(), (2.5, 7.5), items=1000, world=2)
    assert summary.power_mean_w == 300.0  # the 900 W spikes outside the window are left out
    assert summary.power_max_w == 300.0
    assert summary.temperature_max_c == 67  # t = 7, not the 95 outside
    assert summary.sm_clock_mean_mhz == 1500.0
    assert summary.gpu_util_mean_pct == 100
    assert summary.cpu_util_mean_pct == 50.0
    assert summary.telemetry_samples_per_gpu == 5  # t = 3..7
    # counter read between samples at both ends: 300 J/s x 5 s on each of 2 GPUs
    assert summary.energy_j == pytest.approx(3000.0)
    assert summary.energy_per_item_j == pytest.approx(3.0)  # 1500 J per GPU / 500 items per rank
    # 10 GPU samples in the window: one power cap, one thermal, one HW slowdown (either cause)
    assert summary.throttled_power_share == pytest.approx(0.1)
    assert summary.throttled_thermal_share == pytest.approx(0.1)
    assert summary.throttled_share == pytest.approx(0.3)


def test_a_gpu_without_energy_counter_leaves_energy_out_but_not_the_rest():
    rows = two_gpus_ten_seconds()
    energy = 1 + GPU.index("energy_j")
    rows["gpu1"] = [r[:energy] + (None,) + r[energy + 1 :] for r in rows["gpu1"]]
    summary = telemetry.summarize(rows, (2.5, 7.5), items=1000, world=2)
    assert summary.energy_j is None and summary.energy_per_item_j is None
    assert summary.power_mean_w == 300.0


def test_a_window_past_the_last_sample_has_no_energy():
    summary = telemetry.summarize(two_gpus_ten_seconds(), (2.5, 12.0), items=1000, world=2)
    assert summary.energy_j is None


def test_pcie_is_read_only_every_nth_sample():
    fake = FakeNvml(mixed_host())
    reader = telemetry.GpuReader(nvml.Caller(fake, fake.gpus[0]), pcie_every=3)
    tx = GPU.index("pcie_tx_mbs")
    assert [reader.read(tick)[tx] for tick in range(7)] == [5.0, None, None, 5.0, None, None, 5.0]
    assert fake.calls["nvmlDeviceGetPcieThroughput"] == 6  # tx and rx at ticks 0, 3, 6


class RecordingRun:
    def __init__(self, fail: bool = False):
        self.series, self.files, self.fail = [], {}, fail

    def log_series(self, points):
        if self.fail:
            raise OSError("store is gone")
        self.series.append(points)

    def log_files(self, files):
        self.files.update(files)


def watch_for(samples: int, devices, run, **overrides) -> telemetry.Watch:
    """Sample until every source has `samples` rows (or the sampler stopped), however slow the host."""
    cfg = SimpleNamespace(**{"enabled": True, "interval_ms": 10, "pcie_interval_ms": 20, **overrides})
    with telemetry.Watch(cfg, devices, run) as watch:
        sampler = watch.sampler
        while sampler and sampler.error is None and min(map(len, sampler.rows.values())) < samples:
            time.sleep(0.01)
    return watch


class SampleClock:
    """The sampler's wall clock, remembering its last reading: a fake energy counter that reads
    `last` rises exactly with the samples' own time stamps, however late the thread runs."""

    def __init__(self, monkeypatch):
        self.last = time.time()
        monkeypatch.setattr(telemetry, "time", SimpleNamespace(time=self.time, monotonic=time.monotonic))

    def time(self) -> float:
        self.last = time.time()
        return self.last


def column(rows, field):
    return [r[1 + GPU.index(field)] for r in rows]


def test_sampler_survives_missing_and_unsupported_functions(monkeypatch):
    fake = install(
        monkeypatch,
        FakeNvml(
            mixed_host(),
            missing={"nvmlDeviceGetTotalEnergyConsumption", "nvmlDeviceGetCurrentClocksEventReasons"},
            unsupported={"nvmlDeviceGetPcieThroughput", "nvmlDeviceGetTemperature"},
        ),
    )
    fake.gpus[1].reasons = 0x04  # the A6000: NVML index 1, first on the bus
    run = RecordingRun()
    watch = watch_for(3, devices.list_devices(), run)
    rows = watch.sampler.rows
    assert set(rows) == {"host", "gpu0", "gpu1"}
    assert len(rows["gpu0"]) >= 3
    assert set(column(rows["gpu0"], "power_w")) == {280.0}  # gpu0: the A6000, first on the bus
    assert set(column(rows["gpu1"], "power_w")) == {340.0}
    assert set(column(rows["gpu0"], "energy_j")) == {None}
    assert set(column(rows["gpu0"], "temperature_c")) == {None}
    # read through the older function name, from the right device
    assert (
        set(column(rows["gpu0"], "clock_event_reasons")),
        set(column(rows["gpu1"], "clock_event_reasons")),
    ) == (
        {0x04},
        {0},
    )
    # an unsupported query is asked once per device and argument, then no more
    assert fake.calls["nvmlDeviceGetPcieThroughput"] == 4
    assert fake.calls["nvmlDeviceGetTemperature"] == 2
    assert watch.sampler.error is None


def test_watch_logs_series_in_batches_and_a_csv(monkeypatch):
    clock = SampleClock(monkeypatch)
    install(monkeypatch, FakeNvml(mixed_host(), clock=lambda: clock.last))
    run = RecordingRun()
    watch = watch_for(6, devices.list_devices(), run)
    assert len(run.series) == 1  # one hand-over; JobRun splits it into 1000-point batches
    keys = {key for key, *_ in run.series[0]}
    assert {"telemetry/gpu0/power_w", "telemetry/gpu1/sm_clock_mhz", "telemetry/host/cpu_util_pct"} <= keys
    assert "telemetry/gpu0/energy_j" not in keys  # the raw counter stays in the CSV
    samples = len(watch.sampler.rows["gpu0"])
    assert sum(1 for key, *_ in run.series[0] if key == "telemetry/gpu0/power_w") == samples
    lines = run.files["telemetry.csv"].splitlines()
    assert lines[0].startswith("time,device,gpu_util_pct")
    assert len(lines) == 1 + 3 * samples
    rows = watch.sampler.rows
    # each tick samples gpu0, then gpu1: this window holds ticks 1 to n-2 of both
    window = (rows["gpu0"][1][0], rows["gpu1"][-2][0])
    outcome = SimpleNamespace(window=window, measured_items=640, world_size=2)
    summary = watch.summary(outcome)
    assert summary.power_mean_w == pytest.approx((280.0 + 340.0) / 2)
    # the fake's counter rises at the power draw: energy per item = power x window / items per rank
    span = window[1] - window[0]
    assert summary.energy_per_item_j == pytest.approx((280 + 340) / 2 * span / 320, rel=1e-3)


def test_telemetry_faults_never_fail_the_job(monkeypatch, capsys):
    install(monkeypatch, FakeNvml(mixed_host()))
    watch_for(1, devices.list_devices(), RecordingRun(fail=True))
    assert "telemetry not logged: store is gone" in capsys.readouterr().out

    def broken(tick):
        raise RuntimeError("bad read")

    sampler = telemetry.Sampler({"host": broken}, 0.01)
    sampler.start()
    sampler.stop()
    assert sampler.error == "RuntimeError: bad read"
    bad_outcome = SimpleNamespace(window=(0, 1), world_size=1)  # its items are missing
    assert watch_for(1, [], RecordingRun()).summary(bad_outcome) == recorded.Telemetry()


def test_without_nvml_one_notice_and_host_figures_only(monkeypatch, capsys):
    install(monkeypatch, FakeNvml(mixed_host()))
    found = devices.list_devices()
    install(monkeypatch, FakeNvml([], init_error=12))  # the driver went away
    run = RecordingRun()
    watch = watch_for(1, found, run)
    watch_for(1, found, run)
    assert set(watch.sampler.rows) == {"host"}
    assert capsys.readouterr().out.count("NVML is not available") == 1


def test_disabled_telemetry_samples_and_logs_nothing():
    run = RecordingRun()
    watch = watch_for(1, [], run, enabled=False)
    assert watch.sampler is None and run.series == [] and run.files == {}
    assert watch.summary(SimpleNamespace(window=(0, 1), measured_items=1, world_size=1)) == recorded.Telemetry()


@pytest.mark.parametrize(
    "override, message",
    [
        ("telemetry.interval_ms=5", "telemetry.interval_ms=5: must be an integer >= 10"),
        ("telemetry.pcie_interval_ms=50", "telemetry.pcie_interval_ms=50: must be 0 (off) or an integer >= "),
    ],
)
def test_bad_telemetry_settings_are_named(override, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        finalize(compose_cfg(["gpu=cpu", "model=gpt2", override]))


def test_long_series_are_averaged_down_for_mlflow():
    rows = {"gpu0": [gpu_row(t / 10, power_w=float(t)) for t in range(1000)]}
    points = [p for p in telemetry.series_points(rows, max_points=200) if p[0] == "telemetry/gpu0/power_w"]
    assert len(points) == 200
    assert points[0] == ("telemetry/gpu0/power_w", 2.0, 0, 0)  # mean of samples 0..4, at sample 0
    assert points[-1][1:] == (997.0, 99500, 995)
    short = telemetry.series_points({"gpu0": rows["gpu0"][:50]}, max_points=200)
    assert [p[1] for p in short if p[0] == "telemetry/gpu0/power_w"] == [float(t) for t in range(50)]


def test_every_nvml_function_the_code_calls_exists_in_pynvml():
    """Guarded calls would turn a misspelt name into a silently empty column: check the names."""
    pynvml = pytest.importorskip("pynvml")
    source = "".join(path.read_text() for path in (PROJECT_ROOT / "src").rglob("*.py"))
    names = set(re.findall(r"\bnvml(?:Device|System)\w+", source)) | set(
        re.findall(r"\bnvml(?:Init|Shutdown)\b", source)
    )
    assert len(names) > 20
    assert sorted(n for n in names if not hasattr(pynvml, n)) == []
