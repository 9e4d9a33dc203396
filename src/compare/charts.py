"""A comparison's charts, each drawn for a question a reader asks: how much faster per model and per
category, with 95% intervals (the baseline is the line at 1.0, never a bar; a figure the published
study states otherwise is marked); speed against capacity; where each point's step time goes, beside
its card's ceilings. A gpu has one colour in every chart (its profile's, else its name's hash's), a
published figure is hatched and a projected one dotted, a title is one line, and each bar's label
sits in a column at its panel's right edge: past every whisker, inside the panel. On matplotlib's
Figure directly (no pyplot): no global state, no display needed. `new(name)` gives each file's path."""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from itertools import pairwise

import numpy

from src.compare.ratio import Ratio
from src.compare.report import ratio_text
from src.compare.runs import MEASURED, grouped
from src.console import gpus
from src.results.recorded import PROJECTED, SHARES

PROFILE_COLOURS = {  # the gpu profiles (conf/gpu/) keep their colours whatever else a comparison holds
    "rtx3090": "tab:blue",
    "a6000": "tab:orange",
    "a100": "tab:green",
    "h100": "tab:red",
    "h200": "tab:purple",
    "cpu": "tab:gray",
}
HATCHES = {MEASURED: "", PROJECTED: "..."}  # any other source is a publisher's: "///"
SHARE_COLOURS = {
    "matmul": "#2b6cb0",
    "other": "#9fc5e8",
    "comm": "#e69138",
    "memcpy": "#8e7cc3",
    "idle": "#ccc",
}
PANEL_IN, BAR_IN, PAGE_IN = 4.6, 0.26, 18.0  # widths and heights, in inches
CHAR_IN = 0.62 * 8.3 / 72  # one character of a label ("small": 8.3 pt DejaVu Sans, names and digits)


def colours(gpus):
    """One colour per gpu, none shared: the profile's, else the first free one from its name's hash
    (crc32: the same in every process) on, taken in name order: the same gpus, the same colours."""
    from matplotlib import colormaps

    palette = [colormaps[name](i) for name in ("tab20b", "tab20c") for i in range(20) if i % 4 != 3]
    chosen: dict[str, object] = {}
    for gpu in sorted(set(gpus)):
        start = zlib.crc32(gpu.encode()) % len(palette)
        ring = palette[start:] + palette[:start]
        chosen[gpu] = PROFILE_COLOURS.get(gpu) or next((c for c in ring if c not in chosen.values()), ring[0])
    return chosen


def pages(heights, budget_in=PAGE_IN):
    """Consecutive panels, each page at most `budget_in` tall (a taller panel alone)."""
    starts, used = [], 0.0
    for i, height in enumerate(heights):
        if not starts or used + height > budget_in:
            starts.append(i)
            used = 0.0
        used += height
    return [range(a, b) for a, b in pairwise([*starts, len(heights)])]


def figure(labels, rows, width_in=PANEL_IN):
    """A figure of one axes `width_in` wide, room on its left for the longest of `labels`, a row for
    each of `rows`, and room for the title above and the axis label and legend below: laid out once,
    here (matplotlib's layout engines draw every chart twice)."""
    from matplotlib.figure import Figure

    left = max(map(len, labels)) * CHAR_IN + 0.2
    width, height = left + width_in + 0.3, rows * BAR_IN + 1.5
    fig = Figure(figsize=(width, height))
    return fig, fig.add_axes((left / width, 1.05 / height, width_in / width, 1 - 1.5 / height))


def save(fig, path, title, handles):
    """The chart titled in one line (in smaller type where the figure is narrow), its legend below the
    axes, written to `path`."""
    size = min(12, fig.get_figwidth() * 72 * 0.95 / (0.55 * len(title)))
    fig.suptitle(title, fontsize=size, x=0.01, y=1 - 0.12 / fig.get_figheight(), ha="left", va="top")
    if handles:
        fig.legend(
            handles=handles, fontsize="small", loc="lower center", ncols=min(len(handles), 5), frameon=False
        )
    fig.savefig(path, dpi=100)
    return path


