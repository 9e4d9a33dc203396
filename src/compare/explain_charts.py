"""The explanation's charts: where each point's step time went (stacked bars, one per gpu, one panel
per model, precision and GPU count) and every point's achieved TFLOP/s against its card's measured
ceiling and spec-sheet peak. Kept apart from charts.py's relative-throughput charts; it takes
style.py's gpu colours, so a gpu looks the same in every chart."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

from src.compare import style
from src.compare.explain import SHARE_TITLES, SHARES, Explanation, Placement

BREAKDOWN_PNG = "step_breakdown.png"
CEILINGS_PNG = "ceilings.png"
LABEL_CHARS = 60  # a point's label per line on the ceilings chart
PANEL_W_IN, PANEL_H_IN = 3.2, 3.4
TITLE_CHARS = int(0.85 * PANEL_W_IN * 72 / (9 * style.CHAR_EM))  # a panel's title per line (9 pt; the axis takes the rest)
# one fixed colour per share, apart from the gpu colours: a share reads the same in every panel
SHARE_COLOURS = {
    "matmul": "#2b6cb0",
    "other": "#9fc5e8",
    "comm": "#e69138",
    "memcpy": "#8e7cc3",
    "idle": "#cccccc",
}


def draw(explanation: Explanation, out: Path) -> list[Path]:
    drawn = [breakdown_chart(explanation.placements, out / BREAKDOWN_PNG)]
    drawn.append(ceilings_chart(explanation.placements, out / CEILINGS_PNG))
    return [p for p in drawn if p is not None]


def breakdown_chart(placements: list[Placement], path: Path) -> Path | None:
    """A panel per (model, precision, GPU count): one stacked bar per gpu of its step-time shares,
    its share of ceiling written above it."""
    from matplotlib.figure import Figure

    panels: dict[tuple, list[Placement]] = {}
    for p in placements:
        if p.shares:
            m = p.measurement
            panels.setdefault((m.workload, m.precision, m.gpu_count), []).append(p)
    if not panels:
        return None
    ncols = min(4, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    fig = Figure(figsize=(max(PANEL_W_IN * ncols, 6.0), PANEL_H_IN * nrows + 1.0), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False, sharey=True).ravel()
    for ax, ((workload, precision, count), points) in zip(axes, sorted(panels.items()), strict=False):
        points = sorted(points, key=lambda p: p.measurement.side)
        bottom = [0.0] * len(points)
        for share in SHARES:
            values = [p.shares.get(share) or 0.0 for p in points]
            ax.bar(range(len(points)), values, bottom=bottom, color=SHARE_COLOURS[share], width=0.6,
                   label=SHARE_TITLES[share], edgecolor="white", linewidth=0.5)  # fmt: skip
            bottom = [b + v for b, v in zip(bottom, values, strict=True)]
        for i, p in enumerate(points):
            used = f"{p.share_of_ceiling:.0%} of\n{p.math} ceiling" if p.share_of_ceiling else "no ceiling"
            ax.text(i, 1.02, used, ha="center", va="bottom", fontsize="x-small")
        # a by= side (torch=2.12.0) on two lines: two bars' labels side by side fit the panel
        sides = [p.measurement.side.replace("=", "=\n") for p in points]
        ax.set_xticks(range(len(points)), sides, fontsize="small")
        ax.set_ylim(0, 1.22)
        ax.set_yticks([0, 0.25, 0.5, 0.75, 1.0], ["0", "25%", "50%", "75%", "100%"])
        ax.set_title(textwrap.fill(f"{workload} {precision} x{count}", TITLE_CHARS), fontsize="small", loc="left")
        ax.grid(axis="y", alpha=0.3)
    for ax in axes[len(panels) :]:
        ax.set_visible(False)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(
        handles, labels, loc="outside lower center", ncols=3 if ncols < 3 else len(SHARES), fontsize="small"
    )
    fig.suptitle("Where the step time goes (profiled after the measured window)", fontsize="medium")
    fig.savefig(path, dpi=style.DPI)
    return path


def ceilings_chart(placements: list[Placement], path: Path) -> Path | None:
    """A bar per point of its achieved TFLOP/s per GPU, with its card's measured ceiling (black) and
    spec-sheet peak (grey) for the math that ran, on a log axis (strict fp32 and bf16 differ 15x)."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter, NullFormatter

    points = [p for p in placements if p.achieved_tflops]
    if not points:
        return None
    points.sort(
        key=lambda p: (
            p.measurement.model,
            p.measurement.precision,
            p.measurement.gpu_count,
            p.measurement.side,
        )
    )
    labels = [  # a point's variant can name its card and settings: wrapped, never wider than the chart
        textwrap.fill(
            f"{p.measurement.side} x{p.measurement.gpu_count} {p.measurement.workload} {p.measurement.precision}",
            LABEL_CHARS,
        )
        for p in points
    ]
    row_in = max(0.3, 0.16 * max(label.count("\n") + 1 for label in labels))
    fig = Figure(figsize=(9, 1.4 + row_in * len(points)), layout="constrained")
    ax = fig.subplots()
    y = range(len(points))
    ax.barh(
        y, [p.achieved_tflops for p in points], color=[style.gpu_colour(p.measurement.side) for p in points]
    )
    peaks = [p.measurement.spec.peak_tflops for p in points]  # the spec sheet the run logged
    for i, (p, peak) in enumerate(zip(points, peaks, strict=True)):
        if peak:
            ax.plot([peak], [i], marker="|", markersize=14, color="grey", markeredgewidth=2)
        if p.ceiling_tflops:
            ax.plot([p.ceiling_tflops], [i], marker="|", markersize=14, color="black", markeredgewidth=2)
        label = f" {p.achieved_tflops:,.3g}" + (
            f" ({p.share_of_ceiling:.0%} of ceiling)" if p.share_of_ceiling else " (no ceiling)"
        )
        ax.text(p.achieved_tflops, i, label, va="center", fontsize="x-small")
    ax.set_yticks(list(y), labels, fontsize="small")
    ax.invert_yaxis()
    ax.set_xscale("log")
    ends = [
        v
        for p, peak in zip(points, peaks, strict=True)
        for v in (p.achieved_tflops, p.ceiling_tflops, peak)
        if v
    ]
    ax.set_xlim(min(ends) / 2, max(ends) * 3)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("TFLOP/s per GPU (log scale)")
    ax.grid(axis="x", alpha=0.3, which="both")
    marks = [Line2D([], [], color="black", marker="|", linestyle="", markersize=12, label="measured ceiling (model=ceilings)"),
             Line2D([], [], color="grey", marker="|", linestyle="", markersize=12, label="spec-sheet peak")]  # fmt: skip
    fig.legend(handles=marks, loc="outside lower center", ncols=2, fontsize="x-small")
    style.title(fig, "Achieved TFLOP/s against each card's ceilings, for the math that ran")
    fig.savefig(path, dpi=style.DPI)
    return path
