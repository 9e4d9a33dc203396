"""Read FINISHED runs back from MLflow, reduce repeats to one point each, and find like points.

A point is (side, gpu_count, model, precision, source, measured configuration); its throughput is
the median of its runs, with a 95% interval (src/compare/ratio.py), and what else its runs logged
(step-time shares, power, clocks, memory) is summarised once, here, as medians over its runs. The
measured configuration is every logged param that changes what is measured and the stack the run
logged as tags (src/config/points.point_config), so runs that differ in either are never pooled as
repeats. Runs without a `source` tag are this project's own: source "measured".
"""

from __future__ import annotations

import functools
import statistics
from dataclasses import dataclass, field, fields
from operator import attrgetter

from src.compare.ratio import Spread, point_spread
from src.config import points
from src.errors import TrackingUnavailable
from src.results import recorded, run_result
from src.results.figures import is_figure
from src.results.logged_spec import Spec
from src.results.recorded import MEASURED

CAP_KEY = "gpu.memory_limit_gb"  # a card under a memory cap: h200@24
# Precisions set against each other (and charted in one panel); each stays distinct in the tables.
PRECISION_GROUPS = {"fp32": "fp32", "tf32": "fp32", "amp": "mixed", "bf16": "mixed"}
# a point's own keys, as the matcher reads them
FIELDS = ("side", "gpu", "gpu_count", "model", "source", "precision_group", "precision", "math")
KINDS = (*FIELDS, "software", "card", "batch", "cap", "setting")  # what the matcher calls each key (kind())
FILTERED = ("gpu", "model", "precision", "gpu_count", "source")  # the fields compare's filters name
EXPERIMENT_KEYS = ("tracking.experiment", "tracking.published_experiment")  # the experiments read, in order
# a point's figures, each the median of what its runs logged (named as they are: window.mfu -> mfu)
SUMMARY = (
    "window.achieved_tflops_per_gpu",
    "window.mfu",
    "window.flops_per_item",
    "telemetry.throttled_power_share",  # of the window, clocks held down by the power limit
    "telemetry.power_mean_w",  # per GPU
    "telemetry.sm_clock_mean_mhz",
)


class CompareError(ValueError):
    """Nothing (or not enough) to compare; the message names what is missing."""


def precision_group(precision):
    return PRECISION_GROUPS.get(precision, precision)


def grouped(pairs):
    """(key, item) pairs -> key -> its items, in the order given."""
    groups: dict = {}
    for key, item in pairs:
        groups.setdefault(key, []).append(item)
    return groups


def median_of(values):
    found = [v for v in values if v is not None]
    return statistics.median(found) if found else None


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

    @property
    def point(self):
        return (self.side, self.gpu_count, self.model, self.precision, self.source, self.config)

    @property
    def stack(self):
        """The software and card it ran on: (short name, value) pairs, e.g. ("torch", "2.14.1")."""
        return tuple((points.label(k), v) for k, v in self.config if kind(k) in ("software", "card"))

    @property
    def software(self):
        return {k: v for k, v in self.stack if k in points.SOFTWARE}

    @property
    def precision_group(self):
        return precision_group(self.precision)

    @property
    def math(self):
        """The math that ran: tf32 where fp32 matmuls ran (or were published) as TF32."""
        return "tf32" if self.precision in ("fp32", "tf32") and self.tf32_math else self.precision

    @functools.cached_property
    def keys(self):
        """Its keys as the matcher reads them: its own fields, then its measured configuration."""
        return {name: getattr(self, name) for name in FIELDS} | dict(self.config)


@dataclass(frozen=True, kw_only=True)
class RunRecord(Workpoint):
    """One run of a point, as read back."""

    run_id: str
    throughput: float
    result: run_result.RunResult = field(compare=False, repr=False)


