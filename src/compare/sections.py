"""What a comparison says, section by section: each section is data (report.md's heading and lines,
the CSV tables behind it, the charts it draws, what it prints), built from the compared points;
src/compare/report.py renders them all, once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from src import console, recorded
from src.compare import capacity, capacity_report, charts, explain, explain_charts, hardware_software, report
from src.compare import study as study_answer
from src.compare.analysis import RelativeRow, SummaryRow
from src.compare.anomalies import Anomaly, scaling_efficiency
from src.compare.runs import Measurement, RunRecord
from src.run_result import RunResult


@dataclass
class Read:
    """The runs a comparison read, and how many its filters left out."""

    experiments: list[str]
    experiment_ids: list[str]  # measured first, then published
    runs: list[RunResult]  # every FINISHED run of the experiments
    records: list[RunRecord]  # those with a throughput
    smoke_left_out: int
    untagged: int  # with by=: runs without the key's tag


@dataclass
class Comparison:
    """One comparison: the runs it read, what it computed from them (points -> ratios), what it wrote."""

    read: Read
    measurements: list[Measurement]
    baseline: str
    rows: list[RelativeRow]
    summary: list[SummaryRow]
    nothing_common: list[str]  # series without a model in common with their group: no mean
    found: list[Anomaly]
    by: str | None
    outside: str  # one line for the runs the question asked leaves out (src/compare/pipeline.scope)
    projected: Any  # project=[...]: the projection's outcome (src/compare/projection.py)
    out: Path | None = None  # where its files went, once written
    files: list[Path] = field(default_factory=list)
    report_run_id: str = ""

    @property
    def flagged(self) -> dict[tuple, list[str]]:
        """Point -> the kinds of anomaly flagged on it."""
        kinds: dict[tuple, list[str]] = {}
        for anomaly in self.found:
            kinds.setdefault(anomaly.measurement.point, []).append(anomaly.kind)
        return kinds


@dataclass
class Section:
    heading: str  # report.md's `## heading`
    lines: list[str]  # its text in report.md, under the heading
    tables: list[tuple[str, tuple, list[dict]]] = field(default_factory=list)  # CSVs: file, columns, rows
    draw: Callable[[Path], list[Path]] | None = None  # its charts, linked under its text
    show: Callable[[], None] | None = None  # what it prints on the console
    warnings: list[str] = field(default_factory=list)  # said on the console as warnings


CSV_ONLY = {"precision_group", "relative_geomean_low", "relative_geomean_high", "n_models"}  # of summary.csv
MEANS_COLUMNS = tuple(c for c in report.SUMMARY_COLUMNS if c not in CSV_ONLY)
PER_MODEL_COLUMNS = ("model", "variant", "precision", "gpu_count", "gpu", "source", recorded.THROUGHPUT,
                     "throughput_low", "throughput_high", "unit", "n_runs", "relative", "relative_low",
                     "relative_high", "interval", "difference", "flags", "stack_differs",
                     "baseline_precision", "baseline_source", "scaling_efficiency", "anomalies")  # fmt: skip


def gpu_comparison(c: Comparison) -> list[Section]:
    """Category means and per-model ratios against the baseline, as tables and charts."""
    relative = report.relative_records(c.rows, scaling_efficiency(c.measurements), c.flagged)
    means = report.summary_records(c.summary, c.baseline)
    shown_means = [r for r in means if r["gpu"] != c.baseline]  # 1.0 by definition: the CSVs keep them
    shown_relative = [r for r in relative if r["gpu"] != c.baseline]
    means_csv = ("summary.csv", report.SUMMARY_COLUMNS, means)
    relative_csv = ("relative_throughput.csv", report.RELATIVE_COLUMNS, relative)
    return [
        Section("Category means", report.markdown_table(shown_means, MEANS_COLUMNS), [means_csv]),
        Section("Per model", report.markdown_table(shown_relative, PER_MODEL_COLUMNS), [relative_csv]),
    ]


def study(c: Comparison, asked) -> list[Section]:
    """An experiment's question (conf/study/): its stated figures beside the published and your own."""
    found = study_answer.figures(c.summary, asked)
    lines = study_answer.markdown(found, c.rows, asked)
    show = partial(study_answer.print_study, found, c.rows, asked)
    return [Section(f"{asked.title}: {study_answer.subject(asked)} over {asked.baseline}", lines, show=show)]


def hardware_and_software(c: Comparison) -> list[Section]:
    """Cross-stack ratios split into their hardware and software parts (GPU comparisons only)."""
    records = [] if c.by else hardware_software.records(c.rows, c.measurements)
    if not records:
        return []
    lines = report.markdown_table(records, hardware_software.COLUMNS)
    table = (hardware_software.CSV, hardware_software.COLUMNS, records)
    return [Section("Hardware and software parts of cross-stack ratios", lines, [table])]


def flagged(c: Comparison) -> list[Section]:
    records = report.anomaly_records(c.found)
    lines = report.markdown_table(records, report.ANOMALY_COLUMNS[:-1]) if records else ["None found."]
    csv = ("anomalies.csv", report.ANOMALY_COLUMNS, records)
    return [Section(f"Anomalies ({len(records)})", lines, [csv])]


def notes(lines: list[str], printed: list[str]) -> list[Section]:
    """What the figures rest on; `printed` are said on the console too."""
    said = lines + printed
    show = (lambda: [console.note(line) for line in printed]) if printed else None
    return [Section("Notes", [f"- {note}" for note in said], show=show)] if said else []


def pictures(c: Comparison) -> list[Section]:
    def draw(out: Path) -> list[Path]:
        drawn = charts.draw_all(c.rows, c.summary, c.measurements, c.baseline, out, c.flagged)
        return drawn + capacity_report.curve_chart(c.measurements, out)

    return [Section("Charts", [], draw=draw)]


def explanation(c: Comparison) -> list[Section]:
    """Why: each point against its card's ceilings, its step-time breakdown, published means against yours."""
    why = explain.explain(c.read.runs, c.measurements, c.rows, c.summary, c.baseline)
    if not (why.placements or why.sentences or why.claims):  # nothing measured to place or check
        return []
    table = (explain.CSV, explain.COLUMNS, [explain.record(p) for p in why.placements])
    return [Section(explain.HEADING, explain.markdown(why), [table], partial(explain_charts.draw, why))]


def speed_and_capacity(c: Comparison, pair: list[str]) -> list[Section]:
    """capacity_split=[A,B]: the split's rows and means, or the runs it lacks with their commands."""
    if not pair:
        return []
    rows, missing = capacity.split(c.measurements, pair)
    if not rows:
        missing.insert(0, f"capacity_split: neither {pair[0]} nor {pair[1]} has a run with a batch size")
        return [Section("Speed and capacity", [f"- {line}" for line in missing], warnings=missing)]
    means = capacity.category_means(rows)
    tables = [
        (capacity_report.CSV, capacity_report.COLUMNS, capacity_report.records(rows)),
        (capacity_report.MEANS_CSV, capacity_report.MEAN_COLUMNS, capacity_report.records(means)),
    ]
    heading = f"Speed and capacity: {rows[0].card} against {rows[0].baseline_card}"
    draw, show = partial(capacity_report.split_chart, rows), partial(capacity_report.print_table, rows, means)
    return [Section(heading, capacity_report.markdown(rows, means, missing), tables, draw, show, missing)]
