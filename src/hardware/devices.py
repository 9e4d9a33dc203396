"""Which devices a job runs on: NVML lists the host's GPUs, the gpu profile picks `count` of them.

The job process never initialises CUDA: it reads NVML and hands the ranks their devices through
CUDA_VISIBLE_DEVICES, ordered by PCI bus id so that NVML's and CUDA's numbering agree.

NVML sees every GPU of the host, so a CUDA_VISIBLE_DEVICES that the process started with (a
scheduler's allocation, or a user sharing a host) limits the choice to the GPUs it names.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import OmegaConf

from src.config.groups.gpu import GpuConfig
from src.errors import DeviceUnavailable
from src.hardware import nvml
from src.paths import PROJECT_ROOT

GPU_PROFILES = PROJECT_ROOT / "conf" / "gpu"
# Read once, before any job of this process sets the variable for its own ranks.
INHERITED_VISIBLE_DEVICES = os.environ.get("CUDA_VISIBLE_DEVICES")


@dataclass(frozen=True)
class Device:
    index: int  # NVML index (NVML's own order, which need not be the bus order)
    name: str
    pci_bus_id: str
    uuid: str
    memory_gb: float = 0.0


@dataclass
class Selection:
    profile: str  # the gpu profile the run is tagged with
    device_kind: str  # cuda | cpu
    devices: list[Device] = field(default_factory=list)
    gpu_name: str = "cpu"

    @property
    def cuda_visible_devices(self) -> str:
        # UUIDs name the same GPUs whatever order CUDA enumerates them in
        return ",".join(d.uuid for d in self.devices)


def list_devices() -> list[Device]:
    """The host's GPUs ordered by PCI bus id; [] when NVML or its driver is missing."""
    with nvml.session() as lib:
        if lib is None:
            return []
        devices = []
        for i in range(lib.nvmlDeviceGetCount()):
            handle = lib.nvmlDeviceGetHandleByIndex(i)
            devices.append(
                Device(
                    index=i,
                    name=nvml.text(lib.nvmlDeviceGetName(handle)),
                    pci_bus_id=nvml.text(lib.nvmlDeviceGetPciInfo(handle).busId),
                    uuid=nvml.text(lib.nvmlDeviceGetUUID(handle)),
                    memory_gb=lib.nvmlDeviceGetMemoryInfo(handle).total / 1e9,
                )
            )
    return allowed(sorted(devices, key=lambda d: d.pci_bus_id.lower()), INHERITED_VISIBLE_DEVICES)


def allowed(devices: list[Device], visible: str | None) -> list[Device]:
    """The bus-ordered devices that a CUDA_VISIBLE_DEVICES value names, in its order: UUIDs
    (or a unique prefix, as CUDA accepts) or indices in bus order (CUDA_DEVICE_ORDER=PCI_BUS_ID,
    as schedulers assume). Unset: all. CUDA ignores the entries from the first one it cannot
    resolve on; so does this."""
    if visible is None:
        return devices
    chosen = []
    for entry in (e.strip() for e in visible.split(",")):
        if entry.isdigit():
            found = [devices[int(entry)]] if int(entry) < len(devices) else []
        else:
            found = [d for d in devices if entry and d.uuid.startswith(entry)]
        if len(found) != 1 or found[0] in chosen:
            break
        chosen.append(found[0])
    return chosen


def matches(profile, device_name: str) -> bool:
    """A profile fits a device when one `match` substring is in its name and no `exclude` one is."""
    name = device_name.lower()
    return any(m.lower() in name for m in profile.get("match", [])) and not any(
        x.lower() in name for x in profile.get("exclude", [])
    )


def known_profiles(directory: Path = GPU_PROFILES) -> dict:
    """Profile name -> profile, for every profile that names a CUDA device."""
    profiles = {}
    for path in sorted(directory.glob("*.yaml")):
        data = OmegaConf.load(path)
        if data.get("device", GpuConfig.device) == "cuda" and data.get("match"):  # the schema's default
            profiles[data.name] = data
    return profiles


def host_summary(devices: list[Device]) -> str:
    summary = ", ".join(f"{n} x {name}" for name, n in Counter(d.name for d in devices).items())
    summary = summary or "no GPU that NVML can see"
    if INHERITED_VISIBLE_DEVICES is not None:
        summary += f" (limited by CUDA_VISIBLE_DEVICES={INHERITED_VISIBLE_DEVICES})"
    return summary


def select(gpu_cfg, devices: list[Device], profiles: dict | None = None) -> Selection:
    """Pick the devices a gpu profile asks for, or stop with what it wanted and what the host has."""
    count = gpu_cfg.count
    if gpu_cfg.device == "cpu":
        return Selection(profile=gpu_cfg.name, device_kind="cpu")
    if gpu_cfg.device == "auto":
        return _select_auto(count, devices, known_profiles() if profiles is None else profiles)
    fitting = [d for d in devices if matches(gpu_cfg, d.name)]
    if len(fitting) < count:
        wanted = " or ".join(gpu_cfg.match) or gpu_cfg.name
        raise DeviceUnavailable(gpu_cfg.name, f"{count} x {wanted}", host_summary(devices))
    chosen = fitting[:count]
    return Selection(profile=gpu_cfg.name, device_kind="cuda", devices=chosen, gpu_name=chosen[0].name)


def _select_auto(count: int, devices: list[Device], profiles: dict) -> Selection:
    """The first GPU in bus order and the next ones of the same model: a job never mixes models."""
    if not devices:
        return Selection(profile="cpu", device_kind="cpu")
    name = devices[0].name
    chosen = [d for d in devices if d.name == name][:count]
    if len(chosen) < count:
        raise DeviceUnavailable(
            f"auto gpu.count={count}", f"{count} x {name} (one model per job)", host_summary(devices)
        )
    profile = next((p for p, data in profiles.items() if matches(data, name)), slug(name))
    return Selection(profile=profile, device_kind="cuda", devices=chosen, gpu_name=name)


def slug(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name.lower().replace("nvidia ", "")).strip("_")


def load_profile(name: str) -> dict | None:
    path = GPU_PROFILES / f"{name}.yaml"
    return OmegaConf.to_container(OmegaConf.load(path)) if path.exists() else None
