"""The spec sheets a projection reads: the gpu profiles (conf/gpu/) of the cards it projects onto,
and of the measured cards for figures their runs never logged. Read here, once, by name."""

from __future__ import annotations

from omegaconf import OmegaConf

from src.paths import PROJECT_ROOT

GPU_PROFILES = PROJECT_ROOT / "conf" / "gpu"


def known() -> list[str]:
    return sorted(path.stem for path in GPU_PROFILES.glob("*.yaml"))


def profiles(names) -> dict[str, dict]:
    """The profiles of these names that exist, by name."""
    return {
        name: OmegaConf.to_container(OmegaConf.load(GPU_PROFILES / f"{name}.yaml"))
        for name in dict.fromkeys(names)
        if (GPU_PROFILES / f"{name}.yaml").is_file()
    }
