"""The software and hardware a run ran on, captured once per run by the job process."""

from __future__ import annotations

import functools
import itertools
import json
import os
import platform
import socket
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from src.hardware import nvml

# Only these environment variables are recorded: never the whole environment (credentials).
ENV_ALLOWLIST = (
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "NCCL_NVLS_ENABLE",
    "NCCL_DEBUG",
    "NCCL_IB_DISABLE",
    "NCCL_P2P_DISABLE",
    "NCCL_SOCKET_IFNAME",
    "OMP_NUM_THREADS",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING",
    "SLURM_JOB_ID",
    "SLURM_NODELIST",
)


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def software_versions() -> dict:
    """Package versions from the installed metadata: importing torch here would cost the job
    process seconds per job; the CUDA, cuDNN and NCCL that ran come from a rank
    (`runtime_versions`)."""
    versions = {"python": sys.version.split()[0]}
    distributions = {
        "torch": "torch",
        "torchvision": "torchvision",
        "transformers": "transformers",
        "mlflow": "mlflow",
        "hydra": "hydra-core",
    }
    for package, dist in distributions.items():
        try:
            versions[package] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[package] = "none"
    return versions


def runtime_versions() -> dict:
    """The CUDA, cuDNN and NCCL builds torch runs with, read in a rank (which has torch loaded), or
    in a fresh interpreter by `installed_runtime_versions`."""
    import torch

    versions = {
        "cuda": torch.version.cuda or "none",
        "cudnn": str(torch.backends.cudnn.version()) if torch.backends.cudnn.is_available() else "none",
    }
    try:
        versions["nccl"] = ".".join(map(str, torch.cuda.nccl.version())) if torch.version.cuda else "none"
    except Exception:  # NCCL library absent in a CPU build
        versions["nccl"] = "none"
    return versions


RUNTIME_PROBE_TIMEOUT_S = 120  # importing torch on a loaded host


@functools.cache
def installed_runtime_versions() -> dict:
    """`runtime_versions()` as this install's ranks will report them, for a job about to run (the
    job process never imports torch): read once per process in a fresh interpreter that sees no GPU
    (the versions are the libraries', not a device's). {} when torch does not import there: the
    ranks then fail with the reason."""
    # a one-shot import of torch: no garbage collection in it (a part of its import time)
    code = "import gc; gc.disable(); import json; from src.hardware.environment import runtime_versions; "
    code += "print(json.dumps(runtime_versions()))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p), "CUDA_VISIBLE_DEVICES": ""}
    probe = [sys.executable, "-c", code]
    try:
        done = subprocess.run(probe, env=env, capture_output=True, text=True, timeout=RUNTIME_PROBE_TIMEOUT_S)
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (subprocess.TimeoutExpired, ValueError, IndexError):
        return {}


# The variables that decide how GPUs talk: NCCL's (transports, algorithms, NVLink SHARP), NVSHMEM's
# and torch's symmetric memory. The user's environment sets them, never gpubench; each run records
# their effective values.
COMMUNICATION_PREFIXES = ("NCCL_", "NVSHMEM_", "TORCH_SYMM_MEM_")
NCCL_SYSTEM_CONF = Path("/etc/nccl.conf")