@dataclass(frozen=True, kw_only=True)
class Measurement(Workpoint):
    """A point: the median of its runs, and the summary of what they logged beside it."""

    throughput: float
    throughput_min: float
    throughput_max: float
    runs: list[RunRecord] = field(repr=False)
    spec: Spec  # the spec-sheet figures its runs logged, which it is judged by (they ran on one profile)
    variant: str = ""  # what sets this point apart from others of its model, e.g. "d_model=128"
    spread: Spread | None = None  # of its log throughput; None: no interval can be given
    # flawed runs a later clean run of the same point and config measured again: left out, kept in the store
    superseded: tuple[RunRecord, ...] = field(default=(), repr=False)
    per_watt: float | None = None  # items/s per watt: measured power, else the spec sheet's TDP
    per_watt_basis: str | None = None  # "measured", "tdp", or both joined
    per_kusd: float | None = None  # items/s per 1,000 USD of GPUs
    shares: dict[str, float] | None = None  # of the step time, by class (a class a breakdown lacks: 0)
    achieved_tflops_per_gpu: float | None = None
    mfu: float | None = None
    flops_per_item: float | None = None
    throttled_power_share: float | None = None
    power_mean_w: float | None = None
    sm_clock_mean_mhz: float | None = None
    power_limit_w: str | None = None  # per GPU, as its runs logged it: "700", or "300/350"
    peak_memory_gb: float | None = None  # the largest of its runs'
    gpu_name: str = ""

    @property
    def interval(self):
        return self.spread.interval(self.throughput) if self.spread else None

    @property
    def value(self):
        return self.throughput

    @property
    def n_runs(self):
        return len(self.runs)

    @property
    def at_power_limit(self):
        """Whether it ran at its card's power limit; None where its runs logged no telemetry of it."""
        share = self.throttled_power_share
        return None if share is None else share >= recorded.AT_POWER_LIMIT

    @property
    def workload(self):
        """The model as compared: its name and, where runs of it differ, what differs."""
        return f"{self.model} [{self.variant}]" if self.variant else self.model


def search_finished(uri, experiments, filter_string, hint):
    """Every FINISHED run (all pages) of the named experiments that exist, read back; and their ids by name.
    `hint`: what a store with nothing to compare is told (the study's command, conf/study/)."""
    finished, ids = finished_runs(uri, experiments, filter_string, hint)
    return list(map(run_result.read, finished)), ids


def finished_runs(uri, experiments, filter_string, hint, order_by=None):
    """Every FINISHED run of the named experiments that exist, as MLflow gives them, in `order_by`'s
    order; and their ids by name. A store that is not there (an sqlite path is not made), that does
    not answer, or has none of them, and a filter MLflow rejects: one line each."""
    from mlflow.exceptions import MlflowException

    from src.paths import sqlite_path
    from src.tracking import store
    from src.tracking.credentials import bare

    database = sqlite_path(uri)
    if database is not None and not database.exists():  # opening it would create a whole new store
        raise CompareError(
            f"tracking.uri={uri!r}: no store there ({database} does not exist); run a benchmark, or "
            f"name the store your runs went to; {hint}"
        )
    client = store.client(uri)
    try:  # an address that answers but is not MLflow's, or a server that never answers
        found = [client.get_experiment_by_name(name) for name in dict.fromkeys(experiments)]
    except Exception as exc:
        raise TrackingUnavailable(store.problem(uri, exc)) from None
    ids = {e.name: e.experiment_id for e in found if e and e.lifecycle_stage != "deleted"}
    if not ids and any(found):  # MLflow hides a deleted experiment's runs
        key, gone = next((k, e) for k, e in zip(EXPERIMENT_KEYS, found, strict=False) if e)
        raise CompareError(store.deleted_experiment(uri, key, gone))
    if not ids:
        raise CompareError(
            f"tracking.experiment={experiments[0]!r}: no such experiment at {bare(uri)} (nor "
            f"{', '.join(map(repr, experiments[1:])) or 'another'}); run a benchmark first; {hint}"
        )
    query = "attributes.status = 'FINISHED'" + (f" and {filter_string}" if filter_string else "")
    try:
        runs = store.every_run(client, list(ids.values()), query, order_by)
    except MlflowException as exc:
        raise CompareError(
            f"filter_string={filter_string!r}: MLflow rejects it: {exc.message.rstrip('.')}; clauses are "
            "joined with `and`, and Hydra reads the value quoted, e.g. "
            '"filter_string=\\"tags.compile = \'False\' and metrics.throughput > 100\\""'
        ) from None
    return runs, ids


