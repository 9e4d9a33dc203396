"""Entry point: `python -m src.train [-m] key=value ...` runs one benchmark job per config point."""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from src.config import ConfigError, finalize, override_keys, register_configs

register_configs()


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> float:
    hydra_cfg = HydraConfig.get()
    multirun = hydra_cfg.mode == RunMode.MULTIRUN
    try:
        # Bad input and missing hardware stop here, before any run is opened or rank started.
        cfg = finalize(cfg, override_keys(list(hydra_cfg.overrides.task)))
        from src import job, tracking

        parent = tracking.read_parent_run(Path(hydra_cfg.sweep.dir)) if multirun else None
        return job.run_job(cfg, Path(hydra_cfg.runtime.output_dir), parent)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        if multirun:
            raise  # this point fails; Hydra goes on with the rest of the sweep
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
