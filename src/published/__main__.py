"""Entry point: `python -m src.published FILE precision=fp32|amp source=NAME` puts published
results into MLflow as FINISHED runs with the tags and metrics of measured runs, plus `source`.
`python -m src.published source=lambda-2021` imports every table of one of the generations
the project ships (reference/lambda/sources.yaml), with its software, dates and batch sizes, and
the spread of the logged runs behind a figure where the generation has them.

Runs go to `tracking.published_experiment` (default `gpubench-published`), apart from measured
runs; `src.compare` reads both. Each run carries an `import_key` tag, the published row's whole
identity (source, precision, system, GPU count, task): importing the same file again finds the key
and creates nothing twice. An import holds its source's lock in the store while it reads and writes
(src/published/imported.py), so imports of one source at once, from any host, write each figure once. A run
counts as imported once it is FINISHED, which is its last write: one left half-written (the import
killed) is deleted and written again by the next import, which also removes a figure's second run.
The shipped generations' names are kept for their own files.
"""

from __future__ import annotations

import datetime
import difflib
import functools
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import hydra
from omegaconf import DictConfig, OmegaConf

from src import console
from src.config import cli, help_groups, points
from src.config.groups.tracking import tracking_errors
from src.config.schema import register_configs
from src.errors import ConfigError, TrackingUnavailable, exit_with_error
from src.paths import PROJECT_ROOT
from src.published import imported
from src.published.imported import import_key
from src.published.tables import PRECISIONS, SHIPPED, Generation, generation, generations, runs_spread
from src.results import recorded
from src.run import signals
from src.tracking import credentials

if TYPE_CHECKING:
    from src.published.tables import PublishedResult

register_configs("import_schema")

MEASURED_SOURCE = "measured"  # what compare calls runs without a source tag
# Lambda's "fp32" is the NGC container default: TF32 tensor-core math on Ampere and newer.
MATH_TAGS = {
    "fp32": {
        "math_autocast_dtype": "none",
        "math_grad_scaling": "False",
        "math_matmul_tf32": "True",
        "math_cudnn_tf32": "True",
        "math_note": "published fp32 = container default math: TF32 tensor cores on Ampere and newer, "
        "IEEE fp32 on older GPUs",
    },
    "amp": {
        "math_autocast_dtype": "float16",
        "math_grad_scaling": "True",
        "math_note": "published fp16 = automatic mixed precision (fp16 autocast, loss scaling)",
    },
}


PROGRESS_FROM, PROGRESS_EVERY_S = 200, 5.0  # a table of this many runs says its size, then every 5 s how far


class ImportInterrupted(Exception):
    """SIGINT or SIGTERM during an import: it stopped between two runs; the finished ones stand."""


@dataclass
class ImportSummary:
    created: int
    already_there: int
    not_run: int
    experiment_id: str
    repairs: imported.Repairs


def validate_import(cfg: DictConfig) -> Path | None:
    """The table's path (None: the source is a shipped generation, imported whole), once every key
    is known to be usable."""
    shipped = not OmegaConf.is_missing(cfg, "source") and cfg.source in generations()
    if shipped and OmegaConf.is_missing(cfg, "file"):
        errors = tracking_errors(cfg.tracking)
        if not OmegaConf.is_missing(cfg, "precision") and cfg.precision.name not in PRECISIONS:
            allowed = f"must be one of {', '.join(PRECISIONS)}, or unset for both"
            errors.append(f"precision={cfg.precision.name}: {allowed}")
        if errors:
            raise ConfigError("invalid config:\n  " + "\n  ".join(errors))
        return None
    missing = [key for key in ("file", "precision", "source") if OmegaConf.is_missing(cfg, key)]
    if missing:
        raise ConfigError(
            f"missing {', '.join(missing)}: usage `python -m src.published FILE precision=fp32|amp "
            f"source=NAME`, or `python -m src.published source=NAME [precision=fp32|amp]` for a shipped "
            f"generation ({', '.join(generations())})"
        )
    errors = tracking_errors(cfg.tracking)
    path = Path(cfg.file).expanduser().resolve()
    if not path.is_file():
        errors.append(f"file={cfg.file!r}: must be an existing CSV file in the published format")
    if cfg.precision.name not in PRECISIONS:
        errors.append(
            f"precision={cfg.precision.name}: must be one of {', '.join(PRECISIONS)} "
            "(the published fp16 tables are amp)"
        )
    if not cfg.tracking.published_experiment:
        errors.append("tracking.published_experiment='': must name the experiment published results go to")
    if not cfg.source or not all(c.isalnum() or c in "_-." for c in cfg.source):
        errors.append(f"source={cfg.source!r}: must be a name of letters, digits, '_', '-' or '.'")
    elif cfg.source in (MEASURED_SOURCE, recorded.PROJECTED):
        errors.append(f"source={cfg.source!r}: is reserved for this project's own figures; name the publisher")
    elif shipped:
        errors.append(
            f"source={cfg.source}: names a generation the project ships (reference/lambda/), imported from "
            f"its own files with `python -m src.published source={cfg.source}`; a table of your own "
            f"goes in under another source= (not {', '.join(generations())}, {MEASURED_SOURCE} or "
            f"{recorded.PROJECTED})"
        )
    if errors:
        raise ConfigError("invalid config:\n  " + "\n  ".join(errors))
    return path


