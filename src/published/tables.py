"""Published results in Lambda's table format, mapped onto the project's models and gpu profiles: the
parser src.published reads them with.

The format (lambdal/deeplearning-benchmark, pytorch/pytorch-train-throughput-*.csv): one row per
system, columns `name_gpu,num_gpu,watt,price`, then one throughput column per task; 0 or a negative
number means the task was not run or failed there.
"""

from __future__ import annotations

import csv
import math
import re
import statistics
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from omegaconf import OmegaConf

from src.hardware.devices import slug
from src.paths import PROJECT_ROOT
from src.results import recorded
from src.results.figures import is_figure

SHIPPED = PROJECT_ROOT / "reference" / "lambda"
GENERATIONS = SHIPPED / "sources.yaml"  # the published generations the project ships, one source each

SYSTEM_COLUMNS = ("name_gpu", "num_gpu", "watt", "price")
PRECISIONS = {"fp32": "fp32", "amp": "fp16"}  # ours -> the published tables' name for it
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
    line: int = 0  # where the table has it
    batch: float | None = None  # per GPU, where its generation's batch tables give it
    runs: tuple[float, ...] = ()  # the runs logged behind it, where its generation has them
    cell: float | None = None  # the table's own figure, where the mean of those runs is `throughput`


@dataclass
class PublishedTable:
    results: list[PublishedResult]
    not_run: int  # cells of 0 or less


COUNT = re.compile(r"\b\d+x", re.IGNORECASE)  # "8x " or "4xV100": how many of the GPU a row's system has
# words that name no card on their own: a count left over ("x", "2x" of "2x2x"), a vendor or its brand
NOT_A_CARD = re.compile(r"(\d*x)+|nvidia|amd|intel|geforce|quadro|tesla|radeon|\W*", re.IGNORECASE)


def gpu_name(system: str) -> str:
    """The GPU of a row without its count: "LambdaCloud 4xV100 16GB" -> "LambdaCloud V100 16GB"."""
    return " ".join(COUNT.sub(" ", system).split())


def names_a_card(name: str) -> bool:
    """Whether a GPU name (its count taken out) has a word beyond counts and vendors: "RTX 3090",
    "Titan RTX", "A100 80GB SXM4" do; "NVIDIA", "x", "2x", "—" do not."""
    return any(not NOT_A_CARD.fullmatch(word) for word in name.split())


