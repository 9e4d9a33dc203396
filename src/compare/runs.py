"""Read FINISHED runs back from MLflow and reduce repeats to one measurement per point.

A point is (side, gpu_count, model, precision, source, measured configuration); its throughput is
the median of its runs, with a 95% interval (src/compare/ratio.py). The measured configuration is
every logged param that changes what is measured and the stack the run logged as tags
(src/config/points.point_config), so runs that differ in either are never pooled as repeats.
Runs without a `source` tag are this project's own: source "measured".
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field, fields

from src import recorded, run_result
from src.compare.ratio import Spread, point_spread
from src.config import points
from src.recorded import MEASURED

# what a store with nothing to compare is told: the command that brings comparable runs
STUDY_HINT = (
    "`python -m src.compare experiment=lambda_a6000_vs_3090` imports Lambda's published RTX A6000 and "
    "RTX 3090 figures and compares them (and your runs of the study's models), or "
    "`python -m src.import_results source=lambda-2022` imports Lambda's newer tables"
)


class CompareError(ValueError):
    """Nothing (or not enough) to compare; the message names what is missing."""


STACK_KEYS = {f"tag:{name}": short for short, name in points.STACK.items()}  # config key -> short name


@dataclass(frozen=True, kw_only=True)
class Workpoint:
    """What a throughput figure is of: the fields that runs are grouped and compared by."""

    gpu: str  # the gpu profile it ran on (or was published for)
    side: str  # what the comparison sets it against others by: its gpu, or with by=KEY `KEY=value`
    gpu_count: int
    model: str
    category: str
    precision: str
    source: str
    unit: str
    config: tuple  # the measured configuration: sorted (key, value) pairs, see points.point_config
    tf32_math: bool = False  # matmuls ran (or were published) with TF32 tensor-core math

    point = property(lambda w: (w.side, w.gpu_count, w.model, w.precision, w.source, w.config))

    # the software and card it ran on: (short name, value) pairs, e.g. ("torch", "2.14.1")
    stack = property(lambda w: tuple((STACK_KEYS[k], v) for k, v in w.config if k in STACK_KEYS))
    software = property(lambda w: {k: v for k, v in w.stack if k in points.SOFTWARE})
    # the math that ran: tf32 where fp32 matmuls ran (or were published) as TF32
    math = property(lambda w: "tf32" if w.precision in ("fp32", "tf32") and w.tf32_math else w.precision)


@dataclass(frozen=True, kw_only=True)
class RunRecord(Workpoint):
    """One run of a point: the run as read back, with the efficiency figures compare derives."""

    run_id: str
    throughput: float
    per_watt: float | None
    per_watt_basis: str | None  # "measured" power, or the spec sheet's "tdp"
    per_kusd: float | None  # items/s per 1,000 USD of GPUs
    result: run_result.RunResult = field(compare=False, repr=False)


@dataclass(frozen=True, kw_only=True)
class Measurement(Workpoint):
    throughput: float  # median of the runs
    throughput_min: float
    throughput_max: float
    per_watt: float | None
    per_watt_basis: str | None
    per_kusd: float | None
    runs: list[RunRecord] = field(repr=False)
    variant: str = ""  # what sets this point apart from others of its model, e.g. "d_model=128"
    spread: Spread | None = None  # of its log throughput; None: no interval can be given
    # flawed runs a later clean run of the same point and config measured again: left out, kept in the store
    superseded: tuple[RunRecord, ...] = field(default=(), repr=False)

    interval = property(lambda m: m.spread.interval(m.throughput) if m.spread else None)
    key = property(lambda m: m.point)  # its key and value as a figure of src/compare/ratio.py
    value = property(lambda m: m.throughput)
    n_runs = property(lambda m: len(m.runs))

    # the spec-sheet figures its runs logged, which it is judged by (they ran on one profile)
    spec = property(lambda m: m.runs[0].result.spec)

    # the model as compared: its name and, where runs of it differ, what differs
    workload = property(lambda m: f"{m.model} [{m.variant}]" if m.variant else m.model)
    label = property(lambda m: f"{m.side} x{m.gpu_count} {m.workload} {m.precision} [{m.source}]")


def search_finished(uri: str, experiments: list[str], filter_string: str = "") -> tuple[list, list[str]]:
    """Every FINISHED run (all pages) of the named experiments that exist, read back; and their ids."""
    from mlflow.exceptions import MlflowException

    from src.credentials import bare
    from src.paths import sqlite_path
    from src.tracking import store

    database = sqlite_path(uri)
    if database is not None and not database.exists():  # opening it would create a whole new store
        raise CompareError(
            f"tracking.uri={uri!r}: no store there ({database} does not exist); run a benchmark, or "
            f"name the store your runs went to; {STUDY_HINT}"
        )
    client = store.client(uri)
    ids = [e.experiment_id for e in map(client.get_experiment_by_name, dict.fromkeys(experiments)) if e]
    if not ids:
        raise CompareError(
            f"tracking.experiment={experiments[0]!r}: no such experiment at {bare(uri)} (nor "
            f"{', '.join(map(repr, experiments[1:])) or 'another'}); run a benchmark first; {STUDY_HINT}"
        )
    query = "attributes.status = 'FINISHED'" + (f" and {filter_string}" if filter_string else "")
    runs, token = [], None
    try:
        while token != "":  # MLflow's last page has no token
            page = client.search_runs(ids, filter_string=query, max_results=1000, page_token=token)
            runs += map(run_result.read, page)
            token = page.token or ""
    except MlflowException as exc:
        raise CompareError(
            f"filter_string={filter_string!r}: MLflow rejects it: {exc.message.rstrip('.')}; clauses are "
            "joined with `and`, e.g. \"filter_string=tags.compile = 'False' and "
            'metrics.throughput > 100"'
        ) from None
    return runs, ids


# the RunRecord fields that a run read back holds under the same names
SAME_IN_RESULT = "run_id gpu gpu_count model category precision source unit throughput tf32_math".split()


def to_record(result: run_result.RunResult) -> RunRecord | None:
    """A training run's figures; None for ceilings runs, sweep parents, reports, runs without a throughput."""
    named = all((result.gpu, result.model, result.precision)) and result.gpu_count is not None
    if result.kind != recorded.TRAINING or not (result.throughput or 0) > 0 or not named:
        return None
    count, throughput, spec = result.gpu_count, result.throughput, result.spec
    per_watt, basis = result.per_watt, "measured"
    if per_watt is None:
        per_watt, basis = (throughput / (spec.tdp_w * count), "tdp") if spec.tdp_w else (None, None)
    return RunRecord(
        **{name: getattr(result, name) for name in SAME_IN_RESULT},
        side=result.gpu,
        config=points.point_config(result.params, result.tags),
        per_watt=per_watt,
        per_watt_basis=basis,
        per_kusd=throughput / (spec.price_usd * count / 1000) if spec.price_usd else None,
        result=result,
    )