def import_generation(
    cfg: DictConfig, source: str, only: Callable[[PublishedResult], bool] | None = None
) -> list[tuple[Path, str, ImportSummary]]:
    """Every table of a shipped generation (of `precision=` only, where it is set; the figures `only`
    keeps): (table, precision, what its import did)."""
    shipped = generation(source)
    asked = None if OmegaConf.is_missing(cfg, "precision") else cfg.precision.name
    done = []
    for table in (t for t in shipped.tables if asked in (None, t["precision"])):
        path, precision = SHIPPED / table[recorded.THROUGHPUT], table["precision"]
        done.append((path, precision, import_table(cfg, path, precision, source, shipped, only)))
    return done


def import_table(
    cfg: DictConfig,
    path: Path,
    precision: str | None = None,
    source: str | None = None,
    shipped: Generation | None = None,
    only: Callable[[PublishedResult], bool] | None = None,
) -> ImportSummary:
    """One table's positive cells (those `only` keeps) as runs; `shipped` adds its generation's
    tags, batch sizes and logged runs (their mean and spread). Raises ImportInterrupted on SIGINT or
    SIGTERM."""
    from src.published import tables
    from src.run.job import run_name
    from src.tracking import job_run, owner, store

    tasks, profiles = OmegaConf.to_container(cfg.tasks), OmegaConf.to_container(cfg.gpu_profiles)
    uri, source, precision = cfg.tracking.uri, source or cfg.source, precision or cfg.precision.name
    if shipped:  # its figures with their batches and logged runs
        table = shipped.read(precision, tasks, profiles)
    else:
        table = tables.read_table(path, tasks, profiles)
    _name_unknown_columns(path, table.results, tasks)
    published = cfg.tracking.published_experiment
    experiment_id = store.ensure_experiment(uri, published, "tracking.published_experiment")
    client = store.client(uri)
    lock = imported.SourceLock(client, experiment_id, source, owner.tags(), owner.vanished)
    with lock, store.without_run_links():  # a run per figure: no link lines of MLflow's per run
        existing, repairs, differ = imported.existing_figures(client, experiment_id, source)
        repairs.dead_locks = lock.dead
        _refuse(differ or imported.changed_figures(path, table.results, existing, source, precision), source)
        todo: dict[str, PublishedResult] = {}
        already_there = 0
        for result in filter(only, table.results):
            key = import_key(source, precision, result.system, result.gpu_count, result.task)
            before = existing.get(key)
            if before is not None and imported.corrected(before, result):  # written again as the runs' mean
                client.delete_run(before.run_id)
                repairs.corrected += 1
            elif before is not None:
                already_there += 1
                repairs.sized += imported.add_sizes(client, before, model_sizes(result.model))
                continue
            todo.setdefault(key, result)  # a row published twice imports once
        progress = _Progress(path, len(todo))
        try:
            for key, result in todo.items():
                lock.renew()
                tags = _figure_tags(result, key, path, source, precision, shipped)  # JobRun adds its owner
                name = f"{run_name(result.gpu, result.gpu_count, result.model, precision)} [{source}]"
                with signals.held():  # Ctrl-C or SIGTERM: once this run is whole
                    run = job_run.JobRun(cfg.tracking, experiment_id, name, tags)
                    run.log_params(
                        imported.spec_params(result)
                        | {"model.name": result.model, "precision.name": precision}
                        | model_sizes(result.model)
                        | profile_spec(result.gpu, precision)
                    )
                    run.log_metrics(
                        {
                            recorded.THROUGHPUT: result.throughput,
                            recorded.THROUGHPUT_PER_GPU: result.throughput / result.gpu_count,
                            recorded.workload_metric(result.model, precision, result.gpu_count): result.throughput,
                            **runs_spread(list(result.runs)),
                        }
                    )
                    run.end("FINISHED")  # the last write: from here the figure counts as imported
                    progress.advance()
        except signals.Interrupted:
            raise ImportInterrupted(
                f"interrupted ({signals.received().name}): {progress.done:,} of {len(todo):,} run(s) from "
                f"{path.name} imported, the rest not; the same command imports the rest"
            ) from None
    return ImportSummary(len(todo), already_there, table.not_run, experiment_id, repairs)