def read_table(path: Path, tasks: dict, gpu_profiles: dict) -> PublishedTable:
    """Every positive cell of the table; `tasks` maps a column to {model, category, unit}.

    Refused with file:line and the cell: text that is not UTF-8, a header naming a column twice,
    a row with more or fewer cells than the header, a quote never closed, a name_gpu that names no
    GPU (empty, `—`, a count or a vendor alone: `8X`, `2x2x`, `8x NVIDIA`), two rows that name one
    card at one GPU count (`RTX 3090` and `1x RTX 3090`: compare would pool their figures), a cell
    that is not a plain normal finite number (`1_000`, `inf`, `5e-324` are not), and one system,
    GPU count and task published twice with different figures (the same figure twice imports once).
    """
    lines = _text_lines(path)
    reader = csv.DictReader(lines, strict=True)  # strict: a quote never closed is an error, not the rest of the file
    header = _read_header(reader, path)
    task_columns = [c for c in header if c not in SYSTEM_COLUMNS]
    results: dict[tuple, tuple[int, PublishedResult]] = {}
    cards: dict[tuple[str, int], tuple[int, str]] = {}  # (gpu, count) -> the line and system naming it
    not_run = 0
    for row in _rows(reader, path, len(header)):
        line = reader.line_num
        system = row["name_gpu"].strip()
        count = _number(row, "num_gpu", path, line)
        if count is None or count < 1 or count != int(count):
            raise TableError(f"{path}:{line}: num_gpu={row['num_gpu']!r}: must be a whole number >= 1")
        name = gpu_name(system)
        if not names_a_card(name):
            raise TableError(
                f"{path}:{line}: name_gpu={system!r}: names no GPU once its count and vendor are taken "
                "out; must name one (e.g. 'RTX 3090' or '8x A100 80GB SXM4')"
            )
        gpu = gpu_profiles.get(name) or slug(name)
        first_line, first = cards.setdefault((gpu, int(count)), (line, system))
        if first != system:
            raise TableError(
                f"{path}:{line}: name_gpu={system!r} x{int(count)} is the card of line {first_line} "
                f"({first!r} x{int(count)}): one row per card and GPU count, or their figures pool into "
                "one nobody published; keep one"
            )
        for task in task_columns:
            value = _number(row, task, path, line)
            if value is None or value <= 0:
                not_run += 1
                continue
            mapping = tasks.get(task) or {"model": task, "category": OTHER_CATEGORY, "unit": OTHER_UNIT}
            result = PublishedResult(
                system=system,
                gpu=gpu,
                gpu_name=name,
                gpu_count=int(count),
                task=task,
                model=mapping["model"],
                category=mapping["category"],
                unit=mapping["unit"],
                throughput=value,
                watt=_positive(_number(row, "watt", path, line)),
                price_usd=_positive(_number(row, "price", path, line)),
                line=line,
            )
            identity = (system, int(count), task)
            if identity in results and results[identity][1].throughput != value:
                first_line, first = results[identity]
                raise TableError(
                    f"{path}:{line}: {task}={row[task].strip()!r} for {system!r} x{int(count)} conflicts with "
                    f"{first.throughput:g} on line {first_line}: one published row, two figures"
                )
            results.setdefault(identity, (line, result))
    return PublishedTable([result for _, result in results.values()], not_run)


def _text_lines(path: Path) -> list[str]:
    data = path.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise TableError(
            f"{path}:{line}: byte {data[exc.start]:#04x} is not UTF-8 text; a published table is a CSV file"
        ) from None
    if "\0" in text:
        line = text[: text.index("\0")].count("\n") + 1
        raise TableError(f"{path}:{line}: a NUL byte; a published table is a CSV text file")
    return text.splitlines(keepends=True)


def _read_header(reader: csv.DictReader, path: Path) -> list[str]:
    try:
        header = [c.strip() for c in reader.fieldnames or []]
    except csv.Error as exc:
        raise TableError(f"{path}:1: not a CSV header: {exc}") from None
    twice = sorted({c for c in header if header.count(c) > 1})
    if twice:
        raise TableError(f"{path}:1: column(s) {', '.join(map(repr, twice))} appear more than once in the header")
    reader.fieldnames = header
    missing = [c for c in SYSTEM_COLUMNS if c not in header]
    if missing:
        raise TableError(
            f"{path}:1: missing column(s) {', '.join(missing)}; the published format starts with "
            f"{','.join(SYSTEM_COLUMNS)} and has one column per task"
        )
    return header


def _rows(reader: csv.DictReader, path: Path, width: int):
    """The rows, each with exactly one cell per column."""
    start = reader.line_num + 1
    try:
        for row in reader:
            start = reader.line_num + 1  # where the next row begins
            cells = len(row) - 1 + len(row[None]) if None in row else sum(v is not None for v in row.values())
            if cells != width:
                raise TableError(
                    f"{path}:{reader.line_num}: {cells} cells, the header has {width} "
                    f"({'extra ' + repr(row[None]) if None in row else 'missing ' + _missing(row)})"
                )
            yield row
    except csv.Error as exc:
        unclosed = " (a quote opened on this row is never closed)" if "end of data" in str(exc) else ""
        raise TableError(f"{path}:{start}: not a CSV row: {exc}{unclosed}") from None


def _missing(row: dict) -> str:
    return ", ".join(column for column, value in row.items() if value is None)


