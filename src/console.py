"""What a person watching a sweep sees: live progress per job, a result line, a summary table."""

from __future__ import annotations

import json
import textwrap
import threading
from pathlib import Path

from rich.console import Console, ConsoleDimensions
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from src.results import recorded
from src.results.stats import rule_missed

PIPED_WIDTH = 10_000  # a pipe or file has no width: lines stay whole for grep


class _Console(Console):
    """Wraps at the terminal's width only when it writes to that terminal: rich takes the width of
    any terminal among stdin, stdout and stderr, so `... > log` in a terminal was cut at 80."""

    @property
    def size(self) -> ConsoleDimensions:
        size = Console.size.fget(self)
        return size if self.is_terminal else ConsoleDimensions(PIPED_WIDTH, size.height)

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)


console = _Console(highlight=False)
_said: set[str] = set()  # run names whose skip reason this process printed: the summary says it once


class JobProgress:
    """Follows rank 0's progress file from a thread while the ranks run."""

    interval_s = 0.5  # between two reads of the file

    def __init__(self, title: str, progress_file: Path, unit: str, job_id: str | None = None):
        self.title, self.path, self.unit, self.job_id = title, progress_file, unit, job_id
        self._stop = threading.Event()
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[status]}"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self._task = self._progress.add_task(title, total=None, status="starting ranks")

    def __enter__(self):
        self._progress.start()
        self._thread = threading.Thread(target=self._follow, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self._progress.stop()

    def _follow(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                state = json.loads(self.path.read_text())
            except (OSError, ValueError):
                continue
            if state.get("job_id") != self.job_id:  # another job's ranks: not this job's progress
                continue
            if state["phase"] == "warmup":
                status = f"warm-up {state['step']}/{state['of']}"
                self._progress.update(self._task, total=state["of"], completed=state["step"], status=status)
            else:
                status = (
                    f"measuring step {state['step']}: {state['items_per_s']:,.1f} {self.unit}"
                    f" (CI +/-{100 * state['ci']:.1f}%)"
                )
                self._progress.update(self._task, total=None, status=status)


def result_line(
    name: str,
    metrics: dict,
    unit: str,
    stop_reason: str = "ci",
    target_ci: float = 0.0,
    spooled: Path | None = None,
    min_steps: int = 0,
    shared: str = "",
) -> None:
    """The job's figure; one that stopped (max_steps, time_limit) before target_ci, or short of
    min_steps, says so, one measured while another program used its GPU says which (`shared`), and
    one the store could not take says where it waits (`spooled`: its folder)."""
    steps, ci = metrics.get(recorded.MEASURED_STEPS), metrics.get(recorded.STEP_TIME_CI95_REL)
    missed = rule_missed(stop_reason, steps, min_steps, ci, target_ci)
    missed = f"; [yellow]stopped at {missed}[/]" if missed else ""
    waiting = (
        f"; [yellow]spooled[/]: not in the store yet, kept in {escape(str(spooled))}; "
        "`python -m src.sync` delivers it"
        if spooled
        else ""
    )
    busy = f"; [yellow]GPU shared[/] with {escape(shared)}" if shared else ""
    console.print(
        f"[green]done[/] {name}: [bold]{metrics[recorded.THROUGHPUT]:,.1f} {unit}[/] "
        f"(step {metrics[recorded.STEP_TIME_MS]:.1f} ms median, p10-p90 {metrics[recorded.STEP_TIME_P10_MS]:.1f}-"
        f"{metrics[recorded.STEP_TIME_P90_MS]:.1f} ms, {steps} steps{missed}){busy}{waiting}"
    )


def failure_line(name: str, reason: str) -> None:
    console.print(f"[red]FAILED[/] {name}: {escape(reason)}")  # free text: "[/path:545]" is no markup


def summary_table(rows: list[dict]) -> None:
    """One row per point, fitting an 80-column terminal or log: each named by its own point (run
    name, then what tells it from rows of the same name), the run name kept whole (a reader
    searches for it); a short flag where its figure needs one. Why a job failed or was skipped and what each flag
    means follow the table, one line each, unless this process printed that skip already."""
    from rich import box

    names = [escape(" ".join(filter(None, (row["name"], row.get("variant"))))) for row in rows]
    table = Table(
        title="Sweep summary",
        box=box.SIMPLE_HEAD,
        title_justify="left",
        pad_edge=False,
        collapse_padding=True,
    )
    # a run name holds no space: only the variant after it wraps, onto the next line
    table.add_column("run", min_width=max((len(row["name"]) for row in rows), default=3))
    table.add_column("status", no_wrap=True)
    table.add_column(recorded.THROUGHPUT, justify="right", no_wrap=True)
    table.add_column("unit", no_wrap=True)
    table.add_column("step ms", justify="right", no_wrap=True)
    flagged = any(row.get("flags") for row in rows)
    if flagged:
        table.add_column("flags", min_width=len("shared"))
    for name, row in zip(names, rows, strict=True):
        throughput = row.get(recorded.THROUGHPUT)
        step = row.get(recorded.STEP_TIME_MS)
        cells = [
            name,
            row["status"],
            f"{throughput:,.1f}" if throughput is not None else "-",
            row.get("unit", ""),
            f"{step:.1f}" if step is not None else "-",
        ]
        table.add_row(*cells, *(["\n".join(row.get("flags", {}))] if flagged else []))
    console.print(table)
    for name, row in zip(names, rows, strict=True):
        if row.get("error") and not (row["status"] == "SKIPPED" and row["name"] in _said):
            console.print(f"  {name}: {escape(row['error'])}")
        for meaning in row.get("flags", {}).values():
            console.print(f"  {name}: {escape(meaning)}")


def gpus(count: int) -> str:
    """'1 GPU', '8 GPUs': a gpu count as a heading says it."""
    return f"{count} GPU" + ("s" if count > 1 else "")


def number(value: float) -> str:
    """A figure for people: 14,495 and 513, three significant figures below 100 (85.0, 1.30, 0.347):
    ratios get three significant figures, and nothing reads like thousands."""
    return f"{value:,.0f}" if value >= 100 else f"{value:#.3g}"


def warning(message: str) -> None:
    """Something the user should know that does not stop the job."""
    console.print(f"[yellow]warning[/] {escape(message)}")


def note(message: str) -> None:
    console.print(escape(message))


def hanging_line(message: str, indent: int) -> None:
    """A long line: in a terminal, wrapped at its width between words (an address stays whole), each
    further line indented under its text; in a piped log, whole on one line for grep."""
    if console.is_terminal:
        # a word is never split, an option's or an address's hyphens included
        words = {"break_long_words": False, "break_on_hyphens": False}
        message = "\n".join(textwrap.wrap(message, console.width, subsequent_indent=" " * indent, **words))
    console.print(escape(message), soft_wrap=True)


def link_line(message: str) -> None:
    """A line holding an address or command: never broken, so it stays whole for copying."""
    console.print(escape(message), soft_wrap=True)


def skip_line(name: str, run_id: str, throughput: float | None, unit: str) -> None:
    figure = f"{throughput:,.1f} {unit}" if throughput is not None else "no throughput"
    _said.add(name)
    console.print(
        f"[cyan]skip[/] {name}: already FINISHED as run {run_id} ({figure}); "
        f"benchmark.rerun=true runs it again"
    )


def measure_line(name: str, why: str) -> None:
    """Why a point with a FINISHED run of its config is measured all the same (src/run/resume.py)."""
    console.print(f"[cyan]measure[/] {name}: {escape(why)}", soft_wrap=True)


def unavailable_line(name: str, shortfall: str) -> None:
    """One unwrapped line per point this host cannot run, grep-able in a piped log."""
    _said.add(name)
    console.print(f"[cyan]skipped[/] {name}: {escape(shortfall)}", soft_wrap=True)