def to_record(result):
    """A training run's figures; None for ceilings runs, sweep parents, reports, runs without a throughput
    (or with one no ratio can divide by: a subnormal an import took before it refused them)."""
    named = all((result.gpu, result.model, result.precision)) and result.gpu_count is not None
    if result.kind != recorded.TRAINING or not is_figure(result.throughput) or not named:
        return None
    same = "run_id gpu gpu_count model category precision source unit throughput tf32_math".split()
    config = points.point_config(result.params, result.tags)
    return RunRecord(
        **{name: getattr(result, name) for name in same}, side=result.gpu, config=config, result=result
    )


def select(records, cfg):
    """The records the config's filters keep (gpus=, models=, precisions=, gpu_counts=, sources=; an empty
    one keeps all), and how many smoke runs among them were left out (kept only with include_smoke)."""
    wanted = [r for r in records if all(not cfg[f"{n}s"] or getattr(r, n) in cfg[f"{n}s"] for n in FILTERED)]
    kept = [r for r in wanted if cfg.include_smoke or not r.result.smoke]
    return kept, len(wanted) - len(kept)


def aggregate(records):
    """One point per group of repeats: the median of its runs, and how many runs that took."""
    groups = grouped((record.point, record) for record in records)
    differing = differing_keys(list(groups))
    return [_measured(groups[point], differing) for point in sorted(groups, key=_sort_key)]


def _measured(repeats, differing):
    runs, superseded = remeasured(repeats)
    first, results = runs[0], [r.result for r in runs]
    throughputs = [r.throughput for r in runs]
    watts = [  # over the power measured, else over the spec sheet's TDP
        (r.per_watt, "measured") if r.per_watt else (r.throughput / (r.spec.tdp_w * r.gpu_count), "tdp")
        for r in results
        if r.per_watt or r.spec.tdp_w
    ]
    prices = [r.throughput / (r.spec.price_usd * r.gpu_count / 1000) for r in results if r.spec.price_usd]
    breakdowns = [r.shares for r in results if r.shares]
    limits = sorted({r.tags[recorded.POWER_LIMIT] for r in results if recorded.POWER_LIMIT in r.tags})
    return Measurement(
        **{f.name: getattr(first, f.name) for f in fields(Workpoint)},  # what its runs are of
        throughput=statistics.median(throughputs),
        throughput_min=min(throughputs),
        throughput_max=max(throughputs),
        runs=runs,
        spec=first.result.spec,
        variant=", ".join(
            f"{points.label(k)}={v}" for k, v in first.config if k in differing.get(first.model, ())
        ),
        spread=point_spread(throughputs, first.source != MEASURED, first.result if len(runs) == 1 else None),
        superseded=superseded,
        per_watt=median_of(w for w, _ in watts),
        per_watt_basis="+".join(sorted({basis for _, basis in watts})) or None,
        per_kusd=median_of(prices),
        shares={s: statistics.median(b[s] or 0.0 for b in breakdowns) for s in recorded.SHARES}
        if breakdowns
        else None,
        **{path.split(".")[1]: median_of(map(attrgetter(path), results)) for path in SUMMARY},
        power_limit_w="/".join(limits) or None,
        peak_memory_gb=max(r.window.peak_memory_gb or 0 for r in results) or None,
        gpu_name=first.result.gpu_name,
    )


