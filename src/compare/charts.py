"""PNG charts of a comparison, drawn like Lambda's A6000 vs 3090 study: horizontal bars of relative
throughput per category and per model, one bar per gpu labelled with its ratio and its 95%
interval as an error bar (`~1` where it holds 1.0: no measurable difference), a line at the
baseline's 1.0, fp32-group and mixed-precision panels side by side. Absolute throughput and
efficiency bars per model, and a scaling chart where a gpu ran at several GPU counts. How they look
(a gpu's colour, titles, legends, pages) is src/compare/style.py's.

Built on matplotlib's Figure directly (no pyplot): no global state, no display needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from src.compare import style
from src.compare.analysis import RelativeRow, SummaryRow, precision_group
from src.compare.ratio import holds_one
from src.compare.runs import MEASURED, Measurement
from src.console import gpus, number
from src.hardware.devices import slug

PANEL_GROUPS = ("fp32", "mixed")  # fp32 and mixed precision side by side, as in the study
PANEL_TITLES = {"fp32": "fp32, tf32", "mixed": "amp, bf16"}  # short: a panel's title is never cut
BAR_IN = 0.26  # inches per bar
PANEL_PAD_IN = 0.9  # title and axis of one panel row
IMPOSSIBLE = {"outside_spec", "scaling_above_100"}  # anomaly kinds no hardware can produce


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
        ((f"{s.category}, {gpus(s.gpu_count)}", precision_group(s.precision)),
         Bar(s.side, s.precision, s.source, s.relative_mean, " ".join(s.flags), s.mean.interval))
        for s in summary
    ]  # fmt: skip
    paths = relative_bars(
        _grouped(by_category),
        baseline,
        "per category: the mean over the models the gpu and the baseline both have",
        out / "relative_by_category",
    )
    for count in sorted({r.measurement.gpu_count for r in rows if r.relative is not None}):
        per_model = [
            ((r.measurement.workload, precision_group(r.measurement.precision)), _bar(r, flagged))
            for r in rows
            if r.relative is not None and r.measurement.gpu_count == count
        ]
        what = f"per model on {gpus(count)}"
        paths += relative_bars(_grouped(per_model), baseline, what, out / f"relative_by_model_x{count}")
    paths += scaling_chart(measurements, out / "scaling")
    paths += per_model_charts(measurements, out, flagged)
    return paths


def _bar(row: RelativeRow, flagged: dict[tuple, list[str]]) -> Bar:
    m = row.measurement
    flags = " ".join(dict.fromkeys(flagged.get(m.point, []) + row.flags))
    return Bar(m.side, m.precision, m.source, row.relative, flags, row.interval)


def _grouped(items) -> dict[str, dict[str, list[Bar]]]:
    """{row title: {precision group: bars}}, rows and bars in a stable order."""
    grouped: dict[str, dict[str, list[Bar]]] = {}
    for (title, group), bar in sorted(items, key=lambda item: item[0][0]):
        grouped.setdefault(title, {}).setdefault(group, []).append(bar)
    for panels in grouped.values():
        for bars in panels.values():
            bars.sort(key=lambda b: (b.side, b.precision, b.source))
    return grouped


def _panel_groups(keys) -> list[str]:
    present = {group for panel in keys for group in panel}
    return [g for g in PANEL_GROUPS if g in present] + sorted(present - set(PANEL_GROUPS))


def relative_bars(
    grouped: dict[str, dict[str, list[Bar]]], baseline: str, what: str, stem: Path
) -> list[Path]:
    """One row of panels per title, one column per precision group; bars from 0, labelled; a grid
    too tall for one picture is split into pages."""
    groups = _panel_groups(grouped.values())
    titles = list(grouped)
    heights = [BAR_IN * max(len(grouped[t].get(g, [])) for g in groups) + PANEL_PAD_IN for t in titles]
    bars_all = [b for panels in grouped.values() for bars in panels.values() for b in bars]
    end = style.axis_end([max(_end(b), 1.0) for b in bars_all], [_impossible(b.flags.split()) for b in bars_all])
    sources = {b.source for b in bars_all}
    paths = []
    pages = style.pages(heights)
    for page, rows in enumerate(pages, start=1):
        fig = style.figure(6.2 * len(groups) + 1.6, sum(heights[i] for i in rows) + 1.0)
        axes = fig.subplots(len(rows), len(groups), squeeze=False, height_ratios=[heights[i] for i in rows])
        for r, i in enumerate(rows):
            for col, group in enumerate(groups):
                _relative_panel(axes[r][col], grouped[titles[i]].get(group, []), end)
                axes[r][col].set_title(
                    f"{titles[i]} · {PANEL_TITLES.get(group, group)}", fontsize="medium", loc="left"
                )
            axes[r][0].set_ylabel("gpu, precision", fontsize="small")
        for ax in axes[-1]:
            ax.set_xlabel(f"training throughput relative to {baseline} (= 1.0)")
        style.title(
            fig,
            f"Training throughput relative to {baseline}, {what}",
            "bars from 0 on one scale; whiskers: 95% interval, ~1: it holds 1.0 (no measurable "
            "difference); ! marks a flagged figure (report.md says why)",
            (page, len(pages)),
        )
        style.legend(fig, style.source_handles(sources))
        style.keep_labels_inside(fig)
        path = stem.parent / style.page_name(stem.name, page, len(pages))
        fig.savefig(path, dpi=style.DPI)
        paths.append(path)
    return paths


def _impossible(kinds: list[str]) -> bool:
    """A figure flagged as beyond what hardware allows: drawn to the axis' edge, never setting it."""
    return bool(set(kinds) & IMPOSSIBLE)


