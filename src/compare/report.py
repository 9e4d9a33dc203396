"""A comparison written out, the only place that formats: every section is prose, tables and charts,
and any table is written three ways by the one renderer here: CSV, markdown in report.md, and a table
on the console (an 80-column terminal or a piped log).

A table is rows of cells by column name with its columns declared once. A cell is a figure, never
text made from one: a float, a count, a name, or a Ratio, which CSV writes as `name`, `name_low` and
`name_high` (its value and 95% interval) and report.md and the console as `1.10x [1.08-1.13]`, marked
`~1` where that interval holds 1.0. FORMATS is the one map of the columns written otherwise."""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass, field

from src.compare.ratio import Ratio
from src.console import gpus, number
from src.results.recorded import MFU, SHARES, THROTTLED_POWER_SHARE

WIDE = 100  # an interval whose ends are further apart than this says nothing a column can show
MARKS = {  # a mark a ratio's interval earns -> the line under a table that says what it means
    "~1": "~1: its 95% interval holds 1.0 (no measurable difference)",
    "too wide": "too wide: the interval's ends are over 100-fold apart (repeats that disagree; the CSV has both)",
}
HEADINGS = {  # column -> its heading in report.md and on the console, where not its own name
    "gpu_count": "GPUs",
    "n_runs": "runs",
    "n_models": "n",
    "differs": "*",
    "relative_mean": "mean [95% CI]",
    "relative": "ratio [95% CI]",
    "precision_group": "precision",
    "iso_ratio": "speed (iso-batch)",
    "max_ratio": "speed x capacity (max-batch)",
    "capacity_factor": "capacity factor",
}


def times(value):
    return f"{value:.2f}x" if value >= 0.1 else f"{value:.2g}x"  # a CPU against a GPU needs digits


def marks(interval):
    """The marks an interval earns, of MARKS: `~1` where it holds 1.0, `too wide` past WIDE-fold."""
    low, high = interval
    return [
        mark for mark, earned in zip(MARKS, (low <= 1.0 <= high, high > WIDE * low), strict=True) if earned
    ]


def ratio_text(value, interval=None):
    """`1.10x [1.08-1.13]`, `1.02x [0.98-1.06] ~1`, `0.85x [too wide]`; `1.10x` without an interval."""
    if not interval:
        return times(value)
    low, high = interval
    marked = marks(interval)
    ends = "too wide" if "too wide" in marked else f"{times(low)[:-1]}-{times(high)[:-1]}"
    return f"{times(value)} [{ends}]" + (" ~1" if "~1" in marked else "")


def percent(value):
    return f"{value:.0%}"


FORMATS = {  # column -> how report.md and the console write it
    "gpu_count": gpus,
    "stated": times,
    "differs": lambda differs: "*" if differs else "",
    **dict.fromkeys(("scaling_efficiency", MFU, "share_of_ceiling", THROTTLED_POWER_SHARE), percent),
    **{f"{share}_share": percent for share in SHARES},
}


def ratio_columns(name):
    """A Ratio's columns in a CSV: its value and its interval's ends."""
    return (name, f"{name}_low", f"{name}_high")


@dataclass
class Table:
    rows: list[dict]  # a row's cells by column name
    columns: tuple[str, ...]  # every column, in the CSV's order
    file: str = ""  # the CSV it is written to; '' for none
    shown: tuple[str, ...] = ()  # report.md's columns; () for none
    printed: tuple[str, ...] = ()  # the console's; the first `heads` of them head its sections
    heads: int = 0
    title: str = ""  # above it in report.md and on the console
    read: list[dict] | None = None  # the rows report.md and the console show; None: every row (the CSV's)
    notes: list[str] = field(default_factory=list)  # under it in report.md and on the console


@dataclass
class Section:
    heading: str  # report.md's `## heading`
    lines: list[str] = field(default_factory=list)  # its prose in report.md, above its tables
    tables: list[Table] = field(default_factory=list)
    said: list[str] = field(default_factory=list)  # printed on the console after its tables
    warnings: list[str] = field(default_factory=list)  # printed on the console first, as warnings
    draw: Callable | None = None  # its charts: draw(new) -> the files, new(name) giving each its path


