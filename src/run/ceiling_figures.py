"""The job process's side of model=ceilings (each rank measures in src/rank/ceiling_probes.py):
combine the ranks' figures, log them, say them.

Each figure is logged as `ceiling_<name>` (the mean over ranks of each rank's median sample) and
`ceiling_<name>_ci95_rel` (the widest of the ranks' 95% CIs); `ceilings.csv` holds every rank's
figure with its range, sample count and shape. docs/metrics.md says what each one is.
"""

from __future__ import annotations

import csv
import io
import statistics

from src import console
from src.results import recorded
from src.results.reports import CeilingsReport
from src.run.outcome import JobOutcome
from src.run.phases import rank_marks

COLUMNS = (
    "figure",
    "rank",
    "value",
    "min",
    "max",
    "ci95_rel",
    "samples",
    "shape",
    "bytes",
    "skipped_shapes",
    "seconds",
)
SCREEN_COLUMNS = ("figure", "rank", "m", "n", "k", "tflops")


def combine(ranks: list[CeilingsReport]) -> JobOutcome:
    """The job's outcome, as a training job's, with the card's figures and no throughput."""
    ranks = sorted(ranks, key=lambda r: r.rank)
    names = [n for n in ranks[0].figures if all(n in r.figures for r in ranks)]
    values, ci, shapes = {}, {}, {}
    for name in names:
        found = [r.figures[name] for r in ranks]
        values[name] = statistics.fmean(f["value"] for f in found)
        ci[name] = max(f["ci95_rel"] for f in found)
        if "shape" in found[0]:  # rank 0's best shape
            shapes[name] = tuple(int(size) for size in found[0]["shape"].split("x"))
    figures = recorded.CeilingFigures.named(values, ci, shapes)
    window = (min(r.window_start for r in ranks), max(r.window_end for r in ranks))
    return JobOutcome(
        measured=recorded.Window(measured_window_s=window[1] - window[0]),
        ceilings=figures,
        step_times_s=[],
        window=window,
        marks=rank_marks(ranks),
        all_finite=True,
        stop_reason="complete",
        precision_math={},
        device_name=ranks[0].device_name,
        runtime_versions=ranks[0].runtime_versions,
        world_size=len(ranks),
        ceilings_table=_table(ranks, names),
        matmul_screen=_screen_table(ranks),
        communication=ranks[0].communication,
    )


def _table(ranks: list[CeilingsReport], names: list[str]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(COLUMNS)
    for name in names:
        for r in ranks:
            f = r.figures[name]
            row = [name, r.rank, *(f"{f[k]:.6g}" for k in ("value", "min", "max", "ci95_rel")), f["samples"]]
            seconds = f"{f['seconds']:.2f}" if "seconds" in f else ""
            writer.writerow(row + [f.get("shape", ""), f.get("bytes", ""), f.get("skipped", ""), seconds])
    return out.getvalue()


def _screen_table(ranks: list[CeilingsReport]) -> str:
    """Every shape each rank screened, with its rate: what the best shape was chosen from."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(SCREEN_COLUMNS)
    for r in ranks:
        for name, f in r.figures.items():
            for m, n, k, tflops in f.get("screen", []):
                writer.writerow([name, r.rank, m, n, k, f"{tflops:.6g}"])
    return out.getvalue()


def log(run, outcome: JobOutcome, metrics: dict) -> dict:
    """Log the figures and the table and close the run FINISHED; returns the figures."""
    run.log_metrics(metrics)
    run.set_tags({recorded.UNIT: "TFLOP/s", recorded.STOP_REASON: outcome.stop_reason})
    run.log_files({"ceilings.csv": outcome.ceilings_table, "matmul_screen.csv": outcome.matmul_screen})
    run.end("FINISHED")
    return metrics


def result_line(name: str, figures: recorded.CeilingFigures) -> None:
    """One line with the headline figures, unwrapped (grep-able in a piped log)."""
    console.console.print(f"[green]done[/] {name}: {summary(figures)}", soft_wrap=True)


def summary(figures: recorded.CeilingFigures) -> str:
    """`bf16 760 TFLOP/s +/-0.4% at 4096x4096x8192; ... memory copy 4,240 GB/s ...`: the
    headline figures (the all-reduce at its best message size)."""
    headline = {recorded.matmul_figure(m): v for m, v in figures.matmul_tflops.items()}
    headline |= {name: getattr(figures, name) for name in recorded.CEILING_FIGURES}
    parts = []
    for name, value in headline.items():
        if value is None:
            continue
        math_ = recorded.matmul_math(name)
        label, unit = (math_, "TFLOP/s") if math_ else (name.removesuffix("_gbs").replace("_", " "), "GB/s")
        ci = figures.ci95_rel.get(name)
        spread = f" +/-{ci:.1%}" if ci is not None and ci == ci and ci != float("inf") else ""
        shape = figures.matmul_shape.get(math_)
        at = " at " + "x".join(f"{d:g}" for d in shape) if shape else ""
        parts.append(f"{label} {value:,.4g} {unit}{spread}{at}")
    return "; ".join(parts)
