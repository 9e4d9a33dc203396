"""Entry point: `python -m src.compare baseline=rtx3090 [out=DIR] [filters] [tracking.*]`, or
`python -m src.compare experiment=lambda_a6000_vs_3090` for an experiment's own question."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from src import credentials
from src.config import cli
from src.config.schema import register_configs
from src.errors import ConfigError, TrackingUnavailable, exit_with_error
from src.paths import PROJECT_ROOT

register_configs("compare_schema")
STUDIES = PROJECT_ROOT / "conf" / "study"


def hydra_argument(arg: str) -> str:
    """A command-line argument as Hydra reads it: `experiment=NAME` (a training config group) asks the
    study of that name (conf/study/); `filter_string=tags.compile = 'False'`, as the docs write it, gets
    its value quoted, as Hydra's grammar takes no spaces or quotes bare."""
    key, _, value = arg.partition("=")
    if key == "experiment":
        if not (STUDIES / f"{value}.yaml").is_file():
            known = ", ".join(sorted(p.stem for p in STUDIES.glob("*.yaml")))
            exit_with_error(ConfigError(f"experiment={value}: compare knows the question of {known}"))
        return f"study={value}"
    if key != "filter_string" or not value or value[0] in "'\"":
        return arg
    return 'filter_string="' + value.replace('"', '\\"') + '"'


@hydra.main(config_path="../../conf", config_name="compare", version_base="1.3")
def main(cfg: DictConfig) -> None:
    cli.composed()
    credentials.adopt_tracking_credentials(cfg)
    from src.compare.pipeline import run_compare
    from src.compare.runs import CompareError
    from src.console import console, link_line
    from src.tracking import ui

    try:
        if cfg.study.published:
            _import_study_figures(cfg)
        result = run_compare(cfg, Path(HydraConfig.get().runtime.output_dir))
    except (ConfigError, TrackingUnavailable, CompareError) as exc:
        exit_with_error(exc)
    console.print(
        f"{len(result.found)} anomal{'y' if len(result.found) == 1 else 'ies'} flagged; "
        f"report in {result.out} and in MLflow run {result.report_run_id} (experiment "
        f"{cfg.tracking.report_experiment})",
        soft_wrap=True,
    )
    for experiment_id in result.read.experiment_ids:  # where the compared runs are
        link_line(ui.how_to_open(cfg.tracking.uri, experiment_id))


def _import_study_figures(cfg: DictConfig) -> None:
    """The study's published figures, imported when the store lacks them, in a process of its own: its
    gpus, models and GPU counts only (seconds; the whole generation is `python -m src.import_results`)."""
    from src.console import note

    study = cfg.study
    counts = sorted({c.gpu_count for c in study.claims})
    command = [sys.executable, "-m", "src.import_results", f"source={study.published}",
               f"gpus=[{','.join(study.gpus)}]", f"models=[{','.join(study.models)}]",
               f"gpu_counts=[{','.join(map(str, counts))}]",
               f"tracking.published_experiment={cfg.tracking.published_experiment}"]  # fmt: skip
    env = {**os.environ, "MLFLOW_TRACKING_URI": cfg.tracking.uri}
    done = subprocess.run(command, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or ["no message"])[-1].removeprefix("error: ")
        raise ConfigError(f"importing {study.published} for experiment={study.name} failed: {said}")
    created = sum(int(line.split()[1]) for line in done.stdout.splitlines() if line.startswith("imported "))
    if created:
        note(
            f"imported {created} published figure(s) of {', '.join(study.gpus)} from source "
            f"{study.published} (reference/lambda/) into {cfg.tracking.published_experiment!r}"
        )


if __name__ == "__main__":
    sys.argv = [hydra_argument(arg) for arg in sys.argv]
    cli.run_app(main)
