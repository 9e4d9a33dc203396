"""The explanation's charts: where each point's step time went, and its TFLOP/s against its card's ceilings."""

from __future__ import annotations

import math
import textwrap
from operator import attrgetter
from pathlib import Path

from src.compare import style
from src.compare.explain import SHARE_TITLES, SHARES, Explanation, Placement

LABEL_CHARS = 60  # a point's label per line on the ceilings chart
PANEL_W_IN, PANEL_H_IN = 3.2, 3.4
TITLE_CHARS = int(0.85 * PANEL_W_IN * 72 / (9 * style.CHAR_EM))  # a panel title's line: 9 pt, the axis beside
# one fixed colour per share, apart from the gpu colours: a share reads the same in every panel
SHARE_COLOURS = {
    "matmul": "#2b6cb0",
    "other": "#9fc5e8",
    "comm": "#e69138",
    "memcpy": "#8e7cc3",
    "idle": "#cccccc",
}


def draw(explanation: Explanation, out: Path) -> list[Path]:
    return breakdown_chart(explanation.placements, out) + ceilings_chart(explanation.placements, out)


def breakdown_chart(placements: list[Placement], out: Path) -> list[Path]:
    """A panel per (model, precision, GPU count): per gpu, its stacked step-time shares and share of ceiling."""
    panels: dict[tuple, list[Placement]] = {}
    for p in sorted((p for p in placements if p.shares), key=lambda p: p.measurement.side):
        panels.setdefault(attrgetter("workload", "precision", "gpu_count")(p.measurement), []).append(p)
    if not panels:
        return []
    ncols = min(4, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    fig = style.figure(max(PANEL_W_IN * ncols, 6.0), PANEL_H_IN * nrows + 1.0)
    axes = fig.subplots(nrows, ncols, squeeze=False, sharey=True).ravel()
    for ax, ((workload, precision, count), points) in zip(axes, sorted(panels.items()), strict=False):
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
        title = textwrap.fill(f"{workload} {precision} x{count}", TITLE_CHARS)
        ax.set_title(title, fontsize="small", loc="left")
        ax.grid(axis="y", alpha=0.3)
    for ax in axes[len(panels) :]:
        ax.set_visible(False)
    what = "Where the step time goes (profiled after the measured window)"
    handles, columns = axes[0].get_legend_handles_labels()[0], 3 if ncols < 3 else len(SHARES)
    return [style.save(fig, out / "step_breakdown", what, "", handles, below=columns)]


def ceilings_chart(placements: list[Placement], out: Path) -> list[Path]:
    """A bar per point of its achieved TFLOP/s per GPU, with its card's measured ceiling (black) and
    spec-sheet peak (grey) for the math that ran, on a log axis (strict fp32 and bf16 differ 15x)."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    points = sorted(
        (p for p in placements if p.achieved_tflops),
        key=lambda p: attrgetter("model", "precision", "gpu_count", "side")(p.measurement),
    )
    if not points:
        return []
    labels = [  # a point's variant can name its card and settings: wrapped, never wider than the chart
        textwrap.fill(f"{m.side} x{m.gpu_count} {m.workload} {m.precision}", LABEL_CHARS)
        for m in (p.measurement for p in points)
    ]
    row_in = max(0.3, 0.16 * max(label.count("\n") + 1 for label in labels))
    fig = style.figure(9, 1.4 + row_in * len(points))
    ax = fig.subplots()
    y, achieved = range(len(points)), [p.achieved_tflops for p in points]
    bars = ax.barh(y, achieved, color=[style.gpu_colour(p.measurement.side) for p in points])
    marks = {  # the spec sheet the run logged; the measured ceiling drawn over it
        "spec-sheet peak": ([p.measurement.spec.peak_tflops for p in points], "grey"),
        "measured ceiling (model=ceilings)": ([p.ceiling_tflops for p in points], "black"),
    }
    for label, (values, colour) in marks.items():
        at = [v or math.nan for v in values]  # nan: no mark
        ax.plot(at, y, "|", markersize=14, markeredgewidth=2, color=colour, label=label)
    shares = [f"{p.share_of_ceiling:.0%} of ceiling" if p.share_of_ceiling else "no ceiling" for p in points]
    ax.bar_label(bars, [f" {a:,.3g} ({s})" for a, s in zip(achieved, shares, strict=True)], size="x-small")
    ax.set_yticks(y, labels, fontsize="small")
    ax.invert_yaxis()
    ax.set_xscale("log")
    ends = [v for values, _ in marks.values() for v in values + achieved if v]
    ax.set_xlim(min(ends) / 2, max(ends) * 3)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("TFLOP/s per GPU (log scale)")
    ax.grid(axis="x", alpha=0.3, which="both")
    what = "Achieved TFLOP/s against each card's ceilings, for the math that ran"
    handles = ax.get_legend_handles_labels()[0][::-1]  # the measured ceiling first
    return [style.save(fig, out / "ceilings", what, "", handles, below=2)]