def _figure_tags(
    result: PublishedResult, key: str, path: Path, source: str, precision: str, shipped: Generation | None
) -> dict:
    return {
        recorded.KIND: recorded.TRAINING,
        recorded.GPU: result.gpu,
        recorded.GPU_NAME: result.gpu_name,
        recorded.GPU_COUNT: result.gpu_count,
        recorded.MODEL: result.model,
        recorded.CATEGORY: result.category,
        recorded.PRECISION: precision,
        recorded.UNIT: result.unit,
        recorded.SOURCE: source,
        recorded.IMPORT_KEY: key,
        recorded.PUBLISHED_SYSTEM: result.system,
        recorded.PUBLISHED_TASK: result.task,
        recorded.PUBLISHED_PRECISION: PRECISIONS[precision],
        recorded.PUBLISHED_FILE: path.name,
        **MATH_TAGS[precision],
        **(shipped.tags() if shipped else {}),
        **({recorded.PUBLISHED_BATCH: f"{result.batch:g}"} if result.batch else {}),
        **({recorded.PUBLISHED_CELL: f"{result.cell:g}"} if result.cell is not None else {}),
    }


class _Progress:
    """A large table says how many runs it writes, then every few seconds how far it got."""

    def __init__(self, path: Path, total: int):
        self.path, self.total, self.done = path, total, 0
        self.started = self.said = time.monotonic()
        if total >= PROGRESS_FROM:
            console.note(
                f"{path.name} ({path.stat().st_size / 2**20:,.1f} MiB): {total:,} run(s) to write; "
                "progress every few seconds (Ctrl-C stops cleanly; the same command goes on later)"
            )

    def advance(self) -> None:
        self.done += 1
        now = time.monotonic()
        if self.total >= PROGRESS_FROM and now - self.said >= PROGRESS_EVERY_S and self.done < self.total:
            self.said = now
            left_s = (now - self.started) / self.done * (self.total - self.done)
            console.note(
                f"{self.path.name}: {self.done:,} of {self.total:,} run(s) written, "
                f"about {datetime.timedelta(seconds=round(left_s))} left"
            )


def _name_unknown_columns(path: Path, results: list, tasks: dict) -> None:
    """A column that is no known task imports under its own name: say so, with the task it may mean."""
    from src.published.tables import OTHER_CATEGORY

    unknown = sorted({r.task for r in results if r.task not in tasks})
    for column in unknown:
        close = difflib.get_close_matches(column.lower(), list(tasks), n=1, cutoff=0.8)
        hint = f" (did you mean {close[0]}?)" if close else f" (known tasks: {', '.join(tasks)})"
        console.warning(
            f"{path.name}: column {column!r} is no task gpubench knows: imported as model {column!r}, "
            f"category {OTHER_CATEGORY}{hint}"
        )


@functools.cache  # one read per GPU and precision, not per figure
def profile_spec(gpu: str, precision: str) -> dict:
    """The spec-sheet figures of the GPU's profile, under the params a measured run logs them as, so
    compare judges a published figure by what its run holds (nothing for a GPU without a profile)."""
    from src.hardware.devices import load_profile
    from src.tracking.job_run import flatten

    profile = load_profile(gpu)
    if not profile:
        return {}
    figures = {k: profile.get(k) for k in ("peak_tflops", "memory_bandwidth_gbs", "memory_gb")}
    peak_key = OmegaConf.load(PROJECT_ROOT / "conf" / "precision" / f"{precision}.yaml").peak_key
    return flatten({"gpu": figures}) | {"precision.peak_key": peak_key}


