"""Entry point: `python -m src.compare baseline=rtx3090 [out=DIR] [filters] [tracking.*]`, or
`python -m src.compare experiment=lambda_a6000_vs_3090` for an experiment's own question."""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import OmegaConf

from src.config import cli, help_groups
from src.config.schema import register_configs
from src.errors import ConfigError, TrackingUnavailable, exit_with_error
from src.run import signals
from src.tracking import credentials

register_configs("compare_schema", "import_schema")


@hydra.main(config_path="../../conf", config_name="compare", version_base="1.3")
def main(cfg):
    cli.composed()
    credentials.adopt_tracking_credentials(cfg)
    from src.compare.pipeline import run_compare, validate_compare
    from src.compare.runs import CompareError
    from src.console import console, link_line
    from src.published.__main__ import ImportInterrupted
    from src.published.tables import TableError
    from src.tracking import ui

    try:
        validate_compare(cfg)  # before the study's import: bad input does no work
        if cfg.study.published:
            _import_study_figures(cfg)
        result = run_compare(cfg, Path(HydraConfig.get().runtime.output_dir))
    except (ConfigError, TrackingUnavailable, CompareError, TableError) as exc:
        exit_with_error(exc)
    except (ImportInterrupted, signals.Interrupted) as exc:  # Ctrl-C or SIGTERM: 130 or 143
        print(
            f"error: {exc if isinstance(exc, ImportInterrupted) else f'interrupted ({exc})'}", file=sys.stderr
        )
        sys.exit(signals.exit_code())
    found = len(result.found)
    console.print(
        f"{found} anomal{'y' if found == 1 else 'ies'} flagged; report in {result.out} and in MLflow run "
        f"{result.report_run_id} (experiment {cfg.tracking.report_experiment!r})",
        soft_wrap=True,
    )
    for name, experiment_id in result.experiment_ids.items():  # the runs it read, then the published
        opens = ui.how_to_open(cfg.tracking.uri, experiment_id).replace("\n", "\n  ")
        link_line(f"experiment {name!r}: {opens}")


def _import_study_figures(cfg):
    """The study's published figures, imported in this process where the store lacks them: its gpus,
    models and GPU counts only (seconds; the whole generation is `python -m src.published`)."""
    from src.console import note
    from src.published.__main__ import import_generation, kept_by_filters
    from src.published.imported import Repairs

    study = cfg.study
    counts = sorted({c.gpu_count for c in study.claims})
    overrides = [f"source={study.published}", f"gpus=[{','.join(study.gpus)}]"]
    overrides += [f"models=[{','.join(study.models)}]", f"gpu_counts=[{','.join(map(str, counts))}]"]
    imports = OmegaConf.merge(hydra.compose("import_results", overrides), {"tracking": cfg.tracking})
    done = import_generation(imports, study.published, kept_by_filters(imports))
    repairs = sum((summary.repairs for _, _, summary in done), Repairs())
    for line in repairs.lines(study.published):
        note(line)
    created = sum(summary.created for _, _, summary in done) - repairs.corrected
    if created:
        note(
            f"imported {created} published figure(s) of {', '.join(study.gpus)} from source "
            f"{study.published} (reference/lambda/) into {cfg.tracking.published_experiment!r}"
        )


if __name__ == "__main__":
    help_groups.exit_with_help_if_asked("compare", sys.argv[1:])
    signals.install()  # SIGTERM ends an import between two runs' writes, and compare with 143
    cli.run_app(main)