def hatch(source):
    return HATCHES.get(source, "///")  # a publisher's figure


@dataclass(frozen=True)
class Bar:
    side: str  # the gpu, or with by=KEY `KEY=value`; or what a bar of the capacity split is
    precision: str
    source: str
    ratio: Ratio
    flags: str = ""  # anomaly kinds and ratio flags of the figure, said beside its ratio
    stated: float | None = None  # the publication's figure, where the data gives another

    @property
    def label(self):
        return f"{self.side} {self.precision}" + (f" [{self.source}]" if self.source != MEASURED else "")

    @property
    def ends(self):
        """Its whisker's ends: its 95% interval, or its value at both ends where it has none."""
        return self.ratio.interval or (self.ratio.value, self.ratio.value)

    @property
    def text(self):
        said = ratio_text(self.ratio.value, self.ratio.interval)
        said += f", stated {self.stated:.2f}x" if self.stated else ""
        return said + (f"  ! {self.flags}" if self.flags else "")


def relative(items, baseline, title, stem, new):
    """(group, bar): a block of bars per group under its name in bold, on pages; each bar from 0 with
    its 95% interval as a whisker and its label past the longest whisker; the baseline is the line
    at 1.0."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    bars = [bar for _, bar in items]
    colour = colours(bar.side for bar in bars)
    room = min(0.6, (max(len(b.text) for b in bars) * CHAR_IN + 0.2) / PANEL_IN)  # of the axes: the labels
    end = max(max(*b.ends, 1.0) for b in bars) * 1.05 / (1 - room)
    sources = sorted({b.source for b in bars} - {MEASURED})
    handles = [Patch(fc="lightgrey", hatch=hatch(s), label=f"{s} figure") for s in sources]
    if any(b.stated for b in bars):
        handles.append(
            Line2D([], [], color="black", marker="D", linestyle="", label="stated by the publication")
        )
    # (label, bar) rows: a block per group, its name in bold (no bar), then its bars
    groups = grouped(sorted(items, key=lambda item: item[0]))
    blocks = [[(name, None), *((b.label, b) for b in group)] for name, group in groups.items()]
    found, paths = pages([BAR_IN * len(block) for block in blocks]), []
    for page, shown in enumerate(found, start=1):
        rows = [row for n in shown for row in blocks[n]]
        fig, ax = figure([b.label for b in bars], len(rows))
        ys, drawn = zip(*[(y, bar) for y, (_, bar) in enumerate(rows) if bar], strict=True)
        values = [b.ratio.value for b in drawn]
        whiskers = abs(numpy.transpose([b.ends for b in drawn]) - values)
        colour_of, hatches = [colour[b.side] for b in drawn], [hatch(b.source) for b in drawn]
        ax.barh(ys, values, xerr=whiskers, color=colour_of, hatch=hatches, edgecolor="white")
        ax.plot([b.stated or math.nan for b in drawn], ys, "D", color="black", markersize=5)
        for y, (label, bar) in enumerate(rows):
            said, place = (
                (bar.text, {"x": 0.99, "ha": "right"}) if bar else (label, {"x": 0.01, "weight": "bold"})
            )
            ax.text(y=y, s=said, transform=ax.get_yaxis_transform(), va="center", size="small", **place)
        ax.axvline(1.0, color="black", linewidth=1)
        ax.set(
            xlim=(0, end),
            ylim=(len(rows) - 0.5, -0.5),
            xlabel=f"throughput relative to {baseline}, the line at 1.0; whiskers: 95% interval",
        )
        ax.set_yticks(range(len(rows)), [label if bar else "" for label, bar in rows], fontsize="small")
        ax.grid(axis="x", alpha=0.3)
        numbered, name = (
            (f", page {page} of {len(found)}", f"{stem}_p{page}") if len(found) > 1 else ("", stem)
        )
        paths.append(save(fig, new(f"{name}.png"), title + numbered, handles))
    return paths


def per_model(rows, baseline, flagged, new):
    """A chart per GPU count: each model's ratios, the baseline's own left out (1.0 by definition)."""
    counts: dict[int, list[tuple[str, Bar]]] = {}
    for r in rows:
        m = r.measurement
        if r.ratio and m.side != baseline:
            flags = " ".join(dict.fromkeys(flagged.get(m.point, []) + r.flags))
            counts.setdefault(m.gpu_count, []).append(
                (m.workload, Bar(m.side, m.precision, m.source, r, flags))
            )
    title = f"Training throughput relative to {baseline}, per model on "
    return [
        path
        for count, items in sorted(counts.items())
        for path in relative(items, baseline, title + gpus(count), f"relative_by_model_x{count}", new)
    ]


def category(summary, baseline, stated, new):
    """The category means; one the publication states otherwise marked with the stated figure
    (`stated`: (category, precision, GPU count, gpu, source) -> the figure)."""
    items = []
    for s in (s for s in summary if s["gpu"] != baseline):
        key = tuple(s[k] for k in ("category", "precision", "gpu_count", "gpu", "source"))
        bar = Bar(s["gpu"], s["precision"], s["source"], s["relative_mean"], s["flags"], stated.get(key))
        items.append((f"{s['category']}, {gpus(s['gpu_count'])}", bar))
    title = (
        f"Training throughput relative to {baseline}, mean over the models each gpu and {baseline} both have"
    )
    return relative(items, baseline, title, "relative_by_category", new) if items else []


def capacity(rows, new):
    """Per model: its iso-batch and max-batch ratios, whiskers their 95% intervals, and the published
    ratio of the profiles whose memory each card has (max-batch, as published)."""
    items = []
    for r in rows:
        found = [("iso-batch", MEASURED, r["iso_ratio"]), ("max-batch", MEASURED, r["max_ratio"])]
        found.append(("max-batch", "published", r["published_ratio"] and Ratio(r["published_ratio"], None)))
        panel = f"{r['model']}, {gpus(r['gpu_count'])}"
        items += [(panel, Bar(side, r["precision"], source, ratio)) for side, source, ratio in found if ratio]
    title = f"Speed and capacity: {rows[0]['card']} against {rows[0]['baseline_card']}"
    return relative(items, rows[0]["baseline_card"], title, "capacity_split", new) if items else []


def breakdown(placements, new):
    """Per measured point: where its step time went (profiled after the measured window), and beside
    it its achieved TFLOP/s per GPU against its card's measured ceiling for the math that ran."""
    shown = sorted(
        (p for p in placements if p.point.shares),
        key=lambda p: (p.point.workload, p.point.precision, p.point.gpu_count, p.point.side),
    )
    if not shown:
        return []
    labels = [f"{p.point.side} x{p.point.gpu_count} {p.point.workload} {p.point.precision}" for p in shown]
    fig, ax = figure(labels, len(shown), PANEL_IN * 1.6)
    left = numpy.zeros(len(shown))
    for share in SHARES:
        values = [p.point.shares[share] for p in shown]
        ax.barh(labels, values, left=left, color=SHARE_COLOURS[share], edgecolor="white", label=share)
        left += values
    for n, p in enumerate(shown):
        said = f"{p.point.achieved_tflops_per_gpu or 0:,.3g} TFLOP/s, "
        said += (
            f"{p.share_of_ceiling:.0%} of its {p.math} ceiling"
            if p.share_of_ceiling
            else "no measured ceiling"
        )
        ax.text(1.02, n, said, va="center", size="small")
    ax.set(
        xlim=(0, 1.6),
        ylim=(len(shown) - 0.5, -0.5),
        xticks=[0, 0.25, 0.5, 0.75, 1],
        xlabel="share of the step time",
    )
    ax.tick_params(axis="y", labelsize="small")  # the size figure() leaves room for
    title = "Where each point's step time goes, and its TFLOP/s against its card's measured ceiling"
    return [save(fig, new("ceilings_and_step_time.png"), title, ax.get_legend_handles_labels()[0])]