def _relative_panel(ax, bars: list[Bar], end: float) -> None:
    y = range(len(bars))
    drawn = ax.barh(
        y,
        [b.value for b in bars],
        color=[style.gpu_colour(b.side) for b in bars],
        hatch=[style.hatch(b.source) for b in bars],
        edgecolor="white",
        xerr=_whiskers(bars),
        error_kw={"elinewidth": 1, "capsize": 2, "ecolor": "dimgrey"},
    )
    texts = [_bar_text(b) for b in bars]
    style.bar_values(ax, drawn, [b.value for b in bars], texts, end)
    ax.set_yticks(list(y), [b.label for b in bars], fontsize="small")
    ax.invert_yaxis()
    ax.set_xlim(0, end)  # one scale for every panel: bar lengths compare
    ax.axvline(1.0, color="black", linewidth=1, zorder=1.5)  # over the grid, under the labels
    ax.grid(axis="x", alpha=0.3)
    if not bars:
        ax.text(0.5, 0.5, "no runs", transform=ax.transAxes, ha="center", va="center", color="grey")


def _end(bar: Bar) -> float:
    return bar.interval[1] if bar.interval else bar.value


def _whiskers(bars: list[Bar]) -> list[list[float]]:
    return style.whiskers([b.value for b in bars], [b.interval for b in bars])


def _bar_text(bar: Bar) -> str:
    text = style.ratio_text(bar.value) + ("  ~1" if holds_one(bar.interval) else "")
    return text + (f"  ! {bar.flags}" if bar.flags else "")


SCALING_PANEL_IN = 2.8
PRECISION_MARKERS = {"fp32": "o", "tf32": "s", "amp": "o", "bf16": "s"}


