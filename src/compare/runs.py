"""Read FINISHED runs back from MLflow and reduce repeats to one measurement per point.

A point is (gpu, gpu_count, model, precision, source); its throughput is the median of its runs.
Runs without a `source` tag are this project's own: source "measured".
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from functools import cache

from src.hardware import devices
from src.tracking.store import SETTING_TAGS

MEASURED = "measured"
REQUIRED_TAGS = ("gpu", "gpu_count", "model", "precision")


class CompareError(ValueError):
    """Nothing (or not enough) to compare; the message names what is missing."""


@dataclass(frozen=True)
class Workpoint:
    """What a throughput figure is of: the fields that runs are grouped and compared by."""

    gpu: str
    gpu_count: int
    model: str
    category: str
    precision: str
    source: str
    unit: str

    @property
    def point(self) -> tuple:
        return (self.gpu, self.gpu_count, self.model, self.precision, self.source)


@dataclass(frozen=True)
class RunRecord(Workpoint):
    run_id: str
    throughput: float
    tf32_math: bool  # matmuls ran (or were published) with TF32 tensor-core math
    per_watt: float | None
    per_watt_basis: str | None  # "measured" power, or the spec sheet's "tdp"
    per_kusd: float | None  # items/s per 1,000 USD of GPUs
    settings: tuple  # values of SETTING_TAGS
    anomaly_tag: str | None  # the `anomaly` tag an earlier compare left


@dataclass(frozen=True)
class Measurement(Workpoint):
    throughput: float  # median of the runs
    throughput_min: float
    throughput_max: float
    tf32_math: bool
    per_watt: float | None
    per_watt_basis: str | None
    per_kusd: float | None
    runs: list[RunRecord] = field(repr=False)
    mixed_settings: bool = False

    @property
    def n_runs(self) -> int:
        return len(self.runs)

    @property
    def label(self) -> str:
        return f"{self.gpu} x{self.gpu_count} {self.model} {self.precision} [{self.source}]"


def search_finished(uri: str, experiment: str, filter_string: str = "") -> list:
    """Every FINISHED run of the experiment (all pages); the extra filter is MLflow's syntax."""
    from mlflow.exceptions import MlflowException

    from src.tracking import store

    mlflow_client = store.client(uri)
    found = mlflow_client.get_experiment_by_name(experiment)
    if found is None:
        raise CompareError(
            f"tracking.experiment={experiment!r}: no such experiment at {uri}; "
            "run a benchmark or import published results first"
        )
    query = "attributes.status = 'FINISHED'" + (f" and {filter_string}" if filter_string else "")
    runs, token = [], None
    while True:
        try:
            page = mlflow_client.search_runs(
                [found.experiment_id], filter_string=query, max_results=1000, page_token=token
            )
        except MlflowException as exc:
            raise CompareError(f"filter_string={filter_string!r}: MLflow rejects it: {exc.message}") from None
        runs.extend(page)
        token = page.token
        if not token:
            return runs


def to_record(run) -> RunRecord | None:
    """A benchmark run's figures, or None for runs that are not one (sweep parents, reports)."""
    tags, metrics, params = run.data.tags, run.data.metrics, run.data.params
    throughput = metrics.get("throughput")
    if throughput is None or throughput <= 0 or tags.get("report") == "true":
        return None
    if any(not tags.get(key) for key in REQUIRED_TAGS) or not tags["gpu_count"].isdigit():
        return None
    gpu, count = tags["gpu"], int(tags["gpu_count"])
    profile = spec_sheet(gpu)
    per_watt, basis = metrics.get("throughput_per_watt"), "measured"
    if per_watt is None:
        tdp = positive_number(params.get("gpu.tdp_w")) or positive_number(profile.get("tdp_w"))
        per_watt, basis = (throughput / (tdp * count), "tdp") if tdp else (None, None)
    price = positive_number(params.get("gpu.price_usd")) or positive_number(profile.get("price_usd"))
    return RunRecord(
        run_id=run.info.run_id,
        gpu=gpu,
        gpu_count=count,
        model=tags["model"],
        category=tags.get("category", "other"),
        precision=tags["precision"],
        source=tags.get("source", MEASURED),
        unit=tags.get("unit", "items/s"),
        throughput=throughput,
        tf32_math=tags.get("math_matmul_tf32") == "True",
        per_watt=per_watt,
        per_watt_basis=basis,
        per_kusd=throughput / (price * count / 1000) if price else None,
        settings=tuple(tags.get(key) for key in SETTING_TAGS),
        anomaly_tag=tags.get("anomaly"),
    )


def select(records: list[RunRecord], cfg) -> list[RunRecord]:
    """The records the config's filters keep (an empty filter keeps everything)."""
    keep = []
    for record in records:
        checks = (
            (cfg.gpus, record.gpu),
            (cfg.models, record.model),
            (cfg.precisions, record.precision),
            (cfg.gpu_counts, record.gpu_count),
            (cfg.sources, record.source),
        )
        if all(not allowed or value in allowed for allowed, value in checks):
            keep.append(record)
    return keep


def aggregate(records: list[RunRecord]) -> list[Measurement]:
    """One measurement per point: the median of its runs, and how many runs that took."""
    groups: dict[tuple, list[RunRecord]] = {}
    for record in records:
        groups.setdefault(record.point, []).append(record)
    measurements = []
    for point in sorted(groups, key=_sort_key):
        runs = groups[point]
        first = runs[0]
        throughputs = [r.throughput for r in runs]
        watts = [r.per_watt for r in runs if r.per_watt is not None]
        prices = [r.per_kusd for r in runs if r.per_kusd is not None]
        bases = sorted({r.per_watt_basis for r in runs if r.per_watt_basis})
        measurements.append(
            Measurement(
                gpu=first.gpu,
                gpu_count=first.gpu_count,
                model=first.model,
                category=first.category,
                precision=first.precision,
                source=first.source,
                unit=first.unit,
                throughput=statistics.median(throughputs),
                throughput_min=min(throughputs),
                throughput_max=max(throughputs),
                tf32_math=first.tf32_math,
                per_watt=statistics.median(watts) if watts else None,
                per_watt_basis="+".join(bases) or None,
                per_kusd=statistics.median(prices) if prices else None,
                runs=runs,
                mixed_settings=len({r.settings for r in runs}) > 1,
            )
        )
    return measurements


def _sort_key(point: tuple) -> tuple:
    gpu, count, model, precision, source = point
    return (model, precision, count, gpu, source)


@cache
def spec_sheet(gpu: str) -> dict:
    """The gpu profile's spec sheet; {} for imported GPUs without a profile."""
    return devices.load_profile(gpu) or {}


def positive_number(value) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):  # absent, or "None" logged for a profile without the figure
        return None
    return number if number > 0 else None
