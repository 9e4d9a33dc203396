"""The comparison written out: CSV tables, report.md and the printed summary."""

from __future__ import annotations

import csv
from pathlib import Path

from src import recorded
from src.compare.analysis import RelativeRow, SummaryRow, precision_group
from src.compare.anomalies import Anomaly
from src.compare.ratio import NO_DIFFERENCE, columns, describe, holds_one
from src.compare.runs import MEASURED
from src.console import gpus, number

RELATIVE_COLUMNS = (
    "model", "variant", "category", "precision", "precision_group", "gpu_count", "gpu", "source",
    recorded.THROUGHPUT, "unit", "relative", "relative_low", "relative_high", "interval", "difference",
    "flags", "stack_differs", "n_runs", "throughput_low", "throughput_high", "throughput_min",
    "throughput_max", "baseline_gpu", "baseline_precision", "baseline_source", "baseline_throughput",
    "scaling_efficiency", "per_watt", "per_watt_basis", "per_kusd", "anomalies", "stack", "run_ids",
)  # fmt: skip
SUMMARY_COLUMNS = (
    "category", "precision", "precision_group", "gpu_count", "gpu", "source", "relative_mean",
    "relative_mean_low", "relative_mean_high", "relative_geomean", "relative_geomean_low",
    "relative_geomean_high", "interval", "difference", "flags", "n_models", "models",
    "models_left_out", "baselines",
)  # fmt: skip
ANOMALY_COLUMNS = ("kind", "model", "precision", "gpu_count", "gpu", "source", "detail", "run_ids")


def relative_records(rows: list[RelativeRow], efficiency: dict, kinds: dict[tuple, list[str]]) -> list[dict]:
    records = []
    for row in rows:
        m, base = row.measurement, row.baseline
        records.append(
            {column: getattr(m, column, None) for column in RELATIVE_COLUMNS}  # its own; the rest below
            | columns("relative", row.ratio)
            | dict(zip(("throughput_low", "throughput_high"), m.interval or (None, None), strict=True))
            | {f"baseline_{k}": getattr(base, k, None) for k in ("precision", "source", recorded.THROUGHPUT)}
            | {
                "precision_group": precision_group(m.precision),
                "gpu": m.side,
                "interval": describe(m.spread if base is None or base is m else row.spread),
                "difference": NO_DIFFERENCE if row.no_difference else "",
                "flags": " ".join(row.flags),
                "stack_differs": row.stack_differs,
                "baseline_gpu": base.side if base else None,
                "scaling_efficiency": efficiency.get(m.point),
                "anomalies": " ".join(kinds.get(m.point, [])),
                "stack": " ".join(f"{k}={v}" for k, v in m.stack),
                "run_ids": " ".join(r.run_id for r in m.runs),
            }
        )
    return records


def summary_records(summary: list[SummaryRow], baseline: str = "") -> list[dict]:
    return [
        {column: getattr(s, column, None) for column in SUMMARY_COLUMNS}  # its own; the rest below
        | columns("relative_mean", s.mean)
        | columns("relative_geomean", s.geomean)
        | {
            "interval": "baseline" if s.side == baseline else s.geomean.basis(),
            "difference": NO_DIFFERENCE if s.mean.no_difference else "",
            "flags": " ".join(s.flags),
            "precision_group": precision_group(s.precision),
            "gpu": s.side,
            "models": " ".join(s.models),
            "models_left_out": "; ".join(s.left_out),
        }
        for s in summary
    ]


def anomaly_records(anomalies: list[Anomaly]) -> list[dict]:
    return [
        {field: getattr(a.measurement, field) for field in ("precision", "gpu_count", "source")}
        | {"kind": a.kind, "model": a.measurement.workload, "gpu": a.measurement.side, "detail": a.detail}
        | {"run_ids": " ".join(a.run_ids)}  # the runs that earned it
        for a in anomalies
    ]


def _csv_value(value):
    return "" if value is None else f"{value:.6g}" if isinstance(value, float) else value


def write_all(sections: list, title: str, facts: list[str], out: Path) -> tuple[str, list[Path]]:
    """Every section's CSVs and charts into `out`, and report.md of them in order; returns report.md's
    text and every file written."""
    files, drawn = [], []
    lines = [f"# {title}", "", *[f"- {fact}" for fact in facts]]
    for section in sections:
        for name, fields, records in section.tables:
            with open(out / name, "w", newline="") as handle:
                writer = csv.DictWriter(handle, fieldnames=fields)
                writer.writeheader()
                writer.writerows({k: _csv_value(v) for k, v in record.items()} for record in records)
            files.append(out / name)
        charts = section.draw(out) if section.draw else []
        drawn += charts
        links = [f"![{path.stem}]({path.name})" for path in charts]
        gap = [""] if section.lines and links else []
        lines += ["", f"## {section.heading}", "", *section.lines, *gap, *links]
    text = "\n".join(lines) + "\n"
    (out / "report.md").write_text(text)
    return text, [*files, *drawn, out / "report.md"]


def markdown_table(records: list[dict], columns: tuple[str, ...]) -> list[str]:
    rows = ["| " + " | ".join(_md_value(c, record[c]) for c in columns) + " |" for record in records]
    return ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns), *rows]


def markdown_grid(head: tuple, rows: list[list]) -> list[str]:
    """markdown_table of rows given as cells in `head`'s order."""
    return markdown_table([dict(zip(head, row, strict=True)) for row in rows], head)


