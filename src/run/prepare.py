"""One job's devices and its config, finalised once for them.

The config can be finalised only once its gpu profile is known: precision=auto takes the profile's
math, the batch its size, and the checks its spec sheet. gpu=auto's profile is the device found,
so the host is searched first; a named profile is finalised first, so that bad input stops before
the host is searched (and a sweep reports it as bad, not as a point this host cannot run).
"""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf, open_dict

from src.config.checks import Errors
from src.config.finalise import finalize
from src.config.groups.gpu import check_memory_cap
from src.errors import ConfigError
from src.hardware import devices, host
from src.run import launch


def prepare(
    cfg: DictConfig, found: list[devices.Device] | None = None
) -> tuple[DictConfig, devices.Selection]:
    """The finalised config and the devices it runs on, from the host's GPUs (`found`; None: as
    NVML lists them). Raises ConfigError (bad input) or DeviceUnavailable (the host lacks the GPUs)."""
    check_reserve(cfg.launcher.host_memory_reserve_gb)
    if cfg.gpu.device == "auto":
        selection = _select(cfg, found)
        cfg = finalize(adopt_profile(cfg, selection))
    else:
        cfg, selection = finalize(cfg), None
    if problem := launch.rendezvous_problem(OmegaConf.to_container(cfg.launcher, resolve=True)):
        raise ConfigError(problem)
    return cfg, _select(cfg, found) if selection is None else selection


def check_reserve(reserve_gb: float) -> None:
    """A reserve the host cannot keep free would stop the job as its ranks start, reported as
    memory exhausted: it is bad input, refused before anything runs."""
    info = host.meminfo() or {}
    if reserve_gb and "MemAvailable" in info and reserve_gb * 1e9 >= info["MemAvailable"]:
        raise ConfigError(
            f"launcher.host_memory_reserve_gb={reserve_gb!r}: must be below the memory this host has available "
            f"({info['MemAvailable'] / 1e9:.1f} of {info['MemTotal'] / 1e9:.1f} GB now); 0: no guard"
        )


def _select(cfg: DictConfig, found: list[devices.Device] | None) -> devices.Selection:
    if found is None:
        found = devices.list_devices() if cfg.gpu.device != "cpu" else []
    return devices.select(cfg.gpu, found)


def adopt_profile(cfg: DictConfig, selection: devices.Selection) -> DictConfig:
    """For gpu=auto, the spec sheet of the profile the detected device matched (a card no profile
    knows: its name, and its detected memory as the bound of gpu.memory_limit_gb)."""
    cfg = cfg.copy()
    profile = devices.load_profile(selection.profile) or {"name": selection.profile}
    with open_dict(cfg):
        count = cfg.gpu.count
        cfg.gpu = OmegaConf.merge(cfg.gpu, profile)
        cfg.gpu.count = count
        cfg.gpu.device = selection.device_kind
    if cfg.gpu.memory_gb is None and selection.devices:  # a card no profile knows: the detected size
        errors = Errors()
        smallest = min(d.memory_gb for d in selection.devices) * 1e9 / 2**30  # NVML bytes as GiB
        check_memory_cap(cfg.gpu.memory_limit_gb, round(smallest, 1), "cuda", selection.gpu_name, errors)
        if errors:
            raise ConfigError("invalid config:\n  " + "\n  ".join(errors))
    return cfg
