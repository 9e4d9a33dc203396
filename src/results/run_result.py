"""A run read back: the one reader that turns an MLflow run into what gpubench reads (`RunResult`).

Everything that reads a run goes through `read`: compare, the importer, the sweep summary, resume's
skip line. The names it reads and the typed figures it gives (src/results/recorded.py) are the writers' own.
Runs carry `schema_version`; `read` handles the current version and version 1 (runs logged before
the tag and the job kind existed: their kind is told by the model name, `ceilings`), and refuses
any other in one line: a later gpubench's run is not read as if it were this one's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from src.errors import ConfigError
from src.results import recorded
from src.results.logged_spec import Spec, positive_number, read_spec
from src.results.stats import rule_missed


@dataclass(frozen=True, kw_only=True)
class RunResult:
    """One run as gpubench reads it back: what it is of, its figures, where they came from."""

    run_id: str
    name: str
    status: str
    started_ms: int
    schema_version: int
    kind: str  # TRAINING, CEILINGS, or REPORT_KIND / SWEEP_KIND for runs that are no job (recorded.py)
    source: str  # MEASURED, or the publisher of an imported figure
    gpu: str
    gpu_name: str
    gpu_count: int | None
    model: str
    category: str
    precision: str
    unit: str
    smoke: bool
    missed: str | None  # how it fell short of its stopping rule ("max_steps: CI 27% > 1%"), else None
    window: recorded.Window  # the measured window's figures, as the job wrote them
    breakdown: recorded.Breakdown | None
    telemetry: recorded.Telemetry  # over the measured window; every figure None where the job sampled none
    ceilings: recorded.CeilingFigures  # a ceilings run's figures; none for the others
    spec: Spec
    tf32_math: bool  # matmuls ran (or were published) with TF32 tensor-core math
    foreign: str | None  # other programs seen on its GPUs
    anomaly: str | None  # the `anomaly` tag an earlier compare left
    published_runs: tuple[int, float] | None  # an imported figure: (runs behind it, se of their mean log)
    tags: dict = field(repr=False)
    params: dict = field(repr=False)

    @property
    def is_job(self) -> bool:
        return self.kind in recorded.KINDS

    @property
    def throughput(self) -> float | None:
        return self.window.throughput

    @property
    def batch_size(self) -> int | None:
        return self.window.batch_size

    @property
    def achieved_tflops_per_gpu(self) -> float | None:
        return self.window.achieved_tflops_per_gpu

    @property
    def mfu(self) -> float | None:
        return self.window.mfu

    @property
    def per_watt(self) -> float | None:
        """Over measured power; None where telemetry logged none."""
        return self.window.throughput_per_watt

    @property
    def shares(self) -> dict[str, float | None] | None:
        """The step-time breakdown's shares; None without one."""
        return None if self.breakdown is None else self.breakdown.shares


def kind_of(tags: dict) -> str:
    """The job kind a run declares; a version-1 run's from its model; report runs and sweep parents."""
    if tags.get(recorded.REPORT) == "true":
        return recorded.REPORT_KIND
    if tags.get(recorded.SWEEP) == "true":
        return recorded.SWEEP_KIND
    if tags.get(recorded.KIND):
        return tags[recorded.KIND]
    return recorded.CEILINGS if tags.get(recorded.MODEL) == recorded.CEILINGS else recorded.TRAINING


def read(run) -> RunResult:
    """An MLflow run (any status) as gpubench reads it."""
    tags, metrics, params = dict(run.data.tags), dict(run.data.metrics), dict(run.data.params)
    count = tags.get(recorded.GPU_COUNT, "")
    window, breakdown = recorded.Window.from_metrics(metrics), recorded.Breakdown.from_metrics(metrics)
    tf32_math = tags.get(recorded.MATH_MATMUL_TF32) == "True"
    min_steps = positive_number(params.get(recorded.MIN_STEPS_PARAM))
    missed = rule_missed(
        tags.get(recorded.STOP_REASON),
        window.measured_steps,
        None if min_steps is None else int(min_steps),
        window.step_time_ci95_rel,
        positive_number(params.get(recorded.TARGET_CI_PARAM)),
    )
    return RunResult(
        run_id=run.info.run_id,
        name=run.info.run_name or "",
        status=run.info.status,
        started_ms=run.info.start_time or 0,
        schema_version=schema_version(run),
        kind=kind_of(tags),
        source=tags.get(recorded.SOURCE, recorded.MEASURED),
        gpu=tags.get(recorded.GPU, ""),
        gpu_name=tags.get(recorded.GPU_NAME, ""),
        gpu_count=int(count) if count.isdigit() else None,
        model=tags.get(recorded.MODEL, ""),
        category=tags.get(recorded.CATEGORY, "other"),
        precision=tags.get(recorded.PRECISION, ""),
        unit=tags.get(recorded.UNIT, "items/s"),
        smoke=tags.get(recorded.BENCHMARK) == recorded.SMOKE,
        missed=missed,
        window=window,
        breakdown=breakdown,
        telemetry=recorded.Telemetry.from_metrics(metrics),
        ceilings=recorded.CeilingFigures.from_metrics(metrics),
        spec=read_spec(tags.get(recorded.PRECISION, ""), tf32_math, params),
        tf32_math=tf32_math,
        foreign=tags.get(recorded.GPU_FOREIGN_PROCESSES),
        anomaly=tags.get(recorded.ANOMALY),
        published_runs=_published_runs(metrics),
        tags=tags,
        params=params,
    )


def schema_version(run) -> int:
    """The run's schema version, one this gpubench reads; else ConfigError naming the run and the value."""
    value = run.data.tags.get(recorded.SCHEMA, str(recorded.FIRST_SCHEMA))
    number = int(value) if re.fullmatch("[0-9]+", value) else None
    if number is not None and recorded.FIRST_SCHEMA <= number <= recorded.SCHEMA_VERSION:
        return number
    later = number is not None and number > recorded.SCHEMA_VERSION
    why = "a later gpubench wrote it: upgrade to read it" if later else "no gpubench wrote it"
    raise ConfigError(
        f"run {run.info.run_id} ({run.info.run_name}): {recorded.SCHEMA}={value!r}: this gpubench reads "
        f"versions {recorded.FIRST_SCHEMA} to {recorded.SCHEMA_VERSION}; {why}, or move the run to another "
        "experiment"
    )


def _published_runs(metrics: dict) -> tuple[int, float] | None:
    n, se = metrics.get(recorded.PUBLISHED_RUNS), metrics.get(recorded.PUBLISHED_RUNS_LOG_SE)
    return (int(n), se) if n and se is not None else None
