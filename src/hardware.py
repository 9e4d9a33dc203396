"""Which devices a job runs on: NVML lists the host's GPUs, the gpu profile picks `count` of them.

The job process never initialises CUDA: it reads NVML and hands the ranks their devices through
CUDA_VISIBLE_DEVICES, ordered by PCI bus id so that NVML's and CUDA's numbering agree.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import OmegaConf

from src.config import PROJECT_ROOT, ConfigError

GPU_PROFILES = PROJECT_ROOT / "conf" / "gpu"


@dataclass(frozen=True)
class Device:
    index: int  # NVML index
    name: str
    pci_bus_id: str
    uuid: str = ""
    memory_gb: float = 0.0


@dataclass
class Selection:
    profile: str  # the gpu profile the run is tagged with
    device_kind: str  # cuda | cpu
    devices: list[Device] = field(default_factory=list)
    gpu_name: str = "cpu"

    @property
    def cuda_visible_devices(self) -> str:
        # UUIDs stay valid whatever numbering CUDA uses; fall back to bus-ordered indices.
        if all(d.uuid for d in self.devices):
            return ",".join(d.uuid for d in self.devices)
        return ",".join(str(i) for i in range(len(self.devices)))


def list_devices(nvml=None) -> list[Device]:
    """The host's GPUs ordered by PCI bus id; [] when NVML or its driver is missing."""
    if nvml is None:
        try:
            import pynvml as nvml
        except ImportError:
            return []
    try:
        nvml.nvmlInit()
    except Exception:  # no driver, no library, container without GPUs: a CPU host
        return []
    try:
        devices = []
        for i in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(i)
            devices.append(
                Device(
                    index=i,
                    name=_text(nvml.nvmlDeviceGetName(handle)),
                    pci_bus_id=_text(nvml.nvmlDeviceGetPciInfo(handle).busId),
                    uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
                    memory_gb=nvml.nvmlDeviceGetMemoryInfo(handle).total / 1e9,
                )
            )
        return sorted(devices, key=lambda d: d.pci_bus_id.lower())
    finally:
        nvml.nvmlShutdown()


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def matches(profile_match: list[str], device_name: str) -> bool:
    return any(m.lower() in device_name.lower() for m in profile_match)


def known_profiles(directory: Path = GPU_PROFILES) -> dict[str, list[str]]:
    """Profile name -> match strings, for every profile that names a CUDA device."""
    profiles = {}
    for path in sorted(directory.glob("*.yaml")):
        data = OmegaConf.load(path)
        if data.get("device") == "cuda" and data.get("match"):
            profiles[data.name] = list(data.match)
    return profiles


def host_summary(devices: list[Device]) -> str:
    if not devices:
        return "no GPU (NVML found none)"
    return ", ".join(f"{n} x {name}" for name, n in Counter(d.name for d in devices).items())


def select(gpu_cfg, devices: list[Device], profiles: dict[str, list[str]] | None = None) -> Selection:
    """Pick the devices a gpu profile asks for, or stop with what it wanted and what the host has."""
    count = gpu_cfg.count
    if gpu_cfg.device == "cpu":
        return Selection(profile=gpu_cfg.name, device_kind="cpu")
    if gpu_cfg.device == "auto":
        if not devices:
            return Selection(profile="cpu", device_kind="cpu")
        chosen = devices[:count]
        if len(chosen) < count:
            raise ConfigError(f"gpu=auto gpu.count={count}: this host has {host_summary(devices)}")
        profiles = known_profiles() if profiles is None else profiles
        name = chosen[0].name
        profile = next((p for p, m in profiles.items() if matches(m, name)), slug(name))
        return Selection(profile=profile, device_kind="cuda", devices=chosen, gpu_name=name)
    fitting = [d for d in devices if matches(gpu_cfg.match, d.name)]
    if len(fitting) < count:
        wanted = " or ".join(gpu_cfg.match) or gpu_cfg.name
        raise ConfigError(
            f"gpu={gpu_cfg.name} needs {count} x {wanted}; this host has {host_summary(devices)}"
        )
    chosen = fitting[:count]
    return Selection(profile=gpu_cfg.name, device_kind="cuda", devices=chosen, gpu_name=chosen[0].name)


def slug(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name.lower().replace("nvidia ", "")).strip("_")


def load_profile(name: str) -> dict | None:
    path = GPU_PROFILES / f"{name}.yaml"
    return OmegaConf.to_container(OmegaConf.load(path)) if path.exists() else None


def driver_version(nvml=None) -> str | None:
    if nvml is None:
        try:
            import pynvml as nvml
        except ImportError:
            return None
    try:
        nvml.nvmlInit()
    except Exception:
        return None
    try:
        return _text(nvml.nvmlSystemGetDriverVersion())
    finally:
        nvml.nvmlShutdown()
