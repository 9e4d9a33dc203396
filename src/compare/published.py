"""Published results in Lambda's table format, mapped onto the project's models and gpu profiles.

The format (lambdal/deeplearning-benchmark, pytorch/pytorch-train-throughput-*.csv): one row per
system, columns `name_gpu,num_gpu,watt,price`, then one throughput column per task; 0 or a negative
number means the task was not run or failed there.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

from src.hardware.devices import slug

SYSTEM_COLUMNS = ("name_gpu", "num_gpu", "watt", "price")
OTHER_CATEGORY = "other"
OTHER_UNIT = "items/s"


class TableError(ValueError):
    """A table that is not in the published format; the message names file, line and column."""


@dataclass(frozen=True)
class PublishedResult:
    system: str  # the row's name as published, e.g. "Dell 2x H100 80GB SXM5"
    gpu: str  # gpu profile, or a slug of the GPU name
    gpu_name: str  # the GPU as published, without the count
    gpu_count: int
    task: str  # the published column
    model: str
    category: str
    unit: str
    throughput: float
    watt: float | None  # the whole system's GPU power as published
    price_usd: float | None  # the whole system's GPU price as published


@dataclass
class PublishedTable:
    results: list[PublishedResult]
    not_run: int  # cells of 0 or less


def gpu_name(system: str) -> str:
    """The GPU of a row without its count: "LambdaCloud 4xV100 16GB" -> "LambdaCloud V100 16GB"."""
    return " ".join(re.sub(r"\b\d+x", " ", system).split())


def read_table(path: Path, tasks: dict, gpu_profiles: dict) -> PublishedTable:
    """Every positive cell of the table; `tasks` maps a column to {model, category, unit}."""
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        header = reader.fieldnames or []
        missing = [c for c in SYSTEM_COLUMNS if c not in header]
        if missing:
            raise TableError(
                f"{path}: missing column(s) {', '.join(missing)}; the published format starts with "
                f"{','.join(SYSTEM_COLUMNS)} and has one column per task"
            )
        task_columns = [c for c in header if c not in SYSTEM_COLUMNS]
        results, not_run = [], 0
        for line, row in enumerate(reader, start=2):
            system = row["name_gpu"].strip()
            count = _number(row, "num_gpu", path, line)
            if count is None or count < 1 or count != int(count):
                raise TableError(f"{path}:{line}: num_gpu={row['num_gpu']!r}: must be a whole number >= 1")
            name = gpu_name(system)
            for task in task_columns:
                value = _number(row, task, path, line)
                if value is None or value <= 0:
                    not_run += 1
                    continue
                mapping = tasks.get(task) or {"model": task, "category": OTHER_CATEGORY, "unit": OTHER_UNIT}
                results.append(
                    PublishedResult(
                        system=system,
                        gpu=gpu_profiles.get(name) or slug(name),
                        gpu_name=name,
                        gpu_count=int(count),
                        task=task,
                        model=mapping["model"],
                        category=mapping["category"],
                        unit=mapping["unit"],
                        throughput=value,
                        watt=_positive(_number(row, "watt", path, line)),
                        price_usd=_positive(_number(row, "price", path, line)),
                    )
                )
    return PublishedTable(results, not_run)


def _number(row: dict, column: str, path: Path, line: int) -> float | None:
    text = (row.get(column) or "").strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        raise TableError(f"{path}:{line}: {column}={text!r}: must be a number") from None


def _positive(value: float | None) -> float | None:
    return value if value is not None and value > 0 else None
