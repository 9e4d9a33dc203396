"""The comparison written out: CSV tables, report.md, the printed summary, and the MLflow report run."""

from __future__ import annotations

import csv
from pathlib import Path

from src.compare.analysis import RelativeRow, SummaryRow, precision_group
from src.compare.anomalies import Anomaly
from src.compare.runs import MEASURED
from src.console import number

RELATIVE_CSV = "relative_throughput.csv"
SUMMARY_CSV = "summary.csv"
ANOMALIES_CSV = "anomalies.csv"
REPORT_MD = "report.md"

RELATIVE_COLUMNS = (
    "model", "variant", "category", "precision", "precision_group", "gpu_count", "gpu", "source", "throughput",
    "unit", "relative", "n_runs", "throughput_min", "throughput_max", "baseline_gpu",
    "baseline_precision", "baseline_source", "baseline_throughput", "scaling_efficiency",
    "per_watt", "per_watt_basis", "per_kusd", "anomalies", "run_ids",
)  # fmt: skip
SUMMARY_COLUMNS = (
    "category", "precision", "precision_group", "gpu_count", "gpu", "source", "relative_mean",
    "relative_geomean", "n_models", "models", "models_left_out", "baselines",
)  # fmt: skip
ANOMALY_COLUMNS = ("kind", "model", "precision", "gpu_count", "gpu", "source", "detail", "run_ids")


def flagged_points(anomalies: list[Anomaly]) -> dict[tuple, list[str]]:
    """Point -> the kinds of anomaly flagged on it."""
    kinds: dict[tuple, list[str]] = {}
    for anomaly in anomalies:
        kinds.setdefault(anomaly.measurement.point, []).append(anomaly.kind)
    return kinds


def relative_records(rows: list[RelativeRow], efficiency: dict, kinds: dict[tuple, list[str]]) -> list[dict]:
    records = []
    for row in rows:
        m, base = row.measurement, row.baseline
        records.append(
            {
                "model": m.model,
                "variant": m.variant,
                "category": m.category,
                "precision": m.precision,
                "precision_group": precision_group(m.precision),
                "gpu_count": m.gpu_count,
                "gpu": m.gpu,
                "source": m.source,
                "throughput": m.throughput,
                "unit": m.unit,
                "relative": row.relative,
                "n_runs": m.n_runs,
                "throughput_min": m.throughput_min,
                "throughput_max": m.throughput_max,
                "baseline_gpu": base.gpu if base else None,
                "baseline_precision": base.precision if base else None,
                "baseline_source": base.source if base else None,
                "baseline_throughput": base.throughput if base else None,
                "scaling_efficiency": efficiency.get(m.point),
                "per_watt": m.per_watt,
                "per_watt_basis": m.per_watt_basis,
                "per_kusd": m.per_kusd,
                "anomalies": " ".join(kinds.get(m.point, [])),
                "run_ids": " ".join(r.run_id for r in m.runs),
            }
        )
    return records


def summary_records(summary: list[SummaryRow]) -> list[dict]:
    return [
        {
            "category": s.category,
            "precision": s.precision,
            "precision_group": precision_group(s.precision),
            "gpu_count": s.gpu_count,
            "gpu": s.gpu,
            "source": s.source,
            "relative_mean": s.relative_mean,
            "relative_geomean": s.relative_geomean,
            "n_models": s.n_models,
            "models": " ".join(s.models),
            "models_left_out": " ".join(s.left_out),
            "baselines": s.baselines,
        }
        for s in summary
    ]


def anomaly_records(anomalies: list[Anomaly]) -> list[dict]:
    return [
        {
            "kind": a.kind,
            "model": a.measurement.workload,
            "precision": a.measurement.precision,
            "gpu_count": a.measurement.gpu_count,
            "gpu": a.measurement.gpu,
            "source": a.measurement.source,
            "detail": a.detail,
            "run_ids": " ".join(r.run_id for r in a.measurement.runs),
        }
        for a in anomalies
    ]


def write_csv(path: Path, columns: tuple[str, ...], records: list[dict]) -> Path:
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        for record in records:
            writer.writerow({k: _csv_value(v) for k, v in record.items()})
    return path


def _csv_value(value):
    if value is None:
        return ""
    return f"{value:.6g}" if isinstance(value, float) else value