def communication_settings(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The communication variables as NCCL resolves them: the environment first, then the user's
    NCCL file (NCCL_CONF_FILE, else ~/.nccl.conf), then /etc/nccl.conf, each filling only what
    the ones before left unset (NCCL's own order)."""
    environ = os.environ if environ is None else environ
    user_file = environ.get("NCCL_CONF_FILE") or str(Path.home() / ".nccl.conf")
    settings = {}
    for source in (_nccl_conf(NCCL_SYSTEM_CONF), _nccl_conf(Path(user_file)), environ):
        settings |= {name: value for name, value in source.items() if _is_setting(name)}
    return dict(sorted(settings.items()))


def _is_setting(name: str) -> bool:
    """A communication variable that can change a figure: not debug output, nor the pointer to the
    file whose values are recorded themselves."""
    return name.startswith(COMMUNICATION_PREFIXES) and "DEBUG" not in name and name != "NCCL_CONF_FILE"


def _nccl_conf(path: Path) -> dict[str, str]:
    """NAME=VALUE lines of an NCCL configuration file ('#' starts a comment); none if unreadable."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return {}
    pairs = (line.split("=", 1) for line in lines if "=" in line and not line.lstrip().startswith("#"))
    return {name.strip(): value.strip() for name, value in pairs}


def capture(devices: list) -> dict:
    """Host and software; through NVML the driver and each chosen GPU's links, limits and clocks."""
    env = {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "driver": "none",
        "cuda_driver": "none",
        "versions": software_versions(),
        "devices": [vars(d) for d in devices],  # NVML adds PCIe, power limit, ECC, clocks, NVLinks
        "env": {k: os.environ[k] for k in ENV_ALLOWLIST if k in os.environ},
    }
    if devices:
        with nvml.session() as lib:
            if lib is not None:
                env.update(gpu_environment(lib, devices))
    return env


# nvml.h: nvmlGpuTopologyLevel_t; nvmlIntNvLinkDeviceType_t
TOPOLOGY_LEVELS = {
    0: "same board",
    10: "single PCIe switch",
    20: "multiple PCIe switches",
    30: "PCIe host bridge",
    40: "same NUMA node",
    50: "across NUMA nodes",
}
NVLINK_REMOTE_TYPES = {0: "gpu", 1: "ibmnpu", 2: "nvswitch"}
MAX_NVLINKS = 18  # links per GPU on Hopper, the most so far among the profiles


def gpu_environment(lib, devices: list) -> dict:
    system = nvml.Caller(lib)
    cuda = system.first(("nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"))
    gpus = []
    for device in devices:
        call = nvml.Caller(lib, lib.nvmlDeviceGetHandleByIndex(device.index))
        ecc = call("nvmlDeviceGetEccMode")  # (current, pending)
        gpus.append(
            {
                "index": device.index,
                "name": device.name,
                "uuid": device.uuid,
                "pci_bus_id": device.pci_bus_id,
                "memory_gb": device.memory_gb,
                "vbios": nvml.text(call("nvmlDeviceGetVbiosVersion")),
                "pcie_gen": call("nvmlDeviceGetCurrPcieLinkGeneration"),
                "pcie_gen_max": call("nvmlDeviceGetMaxPcieLinkGeneration"),
                "pcie_width": call("nvmlDeviceGetCurrPcieLinkWidth"),
                "pcie_width_max": call("nvmlDeviceGetMaxPcieLinkWidth"),
                "power_limit_w": nvml.scaled(call("nvmlDeviceGetEnforcedPowerLimit"), 1e-3),
                "power_limit_default_w": nvml.scaled(call("nvmlDeviceGetPowerManagementDefaultLimit"), 1e-3),
                "ecc_enabled": None if ecc is None else bool(ecc[0]),
                "max_sm_clock_mhz": call("nvmlDeviceGetMaxClockInfo", nvml.CLOCK_SM),
                "max_mem_clock_mhz": call("nvmlDeviceGetMaxClockInfo", nvml.CLOCK_MEM),
                "nvlinks": _nvlinks(call),
            }
        )
    return {
        "driver": nvml.text(system("nvmlSystemGetDriverVersion")) or "none",
        "cuda_driver": f"{cuda // 1000}.{cuda % 1000 // 10}" if cuda else "none",
        "devices": gpus,
        "topology": _topology(lib, devices, gpus),
    }


def _nvlinks(call: nvml.Caller) -> list[dict]:
    """The device's active NVLinks and what is at their far end (a GPU's or NVSwitch's bus id)."""
    links = []
    for link in range(MAX_NVLINKS):
        state = call("nvmlDeviceGetNvLinkState", link)
        if state is None:  # no NVLink on this card, or past its last link
            break
        if state != 1:  # 1: active
            continue
        remote = call("nvmlDeviceGetNvLinkRemotePciInfo", link)
        links.append(
            {
                "link": link,
                "version": call("nvmlDeviceGetNvLinkVersion", link),
                "remote_type": NVLINK_REMOTE_TYPES.get(call("nvmlDeviceGetNvLinkRemoteDeviceType", link)),
                "remote_pci_bus_id": nvml.text(remote.busId).lower() if remote is not None else None,
            }
        )
    return links


def _topology(lib, devices: list, gpus: list[dict]) -> dict:
    """For each pair of chosen GPUs: their PCIe path, and how NVLink joins them (direct, switch, no)."""
    pairs = {}
    system = nvml.Caller(lib)
    for (i, a), (j, b) in itertools.combinations(enumerate(devices), 2):
        level = system(
            "nvmlDeviceGetTopologyCommonAncestor",
            lib.nvmlDeviceGetHandleByIndex(a.index),
            lib.nvmlDeviceGetHandleByIndex(b.index),
        )
        direct = sum(1 for link in gpus[i]["nvlinks"] if link["remote_pci_bus_id"] == b.pci_bus_id.lower())
        switched = all(any(x["remote_type"] == "nvswitch" for x in gpus[k]["nvlinks"]) for k in (i, j))
        pairs[f"gpu{i}-gpu{j}"] = {
            "pcie": TOPOLOGY_LEVELS.get(level, level),
            "nvlink": f"{direct} direct links" if direct else ("through NVSwitch" if switched else "none"),
        }
    return pairs
