"""A comparison's PNG charts, laid out like Lambda's A6000 vs 3090 study, on matplotlib's Figure directly
(no pyplot): no global state, no display needed."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product
from pathlib import Path

from src import recorded
from src.compare import anomalies, style
from src.compare.analysis import RelativeRow, SummaryRow, precision_group
from src.compare.ratio import holds_one
from src.compare.runs import MEASURED, Measurement
from src.console import gpus, number
from src.hardware.devices import slug

PANEL_GROUPS = ("fp32", "mixed")  # fp32 and mixed precision side by side, as in the study
PANEL_TITLES = {"fp32": "fp32, tf32", "mixed": "amp, bf16"}  # short: a panel's title is never cut
BAR_IN = 0.26  # inches per bar
PANEL_PAD_IN = 0.9  # title and axis of one panel row
IMPOSSIBLE = {anomalies.OUTSIDE_SPEC, anomalies.SCALING_ABOVE_100}  # anomaly kinds no hardware can produce
RELATIVE_DETAIL = (
    "bars from 0 on one scale; whiskers: 95% interval, ~1: it holds 1.0 (no measurable difference); "
    "! marks a flagged figure (report.md says why)"
)
SCALING_PANEL_IN = 2.8
NO_SCALING = "no runs at several GPU counts"  # an empty scaling panel's text
DETAILS = {  # the second line of a per-model chart's title
    recorded.THROUGHPUT: "median of runs; whiskers: 95% interval (repeats; one run: within-run only; published: "
    "its runs' or none)",
    "efficiency": "per watt: measured power where telemetry logged it, else the spec sheet's TDP",
}
PRECISION_MARKERS = {"fp32": "o", "tf32": "s", "amp": "o", "bf16": "s"}


@dataclass(frozen=True)
class Bar:
    side: str  # the gpu, or with by=KEY `KEY=value`
    precision: str
    source: str
    value: float
    flags: str = ""  # anomaly kinds and ratio flags of the figure, shown beside its ratio
    interval: tuple[float, float] | None = None  # 95%, drawn as an error bar

    @property
    def label(self) -> str:
        return f"{self.side} {self.precision}" + (f" [{self.source}]" if self.source != MEASURED else "")

    @property
    def text(self) -> str:  # beside the bar
        ratio = f"{number(self.value)}x" + (style.HOLDS_ONE if holds_one(self.interval) else "")
        return ratio + (f"  ! {self.flags}" if self.flags else "")


def draw_all(
    rows: list[RelativeRow],
    summary: list[SummaryRow],
    measurements: list[Measurement],
    baseline: str,
    out: Path,
    flagged: dict[tuple, list[str]],
) -> list[Path]:
    """Every chart; `flagged` maps a point to its anomaly kinds, printed beside its bar."""
    style.use_colours([m.side for m in measurements])
    by_category = [
        (f"{s.category}, {gpus(s.gpu_count)}",
         Bar(s.side, s.precision, s.source, s.relative_mean, " ".join(s.flags), s.mean.interval))
        for s in summary
    ]  # fmt: skip
    what = "per category: the mean over the models the gpu and the baseline both have"
    paths = relative_bars(by_category, baseline, what, out / "relative_by_category")
    per_model: dict[int, list[tuple[str, Bar]]] = {}  # per GPU count
    for r, m in ((r, r.measurement) for r in rows if r.relative is not None):
        flags = " ".join(dict.fromkeys(flagged.get(m.point, []) + r.flags))
        bar = Bar(m.side, m.precision, m.source, r.relative, flags, r.interval)
        per_model.setdefault(m.gpu_count, []).append((m.workload, bar))
    for count, bars in sorted(per_model.items()):
        what = f"per model on {gpus(count)}"
        paths += relative_bars(bars, baseline, what, out / f"relative_by_model_x{count}")
    return paths + scaling_chart(measurements, out / "scaling") + per_model_charts(measurements, out, flagged)


def _panel_groups(present: set[str]) -> list[str]:
    return [g for g in PANEL_GROUPS if g in present] + sorted(present - set(PANEL_GROUPS))


def _pages(titles: list[str], groups: list[str], heights: list[float], width: float):
    """Per page: its figure, (page, pages) and its titled panels (panel, title, group), a row per title."""
    pages = style.pages(heights)
    for page, rows in enumerate(pages, start=1):
        fig = style.figure(width, sum(heights[i] for i in rows) + 1.0)
        grid = fig.subplots(len(rows), len(groups), squeeze=False, height_ratios=[heights[i] for i in rows])
        panels = [(ax, titles[i], g) for ax, (i, g) in zip(grid.flat, product(rows, groups), strict=True)]
        for ax, title, group in panels:
            ax.set_title(f"{title} · {PANEL_TITLES.get(group, group)}", fontsize="medium", loc="left")
        yield fig, (page, len(pages)), panels


def relative_bars(items: list[tuple[str, Bar]], baseline: str, what: str, stem: Path) -> list[Path]:
    """(title, bar) drawn as a row of panels per title, a column per precision group, in a stable order."""
    grouped: dict[str, dict[str, list[Bar]]] = {}
    for title, bar in sorted(items, key=lambda tb: (tb[0], tb[1].side, tb[1].precision, tb[1].source)):
        grouped.setdefault(title, {}).setdefault(precision_group(bar.precision), []).append(bar)
    groups = _panel_groups({group for panels in grouped.values() for group in panels})
    heights = [BAR_IN * max(len(grouped[t].get(g, [])) for g in groups) + PANEL_PAD_IN for t in grouped]
    every = [bar for _, bar in items]
    ends = [max(b.interval[1] if b.interval else b.value, 1.0) for b in every]
    end = style.axis_end(ends, [not IMPOSSIBLE.isdisjoint(b.flags.split()) for b in every])
    what = f"Training throughput relative to {baseline}, {what}"
    handles, paths = style.source_handles({b.source for b in every}), []
    for fig, page, panels in _pages(list(grouped), groups, heights, 6.2 * len(groups) + 1.6):
        for ax, title, group in panels:
            bars = grouped[title].get(group, [])
            texts, spans = [b.text for b in bars], [b.interval for b in bars]
            style.hbars(ax, [b.value for b in bars], texts, end, spans, points=bars)
            ax.set_yticks(range(len(bars)), [b.label for b in bars], fontsize="small")
            ax.axvline(1.0, color="black", linewidth=1, zorder=1.5)  # over the grid, under the labels
            if not bars:
                ax.text(0.5, 0.5, "no runs", transform=ax.transAxes, ha="center", va="center", color="grey")
            if ax.get_subplotspec().is_first_col():
                ax.set_ylabel("gpu, precision", fontsize="small")
            if ax.get_subplotspec().is_last_row():
                ax.set_xlabel(f"training throughput relative to {baseline} (= 1.0)")
        paths.append(style.save(fig, stem, what, RELATIVE_DETAIL, handles, page))
    return paths


def scaling_chart(measurements: list[Measurement], stem: Path) -> list[Path]:
    """Speed-up over the same gpu's 1-GPU point against GPU count: one row per model, one column
    per precision group, one legend for all; nothing when no gpu ran a model at several counts."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    found: dict[tuple, list[Measurement]] = {}  # (workload, precision group, gpu, precision, source, config)
    for m in sorted(measurements, key=lambda m: m.gpu_count):
        key = (m.workload, precision_group(m.precision), m.side, m.precision, m.source, m.config)
        found.setdefault(key, []).append(m)
    lines = {key: ms for key, ms in found.items() if len(ms) > 1 and ms[0].gpu_count == 1}
    if not lines:
        return []
    workloads = sorted({key[0] for key in lines})
    groups = _panel_groups({key[1] for key in lines})
    drawn = {key[2:5] for key in lines}  # (gpu, precision, source)
    handles = [Patch(color=style.gpu_colour(gpu), label=gpu) for gpu in sorted({gpu for gpu, _, _ in drawn})]
    precisions = sorted({p for _, p, _ in drawn})
    for marker in dict.fromkeys(PRECISION_MARKERS.get(p, "o") for p in precisions):
        label = ", ".join(p for p in precisions if PRECISION_MARKERS.get(p, "o") == marker)
        handles.append(Line2D([], [], color="black", marker=marker, linestyle="", label=label))
    for is_measured, linestyle, label in ((True, "-", "measured"), (False, ":", "published")):
        if any((source == MEASURED) == is_measured for _, _, source in drawn):
            handles.append(Line2D([], [], color="black", linestyle=linestyle, label=label))
    handles.append(Line2D([], [], color="grey", linestyle="--", label="linear"))
    what, paths = "Scaling: training throughput over the same gpu's 1-GPU figure", []
    heights = [SCALING_PANEL_IN] * len(workloads)
    for fig, page, panels in _pages(workloads, groups, heights, 4.6 * len(groups) + 2.4):
        for ax, workload, group in panels:
            series = {k[2:]: ms for k, ms in lines.items() if k[:2] == (workload, group)}
            ax.set(xlabel="GPUs", ylabel="speed-up over 1 GPU")
            if not series:
                ax.text(0.5, 0.5, NO_SCALING, transform=ax.transAxes, ha="center", color="grey")
                ax.set(xticks=[], yticks=[])
                continue
            counts = sorted({m.gpu_count for ms in series.values() for m in ms})
            ax.loglog(counts, counts, "--", color="grey", linewidth=1, base=2)  # linear scaling
            for (gpu, precision, source, _), ms in sorted(series.items()):
                marker_and_line = PRECISION_MARKERS.get(precision, "o") + ("-" if source == MEASURED else ":")
                speedup = [m.throughput / ms[0].throughput for m in ms]
                ax.plot([m.gpu_count for m in ms], speedup, marker_and_line, color=style.gpu_colour(gpu))
            ax.set_xticks(counts, [str(c) for c in counts])
            ax.set_yticks(counts, [str(c) for c in counts])
            ax.grid(alpha=0.3)
        paths.append(style.save(fig, stem, what, "per model", handles, page))
    return paths