def _md_value(column: str, value) -> str:
    if value is None or value == "":
        return ""
    if column == "scaling_efficiency":
        return f"{value:.0%}"
    return number(value) if isinstance(value, float) else str(value).replace("|", "/")


STUDY_PAIR = ("a6000", "rtx3090")  # the seed study's gpus: shown by default beside your own


def by_default(baseline: str, points: list) -> set[str]:
    """The gpus a compare shows unless told: the baseline, the study's pair, each one you measured."""
    return {baseline, *STUDY_PAIR} | {p.side for p in points if p.source == MEASURED}


def print_summary(
    summary: list[SummaryRow], baseline: str, asked: list[str] = (), out: str = "", unlike: list[str] = ()
) -> None:
    """The category means in an 80-column terminal, of the gpus asked for (`gpus=`), else by_default's:
    Lambda's tables hold about twenty, so a line names the rest (summary.csv keeps every one). `unlike`
    names the ratios of unlike math that no mean holds."""
    from rich.markup import escape

    from src.console import console, note

    wanted = set(asked) or by_default(baseline, summary)
    others = sorted({s.side for s in summary} - wanted)
    sections: dict[tuple, list[list[str]]] = {}  # (category, precision, GPUs) -> a row per gpu
    left_out: dict[tuple, list[str]] = {}  # (gpu, the models left out and why) -> the means leaving them out
    for s in (s for s in summary if s.side in wanted):
        stacks = "!" if "stack_differs" in s.flags else ""  # a ratio averaged set unlike software stacks
        interval = "-" if s.side == baseline else interval_text(s.mean.interval) + stacks
        means = (console_ratio(s.relative_mean), console_ratio(s.relative_geomean))
        name = s.side + ("" if s.source == MEASURED else f" [{s.source}]")
        heading = f"{escape(s.category)}, {escape(s.precision)}, {gpus(s.gpu_count)}"
        sections.setdefault((heading,), []).append(["  " + escape(name), *means, interval, str(s.n_models)])
        if s.left_out and s.side != baseline:
            left_out.setdefault((name, s.left_out), []).append(f"{s.category} {s.precision} x{s.gpu_count}")
    if not sections:  # an empty table's header says nothing: say why there is no mean
        note(
            f"Throughput relative to {baseline}: no category mean; no other gpu shares a model, GPU "
            f"count, precision and settings with {baseline}'s runs"
        )
        console.print()
        return
    intervals = [row[3] for rows in sections.values() for row in rows]
    notes = []
    if any("!" in text[-2:] for text in intervals):
        notes.append("! stack_differs: some ratios set unlike software stacks (see report.md)")
    if any(text.startswith("too wide") for text in intervals):
        notes.append(f"too wide: ends over {WIDE}-fold apart (repeats that disagree; summary.csv)")
    notes += [f"math_differs, in no mean: {escape(line)}" for line in unlike]
    whole = [
        escape(f"{name}: left out of {', '.join(means)}: {'; '.join(why)}")
        for (name, why), means in left_out.items()
    ]
    note(f"Throughput relative to {baseline}, mean over the models each gpu and {baseline} both have")
    # 95% CI: the mean's; n: models averaged
    head = (escape("category, precision, GPUs / gpu [source]"), "mean", "geo", "95% CI", "n")
    print_table(head, sections, notes, whole, marked=3)
    if others:
        where = f" in {out}" if out else ""
        note(
            f"{len(others)} more gpu(s) left out of this table ({', '.join(others)}): every one is in "
            f"summary.csv, report.md and the charts{where}; gpus=[...] picks the gpus to compare"
        )


WIDE = 100  # an interval whose ends are further apart says nothing a column can show


def interval_text(interval: tuple[float, float] | None) -> str:
    """A 95% interval in a console column, `0.98-1.05=` (`=`: it holds 1.0), `too wide` (its ends
    over WIDE-fold apart: two repeats that disagree give 2.3e-10-3120414673343.25), or `none`."""
    if interval is None:
        return "none"
    low, high = interval
    text = "too wide" if high > WIDE * low else f"{console_ratio(low)[:-1]}-{console_ratio(high)[:-1]}"
    return text + ("=" if holds_one(interval) else "")


def print_table(
    head: tuple[str, ...], sections: dict, notes=(), whole=(), marked: int | None = None, **options
) -> None:
    """A table for an 80-column terminal or a piped log: names (never wrapped), then right-aligned figures.
    `sections`: a heading's cells (markup; none: no heading row) -> its rows. Under it: what `=` means
    where column `marked` holds interval_text's mark, then `notes` and `whole` (never wrapped) lines."""
    from rich import box
    from rich.table import Table

    from src.console import console

    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1), **options)
    for n, header in enumerate(head):
        table.add_column(header, justify="right" if n else "left", no_wrap=True)
    for heading, rows in sections.items():
        if heading:  # cells it lacks are left blank
            table.add_row(f"[bold]{heading[0]}[/]", *heading[1:])
        for row in rows:
            table.add_row(*row)
    console.print(table)
    if marked is not None and any("=" in row[marked][-2:] for rows in sections.values() for row in rows):
        console.print("  = the interval holds 1.0: no measurable difference")
    for line in notes:
        console.print(f"  {line}")
    for line in whole:
        console.print(f"  {line}", soft_wrap=True)


def console_ratio(value: float) -> str:
    return f"{value:.2f}x" if value >= 0.1 else f"{value:.2g}x"  # a CPU against a GPU needs digits