def _number(row: dict, column: str, path: Path, line: int) -> float | None:
    text = (row.get(column) or "").strip()
    if not text:
        return None
    try:
        if "_" in text:  # Python's float() reads 1_000; a published table means no such thing
            raise ValueError(text)
        value = float(text)
    except ValueError:
        raise TableError(f"{path}:{line}: {column}={text!r}: must be a number (digits, '.', 'e')") from None
    if value != 0 and not is_figure(abs(value)):  # nan, inf or a subnormal: no ratio divides by it
        raise TableError(
            f"{path}:{line}: {column}={text!r}: must be a normal finite number (not nan, inf, nor below "
            f"{sys.float_info.min:.1e})"
        )
    return value


def _positive(value: float | None) -> float | None:
    return value if value is not None and value > 0 else None


@dataclass
class Generation:
    """One shipped generation of a publisher's tables (reference/lambda/sources.yaml): what every
    figure of it ran with, and what the tables beside the throughput add to each figure."""

    source: str
    software: str
    dates: str
    batch: str  # "global": the batch tables give all GPUs' batch together; "per_gpu" but global_batch
    global_batch: list[str] = field(default_factory=list)
    tables: list[dict] = field(default_factory=list)  # {precision, throughput, batch_sizes}
    runs: str | None = None  # one row per logged run: name_gpu,num_gpu,task,precision,run,throughput

    def tags(self) -> dict:
        return {recorded.PUBLISHED_SOFTWARE: self.software, recorded.PUBLISHED_DATES: self.dates}

    def per_gpu_batch(self, task: str, batch: float, gpu_count: int) -> float:
        is_global = self.batch == "global" or task in self.global_batch
        return batch / gpu_count if is_global else batch

    def read(self, precision: str, tasks: dict, gpu_profiles: dict) -> PublishedTable:
        """Its table of `precision` as the importer and the projection check both read it: each figure
        with its per-GPU batch and the runs logged behind it. The 2021 tables truncate every figure to a
        whole number (Mask R-CNN on the RTX A6000: 12 for 12.94 images/s): where the runs are logged,
        their mean is the figure and the table's cell is kept beside it."""
        files = next(t for t in self.tables if t["precision"] == precision)
        table = read_table(SHIPPED / files[recorded.THROUGHPUT], tasks, gpu_profiles)
        sizes = read_table(SHIPPED / files["batch_sizes"], tasks, gpu_profiles).results
        batches = {(r.system, r.gpu_count, r.task): r.throughput for r in sizes}
        logged: dict[tuple, list[float]] = {}
        if self.runs:
            with open(SHIPPED / self.runs, newline="") as handle:
                for row in csv.DictReader(handle):
                    if row["precision"] == PRECISIONS[precision]:
                        cell = (row["name_gpu"], int(row["num_gpu"]), row["task"])
                        logged.setdefault(cell, []).append(float(row[recorded.THROUGHPUT]))
        results = []
        for r in table.results:
            cell = (r.system, r.gpu_count, r.task)
            runs = tuple(logged.get(cell, ()))
            batch = self.per_gpu_batch(r.task, batches[cell], r.gpu_count) if cell in batches else None
            if runs:  # their mean is the figure: the table's cell truncates it
                r = replace(r, throughput=statistics.fmean(runs), cell=r.throughput)
            results.append(replace(r, batch=batch, runs=runs))
        return PublishedTable(results, table.not_run)


def generations() -> dict[str, dict]:
    return OmegaConf.to_container(OmegaConf.load(GENERATIONS))


def generation(source: str) -> Generation:
    return Generation(source=source, **{k: v for k, v in generations()[source].items() if k != "title"})


def runs_spread(throughputs: list[float]) -> dict[str, float]:
    """How many logged runs a published figure is the mean of and, with two or more, the standard
    error of their mean log throughput (the spread compare's intervals are made of)."""
    if len(throughputs) < 2:
        return {recorded.PUBLISHED_RUNS: len(throughputs)} if throughputs else {}
    logs = [math.log(t) for t in throughputs]
    se = statistics.stdev(logs) / math.sqrt(len(logs))
    return {recorded.PUBLISHED_RUNS: len(throughputs), recorded.PUBLISHED_RUNS_LOG_SE: se}