@functools.cache  # one read per model, not per figure
def model_sizes(model: str) -> dict[str, str]:
    """The model's measured configuration as this project runs it by default (conf/model/<model>.yaml
    over its family's schema: image size, layers, ...), under the params a job logs it as: a published
    figure stands for its model at these, and compare holds them like any measured key (nothing for a
    task the project has no model of)."""
    from src.config.groups.model import MODEL_FAMILIES
    from src.tracking.job_run import flatten

    path = PROJECT_ROOT / "conf" / "model" / f"{model}.yaml"
    if not path.is_file():
        return {}
    own = OmegaConf.load(path)
    family = next(entry["family@_here_"] for entry in own.pop("defaults") if "family@_here_" in entry)
    config = OmegaConf.merge(OmegaConf.structured(MODEL_FAMILIES[family]), own)
    logged = {key: str(value) for key, value in flatten(config, "model.").items()}
    return {key: value for key, value in points.point_config(logged) if key.startswith("model.")}


def kept_by_filters(cfg: DictConfig) -> Callable[[PublishedResult], bool]:
    """The figures `gpus=`, `models=` and `gpu_counts=` keep (an empty filter keeps every one)."""
    gpus, models, counts = set(cfg.gpus), set(cfg.models), set(cfg.gpu_counts)
    return lambda r: (
        (not gpus or r.gpu in gpus) and (not models or r.model in models) and (not counts or r.gpu_count in counts)
    )


def _refuse(changed: list[str], source: str) -> None:
    """Figures changed since they were imported: refused before anything is imported."""
    from src.published import tables

    if changed:
        more = f"\n  ... and {len(changed) - 5} more" if len(changed) > 5 else ""
        raise tables.TableError(
            "\n  ".join(changed[:5]) + more + f"\n  nothing imported: a corrected table goes in under another "
            f"source= (e.g. source={source}-v2), or delete those runs from {source!r} first"
        )


def file_argument_as_override(argv: list[str]) -> list[str]:
    """Hydra takes only key=value: the documented leading FILE becomes file='<absolute path>'."""
    if len(argv) > 1 and "=" not in argv[1] and not argv[1].startswith("-"):
        path = str(Path(argv[1]).expanduser().resolve()).replace("\\", "\\\\").replace("'", "\\'")
        return [argv[0], f"file='{path}'", *argv[2:]]
    return argv


@hydra.main(config_path="../../conf", config_name="import_results", version_base="1.3")
def main(cfg: DictConfig) -> None:
    cli.composed()
    credentials.adopt_tracking_credentials(cfg)
    from src.console import console, link_line
    from src.published.tables import TableError
    from src.tracking import ui

    try:
        path = validate_import(cfg)
        if path is None:
            done = import_generation(cfg, cfg.source, kept_by_filters(cfg))
        else:
            done = [(path, cfg.precision.name, import_table(cfg, path, only=kept_by_filters(cfg)))]
    except (ConfigError, TrackingUnavailable, TableError) as exc:
        exit_with_error(exc)
    except (ImportInterrupted, signals.Interrupted) as exc:
        said = str(exc) if isinstance(exc, ImportInterrupted) else f"interrupted ({exc}) before any run was written"
        print(f"error: {said}", file=sys.stderr)
        sys.exit(signals.exit_code())
    for table, precision, summary in done:
        for line in summary.repairs.lines(cfg.source):
            console.print(line, soft_wrap=True)
        console.print(
            f"imported {summary.created} run(s) from {table.name} as source={cfg.source} "
            f"precision={precision} into {cfg.tracking.published_experiment!r} at "
            f"{credentials.bare(cfg.tracking.uri)}; {summary.already_there} already there, "
            f"{summary.not_run} cell(s) not run (0 or less)",
            soft_wrap=True,
        )
    link_line(ui.how_to_open(cfg.tracking.uri, done[-1][2].experiment_id))


if __name__ == "__main__":
    help_groups.exit_with_help_if_asked("import_results", sys.argv[1:])
    signals.install()  # SIGTERM ends the import between two runs' writes, not inside one
    sys.argv = file_argument_as_override(sys.argv)
    cli.run_app(main)
