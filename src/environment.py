"""The software and hardware a run ran on, captured once per run by the job process."""

from __future__ import annotations

import os
import platform
import socket
import sys
from importlib import metadata

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
    """Versions read without initialising CUDA in this process."""
    import torch

    versions = {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "cuda": torch.version.cuda or "none",
        "cudnn": str(torch.backends.cudnn.version()) if torch.backends.cudnn.is_available() else "none",
    }
    try:
        versions["nccl"] = ".".join(map(str, torch.cuda.nccl.version())) if torch.version.cuda else "none"
    except Exception:  # NCCL library absent in a CPU build
        versions["nccl"] = "none"
    # From the installed metadata: importing torchvision or transformers costs seconds per job.
    distributions = {
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


def capture(devices: list, driver: str | None) -> dict:
    return {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "driver": driver or "none",
        "versions": software_versions(),
        "devices": [vars(d) for d in devices],
        "env": {k: os.environ[k] for k in ENV_ALLOWLIST if k in os.environ},
    }