FILTERED = ("gpu", "model", "precision", "gpu_count", "source")  # the fields compare's filters name


def select(records: list[RunRecord], cfg) -> tuple[list[RunRecord], int]:
    """The records the config's filters keep (gpus=, models=, precisions=, gpu_counts=, sources=; an empty
    one keeps all), and how many smoke runs among them were left out (kept only with include_smoke)."""
    wanted = [r for r in records if all(not cfg[f"{n}s"] or getattr(r, n) in cfg[f"{n}s"] for n in FILTERED)]
    kept = [r for r in wanted if cfg.include_smoke or not r.result.smoke]
    return kept, len(wanted) - len(kept)


def aggregate(records: list[RunRecord]) -> list[Measurement]:
    """One measurement per point: the median of its runs, and how many runs that took."""
    groups: dict[tuple, list[RunRecord]] = {}
    for record in records:
        groups.setdefault(record.point, []).append(record)
    differing = differing_keys(list(groups))
    measurements = []
    for point in sorted(groups, key=_sort_key):
        runs, superseded = remeasured(groups[point])
        first = runs[0]
        throughputs = [r.throughput for r in runs]
        watts = [r.per_watt for r in runs if r.per_watt is not None]
        prices = [r.per_kusd for r in runs if r.per_kusd is not None]
        bases = sorted({r.per_watt_basis for r in runs if r.per_watt_basis})
        shown = differing.get(first.model, ())
        lone = first.result if len(runs) == 1 else None
        measurements.append(
            Measurement(
                **{f.name: getattr(first, f.name) for f in fields(Workpoint)},  # what its runs are of
                throughput=statistics.median(throughputs),
                throughput_min=min(throughputs),
                throughput_max=max(throughputs),
                per_watt=statistics.median(watts) if watts else None,
                per_watt_basis="+".join(bases) or None,
                per_kusd=statistics.median(prices) if prices else None,
                runs=runs,
                variant=", ".join(f"{points.label(k)}={v}" for k, v in first.config if k in shown),
                spread=point_spread(throughputs, first.source != MEASURED, lone),
                superseded=superseded,
            )
        )
    return measurements


def remeasured(runs: list[RunRecord]) -> tuple[list[RunRecord], tuple[RunRecord, ...]]:
    """A point's runs less the flawed ones (GPU shared, stopping rule missed) whose config has a
    clean run: resume measured those again (src/run/resume.py); and the runs left out."""
    hashes = {r.run_id: r.result.tags.get(recorded.CONFIG_HASH) for r in runs}
    flawed = {r.run_id for r in runs if r.result.foreign or r.result.missed}
    clean = {hashes[r.run_id] for r in runs if hashes[r.run_id] and r.run_id not in flawed}
    superseded = tuple(r for r in runs if r.run_id in flawed and hashes[r.run_id] in clean)
    return [r for r in runs if r not in superseded], superseded


def differing_keys(points: list[tuple]) -> dict[str, tuple[str, ...]]:
    """Per model: the config keys in which points that would otherwise be one point differ. A batch
    that differs only between gpus (profiles size it by memory) is not listed; d_model 64 and 128
    on one gpu are, and then on every point of that model."""
    groups: dict[tuple, list[dict]] = {}
    for side, count, model, precision, source, config in points:
        groups.setdefault((side, count, model, precision, source), []).append(dict(config))
    differing: dict[str, set[str]] = {}
    for (_, _, model, _, _), configs in groups.items():
        keys = set().union(*configs)
        differing.setdefault(model, set()).update(k for k in keys if len({c.get(k) for c in configs}) > 1)
    return {model: tuple(sorted(keys)) for model, keys in differing.items()}


def _sort_key(point: tuple) -> tuple:
    side, count, model, precision, source, config = point
    return (model, config, precision, count, side, source)


def stack_difference(one: Workpoint, other: Workpoint, keys) -> str:
    """What differs between two points' stacks among `keys`, e.g. 'torch 2.14.1 vs 2.13.0'; ''."""
    a, b = dict(one.stack), dict(other.stack)
    return ", ".join(f"{k} {a.get(k, '?')} vs {b.get(k, '?')}" for k in keys if a.get(k) != b.get(k))
