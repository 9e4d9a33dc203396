"""Entry point: `python -m src.compare baseline=rtx3090 [out=DIR] [filters] [tracking.*]`."""

from __future__ import annotations

from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from src import credentials
from src.config import cli
from src.config.schema import register_configs
from src.errors import ConfigError, TrackingUnavailable, exit_with_error

register_configs("compare_schema")


@hydra.main(config_path="../../conf", config_name="compare", version_base="1.3")
def main(cfg: DictConfig) -> None:
    cli.composed()
    credentials.adopt_tracking_credentials(cfg)
    from src.compare.pipeline import run_compare
    from src.compare.runs import CompareError
    from src.console import console, link_line
    from src.tracking import ui

    try:
        result = run_compare(cfg, Path(HydraConfig.get().runtime.output_dir))
    except (ConfigError, TrackingUnavailable, CompareError) as exc:
        exit_with_error(exc)
    console.print(
        f"{len(result.anomalies)} anomal{'y' if len(result.anomalies) == 1 else 'ies'} flagged; "
        f"report in {result.out} and in MLflow run {result.report_run_id} (experiment "
        f"{cfg.tracking.report_experiment})",
        soft_wrap=True,
    )
    link_line(ui.how_to_open(cfg.tracking.uri, result.experiment_ids[0]))


if __name__ == "__main__":
    cli.run_app(main)