def remeasured(runs):
    """A point's runs less the flawed ones (GPU shared, stopping rule missed) whose config has a
    clean run: resume measured those again (src/run/resume.py); and the runs left out."""

    def flawed(run):
        return run.result.foreign or run.result.missed

    def config(run):
        return run.result.tags.get(recorded.CONFIG_HASH)

    clean = {config(r) for r in runs if config(r) and not flawed(r)}
    superseded = tuple(r for r in runs if flawed(r) and config(r) in clean)
    return [r for r in runs if r not in superseded], superseded


def differing_keys(points):
    """Per model: the config keys in which points that would otherwise be one point differ. A batch
    that differs only between gpus (profiles size it by memory) is not listed; d_model 64 and 128
    on one gpu are, and then on every point of that model."""
    # (side, count, model, precision, source) -> the configs of its points
    groups = grouped((point[:-1], dict(point[-1])) for point in points)
    differing: dict[str, set[str]] = {}
    for (_, _, model, *_), configs in groups.items():
        differing.setdefault(model, set()).update(keys_that_differ(configs))
    return differing


def keys_that_differ(settings):
    """The keys whose values differ among the dicts `settings` (a key one lacks: None there), sorted."""
    return sorted(k for k in set().union(*settings) if len({s.get(k) for s in settings}) > 1)


def _sort_key(point):
    side, count, model, precision, source, config = point
    return (model, config, precision, count, side, source)


# ---- the matcher: "the point like this one except in these keys" ----
def kind(key):
    """What a key of a point is to the matcher: its own field (FIELDS), or of its configuration
    `software`, `card` (the card detected, its power limit), `batch`, `cap` or `setting`."""
    tag = key.removeprefix("tag:")
    if key in FIELDS:
        return key
    if tag in points.SOFTWARE.values():
        return "software"
    if tag in points.CARD.values():
        return "card"
    return {points.RAN_BATCH: "batch", CAP_KEY: "cap"}.get(key, "setting")


def unlike(one, other, free=(), ranked=()):
    """How unlike two points are in the kinds of key `ranked` names (per entry, a kind or a tuple of
    kinds: how many of those keys differ, a key one lacks at its default); None where they differ in
    a key of another kind, unless `free`. A published figure logs only its model's sizes (its import
    logs those the project runs the model at), no settings nor stack: where a side is not measured,
    a key counts against the pair only where both sides logged it."""
    a, b = one.keys, other.keys
    groups = [(g,) if isinstance(g, str) else g for g in ranked]
    measured = one.source == other.source == MEASURED
    differ = {k: kind(k) for k in a.keys() | b.keys() if a.get(k) != b.get(k)}
    held = [k for k, what in differ.items() if what not in free and not any(what in g for g in groups)]
    if any(measured or k in a and k in b for k in held):
        return None
    return tuple(sum(what in g for what in differ.values()) for g in groups)


def alike(point, among, free=(), ranked=()):
    """The point of `among` like `point` but in the kinds of key `free` and `ranked`; of several, the
    least unlike in `ranked`, in its order, then the first; None where none is alike."""
    found = [
        (rank, n) for n, other in enumerate(among) if (rank := unlike(point, other, free, ranked)) is not None
    ]
    return among[min(found)[1]] if found else None


def differing(one, other, kinds, both_logged=False):
    """What differs between two points among keys of `kinds` (`both_logged`: of those both logged):
    'torch 2.14.1 vs 2.13.0'; ''. A key a side lacks shows the default it ran at."""
    a, b = one.keys, other.keys
    logged = a.keys() & b.keys() if both_logged else a.keys() | b.keys()
    keys = sorted(k for k in logged if kind(k) in kinds and a.get(k) != b.get(k))
    shown = {k: [side.get(k, points.shown_default(k)) for side in (a, b)] for k in keys}
    return ", ".join(f"{points.label(k)} {mine} vs {theirs}" for k, (mine, theirs) in shown.items())