def scaling_chart(measurements: list[Measurement], stem: Path) -> list[Path]:
    """Speed-up over the same gpu's 1-GPU point against GPU count: one row per model, one column
    per precision group, one legend for all; nothing when no gpu ran a model at several counts."""
    from matplotlib.lines import Line2D

    lines: dict[tuple, dict[tuple, list[Measurement]]] = {}
    for m in measurements:
        series = lines.setdefault((m.workload, precision_group(m.precision)), {})
        series.setdefault((m.side, m.precision, m.source, m.config), []).append(m)
    lines = {
        key: {s: sorted(ms, key=lambda m: m.gpu_count) for s, ms in series.items() if _scales(ms)}
        for key, series in lines.items()
    }
    lines = {key: series for key, series in lines.items() if series}
    if not lines:
        return []
    workloads = sorted({workload for workload, _ in lines})
    groups = _panel_groups([[group for _, group in lines]])
    drawn = {(gpu, precision, source) for series in lines.values() for gpu, precision, source, _ in series}
    pages = style.pages([SCALING_PANEL_IN] * len(workloads))
    paths = []
    for page, rows in enumerate(pages, start=1):
        fig = style.figure(4.6 * len(groups) + 2.4, SCALING_PANEL_IN * len(rows) + 1.0)
        axes = fig.subplots(len(rows), len(groups), squeeze=False)
        for r, i in enumerate(rows):
            for col, group in enumerate(groups):
                ax = axes[r][col]
                ax.set_title(
                    f"{workloads[i]} · {PANEL_TITLES.get(group, group)}", fontsize="medium", loc="left"
                )
                _scaling_panel(ax, lines.get((workloads[i], group), {}))
        style.title(
            fig,
            "Scaling: training throughput over the same gpu's 1-GPU figure",
            "per model",
            (page, len(pages)),
        )
        handles = style.gpu_handles(sorted({gpu for gpu, _, _ in drawn}))
        precisions = sorted({p for _, p, _ in drawn})
        for marker in dict.fromkeys(PRECISION_MARKERS.get(p, "o") for p in precisions):
            label = ", ".join(p for p in precisions if PRECISION_MARKERS.get(p, "o") == marker)
            handles.append(Line2D([], [], color="black", marker=marker, linestyle="", label=label))
        for source_is_measured, linestyle, label in ((True, "-", "measured"), (False, ":", "published")):
            if any((source == MEASURED) == source_is_measured for _, _, source in drawn):
                handles.append(Line2D([], [], color="black", linestyle=linestyle, label=label))
        handles.append(Line2D([], [], color="grey", linestyle="--", label="linear"))
        style.legend(fig, handles)
        path = stem.parent / style.page_name(stem.name, page, len(pages))
        fig.savefig(path, dpi=style.DPI)
        paths.append(path)
    return paths