def cell(row, column):
    """A row's figure in a column; `name_low` and `name_high` are the interval ends of a Ratio `name`."""
    name, _, end = column.rpartition("_")
    if end in ("low", "high") and isinstance(row.get(name), Ratio):
        interval = row[name].interval
        return interval and interval[end == "high"]
    value = row.get(column)
    return value.value if isinstance(value, Ratio) else value


def text(column, value):
    """A cell as report.md and the console write it."""
    if value is None or value == "":
        return ""
    if column in FORMATS:
        return FORMATS[column](value)
    if isinstance(value, Ratio):
        return ratio_text(value.value, value.interval)
    return number(value) if isinstance(value, float) else str(value)


def _texts(table, columns):
    """Each row's cells as written, and the lines under it: its notes, what the marks its ratios earn mean."""
    shown = table.rows if table.read is None else table.read
    ratios = [
        v.interval for row in shown for c in columns if isinstance(v := row.get(c), Ratio) and v.interval
    ]
    earned = {mark for interval in ratios for mark in marks(interval)}
    rows = [[text(c, row.get(c)) for c in columns] for row in shown]
    return rows, table.notes + [said for mark, said in MARKS.items() if mark in earned]


def markdown(table):
    rows, notes = _texts(table, table.shown)
    lines = [table.title, ""] if table.title else []
    lines += [
        "| " + " | ".join(HEADINGS.get(c, c) for c in table.shown) + " |",
        "|" + "---|" * len(table.shown),
    ]
    lines += ["| " + " | ".join(t.replace("|", "/") for t in row) + " |" for row in rows]
    return lines + ["", *(f"- {line}" for line in notes)] if notes else lines


def show(table):
    """The table on the console: names never wrapped, figures right-aligned, a bold heading row where
    the first `heads` columns change."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table as Grid

    from src.console import console

    rows, notes = _texts(table, table.printed)
    if not rows:
        return
    grid = Grid(box=box.SIMPLE_HEAD, padding=(0, 1))
    for column in table.printed[table.heads :]:
        figures = all(isinstance(row.get(column), (int, float, Ratio, type(None))) for row in table.rows)
        grid.add_column(
            escape(HEADINGS.get(column, column)), justify="right" if figures else "left", no_wrap=True
        )
    heading = None
    for row in rows:
        head, cells = ", ".join(filter(None, row[: table.heads])), [escape(t) for t in row[table.heads :]]
        if head and head != heading:
            grid.add_row(f"[bold]{escape(head)}[/]")
            heading = head
        grid.add_row(("  " if head else "") + cells[0], *cells[1:])
    if table.title:
        console.print(escape(table.title))
    console.print(grid)
    for line in notes:
        console.print(f"  {escape(line)}")


def write(sections, title, facts, new, charts):
    """Every section's CSVs and (`charts`) its charts, each file made by `new(name)`, and report.md of
    them in order; returns report.md's text."""
    lines = [f"# {title}", "", *[f"- {fact}" for fact in facts]]
    for section in sections:
        blocks = [section.lines]
        for table in section.tables:
            if table.file:
                with open(new(table.file), "w", newline="") as handle:
                    writer = csv.writer(handle)
                    writer.writerow(table.columns)
                    for values in ([cell(row, c) for c in table.columns] for row in table.rows):
                        writer.writerow(
                            "" if v is None else f"{v:.6g}" if isinstance(v, float) else v for v in values
                        )
            blocks.append(markdown(table) if table.shown else [])
        blocks.append(
            [
                f"![{path.stem}]({path.name})"
                for path in (section.draw(new) if charts and section.draw else [])
            ]
        )
        lines += ["", f"## {section.heading}"]
        for block in filter(None, blocks):
            lines += ["", *block]
    text = "\n".join(lines) + "\n"
    new("report.md").write_text(text)
    return text
