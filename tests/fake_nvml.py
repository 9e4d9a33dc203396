"""A stand-in for the `pynvml` module: GPUs described as data; functions can be missing or unsupported.

Install it with `install(monkeypatch, FakeNvml([...]))`: code under test imports `pynvml` and gets it.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from types import SimpleNamespace

# nvml.h return codes
INVALID_ARGUMENT, NOT_SUPPORTED, NOT_FOUND, LIBRARY_NOT_FOUND = 2, 3, 6, 12


class NVMLError(Exception):
    def __init__(self, value: int):
        super().__init__(f"NVML error {value}")
        self.value = value


@dataclass
class FakeGpu:
    name: str
    bus_id: str
    uuid: str
    memory_total: float = 48e9
    memory_used: float = 20e9
    util: int = 97
    mem_util: int = 60
    power_w: float = 280.0
    temperature: int = 70
    sm_clock: int = 1800
    mem_clock: int = 8000
    reasons: int = 0
    pcie_kbs: int = 5000
    power_limit_w: float = 300.0
    nvlinks: dict[int, tuple[str, int]] = field(default_factory=dict)  # link -> (remote bus id, type)
    processes: list[tuple[int, str, int]] = field(default_factory=list)  # compute: (pid, name, bytes)


class FakeNvml:
    """Module-like object. Every `nvml*` attribute read is counted in `calls`; names in `missing`
    do not exist; names in `unsupported` raise NVML_ERROR_NOT_SUPPORTED."""

    NVMLError = NVMLError

    def __init__(self, gpus, missing=(), unsupported=(), init_error: int | None = None, clock=time.time):
        self.gpus = list(gpus)
        self.missing, self.unsupported = set(missing), set(unsupported)
        self.init_error = init_error
        self.calls: Counter = Counter()
        self.clock = clock  # what the energy counter integrates over
        self.started = clock()

    def __getattribute__(self, name):
        if name.startswith("nvml"):
            if name in object.__getattribute__(self, "missing"):
                raise AttributeError(name)
            object.__getattribute__(self, "calls")[name] += 1
            if name in object.__getattribute__(self, "unsupported"):

                def unsupported(*args):
                    raise NVMLError(NOT_SUPPORTED)

                return unsupported
        return object.__getattribute__(self, name)

    # library and system
    def nvmlInit(self):
        if self.init_error is not None:
            raise NVMLError(self.init_error)

    def nvmlShutdown(self):
        pass

    def nvmlSystemGetDriverVersion(self):
        return "550.54.15"

    def nvmlSystemGetCudaDriverVersion_v2(self):
        return 12040

    def nvmlSystemGetCudaDriverVersion(self):
        return 12040

    # listing
    def nvmlDeviceGetCount(self):
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i):
        return self.gpus[i]

    def nvmlDeviceGetName(self, h):
        return h.name.encode()  # older bindings answer bytes

    def nvmlDeviceGetPciInfo(self, h):
        return SimpleNamespace(busId=h.bus_id)

    def nvmlDeviceGetUUID(self, h):
        return h.uuid

    def nvmlDeviceGetMemoryInfo(self, h):
        return SimpleNamespace(total=h.memory_total, used=h.memory_used, free=h.memory_total - h.memory_used)

    # samples
    def nvmlDeviceGetUtilizationRates(self, h):
        return SimpleNamespace(gpu=h.util, memory=h.mem_util)

    def nvmlDeviceGetPowerUsage(self, h):
        return int(h.power_w * 1000)  # mW

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        return int(h.power_w * (self.clock() - self.started) * 1000)  # mJ at constant power

    def nvmlDeviceGetTemperature(self, h, sensor):
        return h.temperature

    def nvmlDeviceGetClockInfo(self, h, kind):
        return {1: h.sm_clock, 2: h.mem_clock}[kind]

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        return h.reasons

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h):
        return h.reasons

    def nvmlDeviceGetPcieThroughput(self, h, counter):
        return h.pcie_kbs

    # environment
    def nvmlDeviceGetVbiosVersion(self, h):
        return "96.00.74.00.01"

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h):
        return 4

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h):
        return 4

    def nvmlDeviceGetCurrPcieLinkWidth(self, h):
        return 16

    def nvmlDeviceGetMaxPcieLinkWidth(self, h):
        return 16

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return int(h.power_limit_w * 1000)

    def nvmlDeviceGetPowerManagementDefaultLimit(self, h):
        return int(h.power_limit_w * 1000)

    def nvmlDeviceGetEccMode(self, h):
        return [1, 1]

    def nvmlDeviceGetMaxClockInfo(self, h, kind):
        return {1: 2100, 2: 8001}[kind]

    def nvmlDeviceGetNvLinkState(self, h, link):
        if link >= 18:
            raise NVMLError(INVALID_ARGUMENT)
        return 1 if link in h.nvlinks else 0

    def nvmlDeviceGetNvLinkRemotePciInfo(self, h, link):
        return SimpleNamespace(busId=h.nvlinks[link][0])

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, h, link):
        return h.nvlinks[link][1]

    def nvmlDeviceGetNvLinkVersion(self, h, link):
        return 4

    def nvmlDeviceGetTopologyCommonAncestor(self, a, b):
        return 30  # NVML_TOPOLOGY_HOSTBRIDGE

    # processes
    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, _, used in h.processes]

    def nvmlSystemGetProcessName(self, pid):
        names = {p: name for gpu in self.gpus for p, name, _ in gpu.processes}
        if pid not in names:
            raise NVMLError(NOT_FOUND)
        return names[pid].encode()


def install(monkeypatch, fake: FakeNvml) -> FakeNvml:
    """Make `import pynvml` return the fake, and let the no-NVML notice show again."""
    from src.hardware import nvml

    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setattr(nvml, "_notice_shown", False)
    return fake


A6000 = dict(name="NVIDIA RTX A6000", uuid="GPU-a6000")
RTX3090 = dict(name="NVIDIA GeForce RTX 3090", uuid="GPU-3090")


def mixed_host() -> list[FakeGpu]:
    """NVML lists the 3090 first, but the A6000 sits on the lower PCI bus."""
    return [
        FakeGpu(bus_id="00000000:65:00.0", memory_total=24e9, power_w=340.0, **RTX3090),
        FakeGpu(bus_id="00000000:17:00.0", **A6000),
    ]