def markdown(
    title: str,
    facts: list[str],
    summary: list[dict],
    relative: list[dict],
    anomalies: list[dict],
    notes: list[str],
    charts: list[Path],
) -> str:
    lines = [f"# {title}", "", *[f"- {fact}" for fact in facts], "", "## Category means", ""]
    lines += _table(summary, ("category", "precision", "gpu_count", "gpu", "source", "relative_mean",
                              "relative_geomean", "models", "models_left_out", "baselines"))  # fmt: skip
    lines += ["", "## Per model", ""]
    lines += _table(relative, ("model", "variant", "precision", "gpu_count", "gpu", "source", "throughput",
                               "unit", "n_runs", "relative", "baseline_precision", "baseline_source",
                               "scaling_efficiency", "anomalies"))  # fmt: skip
    lines += ["", f"## Anomalies ({len(anomalies)})", ""]
    lines += _table(anomalies, ANOMALY_COLUMNS[:-1]) if anomalies else ["None found."]
    if notes:
        lines += ["", "## Notes", "", *[f"- {note}" for note in notes]]
    lines += ["", "## Charts", "", *[f"![{chart.stem}]({chart.name})" for chart in charts], ""]
    return "\n".join(lines)


PERCENT_COLUMNS = {"scaling_efficiency"}


def _table(records: list[dict], columns: tuple[str, ...]) -> list[str]:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for record in records:
        lines.append("| " + " | ".join(_md_value(c, record[c]) for c in columns) + " |")
    return lines


def _md_value(column: str, value) -> str:
    if value is None or value == "":
        return ""
    if column in PERCENT_COLUMNS:
        return f"{value:.0%}"
    if isinstance(value, float):
        return number(value)
    return str(value).replace("|", "/")


STUDY_PAIR = ("a6000", "rtx3090")  # the seed study's gpus: shown by default beside your own


def console_gpus(summary: list[SummaryRow], baseline: str, asked: list[str]) -> tuple[list[str], list[str]]:
    """(shown, left out): the gpus asked for (`gpus=`), else the baseline, the study's pair and
    every gpu with runs of this project's own; the other gpus of `summary` are left out of the
    console (summary.csv and report.md keep them all)."""
    present = sorted({s.gpu for s in summary})
    if asked:
        wanted = set(asked)
    else:
        wanted = {baseline, *STUDY_PAIR} | {s.gpu for s in summary if s.source == MEASURED}
    return [g for g in present if g in wanted], [g for g in present if g not in wanted]


def print_summary(summary: list[SummaryRow], baseline: str, asked: list[str] = (), out: str = "") -> None:
    """The category means in an 80-column terminal or a piped log: one section per category,
    precision and GPU count, a gpu's name never wrapped; summary.csv keeps every column and row.
    With many gpus (Lambda's tables hold about twenty) only those of console_gpus are shown, and
    a line says how many more there are and how to see them."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    from src.console import console, note

    shown, left_out = console_gpus(summary, baseline, list(asked))
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1))
    table.add_column(escape("category, precision, GPUs / gpu [source]"), no_wrap=True)
    for header in ("mean", "geo", "n"):  # n: models averaged
        table.add_column(header, justify="right", no_wrap=True)
    section = None
    for s in summary:
        if s.gpu not in shown:
            continue
        if (s.category, s.precision, s.gpu_count) != section:
            section = (s.category, s.precision, s.gpu_count)
            table.add_row(f"[bold]{escape(s.category)}, {escape(s.precision)}, {s.gpu_count} GPU"
                          f"{'s' if s.gpu_count > 1 else ''}[/]", "", "", "")  # fmt: skip
        name = s.gpu + ("" if s.source == MEASURED else f" [{s.source}]")
        table.add_row(
            "  " + escape(name),
            _console_ratio(s.relative_mean),
            _console_ratio(s.relative_geomean),
            str(s.n_models),
        )
    note(f"Throughput relative to {baseline}, mean over the models every gpu has")
    console.print(table)
    if left_out:
        where = f" in {out}" if out else ""
        note(
            f"{len(left_out)} more gpu(s) left out of this table ({', '.join(left_out)}): every one is in "
            f"summary.csv, report.md and the charts{where}; gpus=[...] picks the gpus to compare"
        )


def _console_ratio(value: float) -> str:
    return f"{value:.2f}x" if value >= 0.1 else f"{value:.2g}x"  # a CPU against a GPU needs digits