def per_model_charts(measurements: list[Measurement], out: Path, flagged: dict[tuple, list]) -> list[Path]:
    """Per model: the median throughput of each point, whiskers its 95% interval; then, where the
    runs have them, items/s per watt and per 1,000 USD of GPUs."""
    throughput, efficiency = [], []
    for model in dict.fromkeys(m.model for m in measurements):
        points = sorted(
            (m for m in measurements if m.model == model),
            key=lambda m: (precision_group(m.precision), m.precision, m.gpu_count, m.variant, m.side),
        )
        unit, spans = points[0].unit, [m.interval for m in points]
        panels = [([m.throughput for m in points], f"training throughput ({unit})", spans)]
        throughput += _bars(recorded.THROUGHPUT, points, panels, out, flagged)
        bases = "/".join(sorted({m.per_watt_basis for m in points if m.per_watt is not None}))
        panels = [
            ([m.per_watt for m in points], f"{unit} per watt ({bases} power)", None),
            ([m.per_kusd for m in points], f"{unit} per 1,000 USD of GPUs", None),
        ]
        if panels := [panel for panel in panels if any(v is not None for v in panel[0])]:
            efficiency += _bars("efficiency", points, panels, out, flagged)
    return throughput + efficiency


def _bars(kind: str, points: list[Measurement], panels: list[tuple], out: Path, flagged: dict) -> list[Path]:
    """A bar per point in a panel per (values, axis label, 95% intervals or None), on pages; a value of
    None is a figure the runs lack, written as such; one flagged as impossible is marked and sets no axis."""
    kinds = [flagged.get(m.point, []) for m in points]
    marks = [f"  ! {' '.join(k)}" if not IMPOSSIBLE.isdisjoint(k) else "" for k in kinds]  # impossible ones
    labels = [
        f"{m.side} x{m.gpu_count} {m.precision}"
        + (f" [{m.variant}]" if m.variant else "")
        + (f" [{m.source}]" if m.source != MEASURED else "")
        + (f" n={m.n_runs}" if m.n_runs > 1 else "")
        for m in points
    ]
    drawn = []  # per panel: its bars' texts and its axis' end, every page of a model on one scale
    for values, _, spans in panels:
        known = [i for i, v in enumerate(values) if v is not None]
        tops = [spans[i][1] if spans and spans[i] else values[i] for i in known]
        texts = ["not logged" if v is None else number(v) + m for v, m in zip(values, marks, strict=True)]
        drawn.append((texts, style.axis_end(tops, [bool(marks[i]) for i in known])))
    model, handles = points[0].model, style.source_handles({m.source for m in points})
    what = f"{model}: training {kind}, every gpu, GPU count and precision"
    pages, paths = style.pages([BAR_IN] * len(points), style.PAGE_IN - 1.3), []  # 1.3: title and axis
    for page, rows in enumerate(pages, start=1):
        fig = style.figure(6.5 * len(panels) + 3.5, 1.6 + BAR_IN * len(rows))
        axes = fig.subplots(1, len(panels), squeeze=False, sharey=True)[0]
        on = slice(rows.start, rows.stop)
        for ax, (values, axis_label, spans), (texts, end) in zip(axes, panels, drawn, strict=True):
            style.hbars(ax, values[on], texts[on], end, spans and spans[on], points=points[on])
            ax.set_xlabel(axis_label)
        axes[0].set_yticks(range(len(rows)), labels[on], fontsize="small")
        axes[0].set_ylabel("gpu x GPUs, precision", fontsize="small")
        stem = out / f"{kind}_{slug(model)}"
        paths.append(style.save(fig, stem, what, DETAILS[kind], handles, (page, len(pages))))
    return paths