def _scaling_panel(ax, series: dict[tuple, list[Measurement]]) -> None:
    ax.set_xlabel("GPUs")
    ax.set_ylabel("speed-up over 1 GPU")
    if not series:
        ax.text(0.5, 0.5, "no runs at several GPU counts", transform=ax.transAxes, ha="center", color="grey")
        ax.set_xticks([])
        ax.set_yticks([])
        return
    counts = sorted({m.gpu_count for ms in series.values() for m in ms})
    ax.plot(counts, counts, color="grey", linestyle="--", linewidth=1)
    for (gpu, precision, source, _), ms in sorted(series.items()):
        one = ms[0].throughput
        ax.plot(
            [m.gpu_count for m in ms],
            [m.throughput / one for m in ms],
            marker=PRECISION_MARKERS.get(precision, "o"),
            color=style.gpu_colour(gpu),
            linestyle="-" if source == MEASURED else ":",
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xticks(counts, [str(c) for c in counts])
    ax.set_yticks(counts, [str(c) for c in counts])
    ax.grid(alpha=0.3)


def _scales(points: list[Measurement]) -> bool:
    return len(points) > 1 and points[0].gpu_count == 1


def per_model_charts(measurements: list[Measurement], out: Path, flagged: dict[tuple, list[str]]) -> list[Path]:
    """Per model: the median throughput of each point, whiskers its 95% interval; then, where the
    runs have them, items/s per watt and per 1,000 USD of GPUs."""
    throughput, efficiency = [], []
    for model, points in _by_model(measurements).items():
        unit = points[0].unit
        values = [m.throughput for m in points]
        spread = _whiskers([Bar(m.side, m.precision, m.source, m.throughput, interval=m.interval) for m in points])
        throughput += _bars(
            points,
            [(values, f"training throughput ({unit})", spread)],
            f"{model}: training throughput, every gpu, GPU count and precision",
            "median of runs; whiskers: 95% interval (repeats; one run: within-run only; published: its runs' or none)",
            out / f"throughput_{slug(model)}",
            flagged,
        )
        panels = []
        watt = [m for m in points if m.per_watt is not None]
        if watt:
            bases = "/".join(sorted({m.per_watt_basis for m in watt}))
            panels.append(([m.per_watt for m in points], f"{unit} per watt ({bases} power)", None))
        if any(m.per_kusd is not None for m in points):
            panels.append(([m.per_kusd for m in points], f"{unit} per 1,000 USD of GPUs", None))
        if panels:
            efficiency += _bars(
                points,
                panels,
                f"{model}: training efficiency, every gpu, GPU count and precision",
                "per watt: measured power where telemetry logged it, else the spec sheet's TDP",
                out / f"efficiency_{slug(model)}",
                flagged,
            )
    return throughput + efficiency


def _by_model(measurements: list[Measurement]) -> dict[str, list[Measurement]]:
    models: dict[str, list[Measurement]] = {}
    for m in measurements:
        models.setdefault(m.model, []).append(m)
    for points in models.values():
        points.sort(key=lambda m: (precision_group(m.precision), m.precision, m.gpu_count, m.variant, m.side))
    return models


def _bars(
    points: list[Measurement], panels: list[tuple], what: str, detail: str, stem: Path, flagged: dict
) -> list[Path]:
    """Horizontal bars, one per point, in one panel per (values, axis label, whiskers); a value of
    None is a figure the runs lack, written as such; a figure flagged as impossible is drawn to the
    axis' edge and marked, never setting the axis; too many bars for one picture make pages."""
    impossible = [_impossible(flagged.get(m.point, [])) for m in points]
    labels = [
        f"{m.side} x{m.gpu_count} {m.precision}"
        + (f" [{m.variant}]" if m.variant else "")
        + (f" [{m.source}]" if m.source != MEASURED else "")
        + (f" n={m.n_runs}" if m.n_runs > 1 else "")
        for m in points
    ]
    per_page = max(1, int((style.PAGE_IN - 1.3) / BAR_IN))
    pages = [range(i, min(i + per_page, len(points))) for i in range(0, len(points), per_page)]
    sources = {m.source for m in points}
    paths = []
    for page, rows in enumerate(pages, start=1):
        fig = style.figure(6.5 * len(panels) + 3.5, 1.6 + BAR_IN * len(rows))
        axes = fig.subplots(1, len(panels), squeeze=False, sharey=True)[0]
        for ax, (values, axis_label, whiskers) in zip(axes, panels, strict=True):
            shown = [values[i] for i in rows]
            drawn = ax.barh(
                range(len(rows)),
                [v or 0.0 for v in shown],
                xerr=[[whiskers[0][i] for i in rows], [whiskers[1][i] for i in rows]] if whiskers else None,
                color=[style.gpu_colour(points[i].side) for i in rows],
                hatch=[style.hatch(points[i].source) for i in rows],
                edgecolor="white",
            )
            known = [i for i, v in enumerate(values) if v is not None]
            ends = [values[i] + (whiskers[1][i] if whiskers else 0) for i in known]
            end = style.axis_end(ends, [impossible[i] for i in known])  # every page of a model on one scale
            texts = [
                (number(values[i]) + ("  ! " + " ".join(flagged.get(points[i].point, [])) if impossible[i] else ""))
                if values[i] is not None
                else "not logged"
                for i in rows
            ]
            style.bar_values(ax, drawn, [v or 0.0 for v in shown], texts, end)
            ax.set_xlim(0, end)
            ax.set_xlabel(axis_label)
            ax.grid(axis="x", alpha=0.3)
        axes[0].set_yticks(range(len(rows)), [labels[i] for i in rows], fontsize="small")
        axes[0].invert_yaxis()  # once: the panels share this axis
        axes[0].set_ylabel("gpu x GPUs, precision", fontsize="small")
        style.title(fig, what, detail, (page, len(pages)))
        style.legend(fig, style.source_handles(sources))
        style.keep_labels_inside(fig)
        path = stem.parent / style.page_name(stem.name, page, len(pages))
        fig.savefig(path, dpi=style.DPI)
        paths.append(path)
    return paths
