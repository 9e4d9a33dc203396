"""PNG charts of a comparison, drawn like Lambda's A6000 vs 3090 study: horizontal bars of relative
throughput per category and per model, one bar per gpu labelled with its ratio, a line at the
baseline's 1.0, fp32-group and mixed-precision panels side by side. Each gpu keeps one colour in
every chart; published figures are hatched. Absolute throughput and efficiency bars per model, and
a scaling chart where a gpu ran at several GPU counts.

Built on matplotlib's Figure directly (no pyplot): no global state, no display needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from src.compare.analysis import GROUP_TITLES, RelativeRow, SummaryRow, precision_group
from src.compare.runs import MEASURED, Measurement
from src.console import number
from src.hardware.devices import slug

PANEL_GROUPS = ("fp32", "mixed")  # fp32 and mixed precision side by side, as in the study
BAR_IN = 0.26  # inches per bar
PANEL_PAD_IN = 0.9  # title and axis of one panel row
PUBLISHED_HATCH = "///"
DPI = 100
LABEL_BOX = {"facecolor": "white", "edgecolor": "none", "pad": 0.5, "alpha": 0.8}


@dataclass(frozen=True)
class Bar:
    gpu: str
    precision: str
    source: str
    value: float
    flags: str = ""  # anomaly kinds of the figure, shown beside its ratio

    @property
    def label(self) -> str:
        return f"{self.gpu} {self.precision}" + (f" [{self.source}]" if self.source != MEASURED else "")


def gpu_colours(measurements: list[Measurement]) -> dict[str, str]:
    """One colour per gpu, the same in every chart of the comparison."""
    from matplotlib import colormaps

    palette = colormaps["tab10" if len({m.gpu for m in measurements}) <= 10 else "tab20"]
    return {gpu: palette(i % palette.N) for i, gpu in enumerate(sorted({m.gpu for m in measurements}))}


def draw_all(
    rows: list[RelativeRow],
    summary: list[SummaryRow],
    measurements: list[Measurement],
    baseline: str,
    out: Path,
    flagged: dict[tuple, list[str]],
) -> list[Path]:
    """Every chart; `flagged` maps a point to its anomaly kinds, printed beside its bar."""
    colours = gpu_colours(measurements)
    by_category = [
        ((f"{s.category}, {_gpus(s.gpu_count)}", precision_group(s.precision)),
         Bar(s.gpu, s.precision, s.source, s.relative_mean))
        for s in summary
    ]  # fmt: skip
    paths = [
        relative_bars(
            _grouped(by_category),
            baseline,
            colours,
            "mean over the models every gpu has",
            out / "relative_by_category.png",
        )
    ]
    for count in sorted({r.measurement.gpu_count for r in rows if r.relative is not None}):
        per_model = [
            ((r.measurement.workload, precision_group(r.measurement.precision)), _bar(r, flagged))
            for r in rows
            if r.relative is not None and r.measurement.gpu_count == count
        ]
        name = f"relative_by_model_x{count}.png"
        paths.append(relative_bars(_grouped(per_model), baseline, colours, _gpus(count), out / name))
    scaling = scaling_chart(measurements, colours, out / "scaling.png")
    paths += [scaling] if scaling else []
    paths += throughput_per_model(measurements, colours, out)
    paths += efficiency_per_model(measurements, colours, out)
    return paths


def _bar(row: RelativeRow, flagged: dict[tuple, list[str]]) -> Bar:
    m = row.measurement
    return Bar(m.gpu, m.precision, m.source, row.relative, " ".join(flagged.get(m.point, [])))


def _gpus(count: int) -> str:
    return f"{count} GPU" + ("s" if count > 1 else "")


def _grouped(items) -> dict[str, dict[str, list[Bar]]]:
    """{row title: {precision group: bars}}, rows and bars in a stable order."""
    grouped: dict[str, dict[str, list[Bar]]] = {}
    for (title, group), bar in sorted(items, key=lambda item: item[0][0]):
        grouped.setdefault(title, {}).setdefault(group, []).append(bar)
    for panels in grouped.values():
        for bars in panels.values():
            bars.sort(key=lambda b: (b.gpu, b.precision, b.source))
    return grouped


def relative_bars(
    grouped: dict[str, dict[str, list[Bar]]], baseline: str, colours: dict, what: str, path: Path
) -> Path:
    """One row of panels per title, one column per precision group; bars from 0, labelled."""
    from matplotlib.figure import Figure

    groups = [g for g in PANEL_GROUPS if any(g in panels for panels in grouped.values())]
    groups += sorted({g for panels in grouped.values() for g in panels} - set(groups))
    heights = [max(len(panels.get(g, [])) for g in groups) for panels in grouped.values()]
    fig = Figure(
        figsize=(6.2 * len(groups) + 1.6, sum(BAR_IN * h + PANEL_PAD_IN for h in heights) + 0.8),
        layout="constrained",
    )
    axes = fig.subplots(len(grouped), len(groups), squeeze=False, height_ratios=[h + 3 for h in heights])
    top = max((b.value for panels in grouped.values() for bars in panels.values() for b in bars), default=1)
    for row, (title, panels) in enumerate(grouped.items()):
        for col, group in enumerate(groups):
            ax, bars = axes[row][col], panels.get(group, [])
            y = range(len(bars))
            drawn = ax.barh(
                y,
                [b.value for b in bars],
                color=[colours[b.gpu] for b in bars],
                hatch=[PUBLISHED_HATCH if b.source != MEASURED else "" for b in bars],
                edgecolor="white",
            )
            ax.bar_label(
                drawn,
                labels=[f"{number(b.value)}x" + (f"  ! {b.flags}" if b.flags else "") for b in bars],
                padding=3,
                fontsize="small",
                bbox=LABEL_BOX,
            )
            ax.set_yticks(list(y), [b.label for b in bars], fontsize="small")
            ax.invert_yaxis()
            ax.set_xlim(0, max(top, 1.0) * 1.18)  # one scale for every panel: bar lengths compare
            ax.axvline(1.0, color="black", linewidth=1, zorder=1.5)  # over the grid, under the labels
            ax.set_title(f"{title}: {GROUP_TITLES.get(group, group)}", fontsize="medium", loc="left")
            ax.grid(axis="x", alpha=0.3)
            if not bars:
                ax.text(0.5, 0.5, "no runs", transform=ax.transAxes, ha="center", va="center", color="grey")
            if row == len(grouped) - 1:
                ax.set_xlabel(f"training throughput relative to {baseline} (= 1.0)")
    fig.suptitle(f"Relative training throughput, {what}", fontsize="large")
    _legend(
        fig, colours, any(b.source != MEASURED for p in grouped.values() for bs in p.values() for b in bs)
    )
    fig.savefig(path, dpi=DPI)
    return path


def _legend(fig, colours: dict, published: bool) -> None:
    from matplotlib.patches import Patch

    handles = [Patch(color=c, label=gpu) for gpu, c in colours.items()]
    if published:
        handles.append(
            Patch(facecolor="lightgrey", hatch=PUBLISHED_HATCH, edgecolor="white", label="published")
        )
    fig.legend(handles=handles, loc="outside right upper", fontsize="small", title="gpu")


def scaling_chart(measurements: list[Measurement], colours: dict, path: Path) -> Path | None:
    """Speed-up over the same gpu's 1-GPU point against GPU count, per model and precision group;
    None when no gpu ran a model at several GPU counts."""
    from matplotlib.figure import Figure

    lines: dict[tuple, dict[tuple, list[Measurement]]] = {}
    for m in measurements:
        series = lines.setdefault((m.workload, precision_group(m.precision)), {})
        series.setdefault((m.gpu, m.precision, m.source, m.config), []).append(m)
    lines = {
        key: {s: sorted(ms, key=lambda m: m.gpu_count) for s, ms in series.items() if _scales(ms)}
        for key, series in lines.items()
    }
    lines = {key: series for key, series in lines.items() if series}
    if not lines:
        return None
    fig = Figure(figsize=(7.5, 3.2 * len(lines) + 0.6), layout="constrained")
    axes = fig.subplots(len(lines), 1, squeeze=False)[:, 0]
    for ax, ((workload, group), series) in zip(axes, sorted(lines.items()), strict=True):
        counts = sorted({m.gpu_count for ms in series.values() for m in ms})
        ax.plot(counts, counts, color="grey", linestyle="--", linewidth=1, label="linear")
        for (gpu, precision, source, _), ms in sorted(series.items()):
            one = ms[0].throughput
            ax.plot(
                [m.gpu_count for m in ms],
                [m.throughput / one for m in ms],
                marker="o",
                color=colours[gpu],
                linestyle="-" if source == MEASURED else ":",
                label=Bar(gpu, precision, source, 0).label,
            )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ax.set_xticks(counts, [str(c) for c in counts])
        ax.set_yticks(counts, [str(c) for c in counts])
        ax.set_title(f"{workload}: {GROUP_TITLES.get(group, group)}", fontsize="medium", loc="left")
        ax.set_xlabel("GPUs")
        ax.set_ylabel("speed-up over 1 GPU")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="x-small", loc="upper left")
    fig.savefig(path, dpi=DPI)
    return path


def _scales(points: list[Measurement]) -> bool:
    return len(points) > 1 and points[0].gpu_count == 1


def throughput_per_model(measurements: list[Measurement], colours: dict, out: Path) -> list[Path]:
    """One bar chart per model: the median throughput of each point, whiskers from min to max."""
    paths = []
    for model, points in _by_model(measurements).items():
        values = [m.throughput for m in points]
        spread = [
            [m.throughput - m.throughput_min for m in points],
            [m.throughput_max - m.throughput for m in points],
        ]
        title = f"{model}: training throughput ({points[0].unit}), median of runs, whiskers min-max"
        paths.append(_bars(points, [(values, title, spread)], colours, out / f"throughput_{slug(model)}.png"))
    return paths


def efficiency_per_model(measurements: list[Measurement], colours: dict, out: Path) -> list[Path]:
    """Per model where the runs have them: items/s per watt and per 1,000 USD of GPUs."""
    paths = []
    for model, points in _by_model(measurements).items():
        unit = points[0].unit
        panels = []
        watt = [m for m in points if m.per_watt is not None]
        if watt:
            bases = "/".join(sorted({m.per_watt_basis for m in watt}))
            panels.append(([m.per_watt or 0.0 for m in points], f"{unit} per watt ({bases} power)", None))
        if any(m.per_kusd is not None for m in points):
            panels.append(([m.per_kusd or 0.0 for m in points], f"{unit} per 1,000 USD of GPUs", None))
        if panels:
            paths.append(_bars(points, panels, colours, out / f"efficiency_{slug(model)}.png"))
    return paths


def _by_model(measurements: list[Measurement]) -> dict[str, list[Measurement]]:
    models: dict[str, list[Measurement]] = {}
    for m in measurements:
        models.setdefault(m.model, []).append(m)
    for points in models.values():
        points.sort(key=lambda m: (precision_group(m.precision), m.precision, m.gpu_count, m.variant, m.gpu))
    return models


def _bars(points: list[Measurement], panels: list[tuple], colours: dict, path: Path) -> Path:
    """Horizontal bars, one per point, in one panel per (values, title, whiskers)."""
    from matplotlib.figure import Figure

    labels = [
        f"{m.gpu} x{m.gpu_count} {m.precision}"
        + (f" [{m.variant}]" if m.variant else "")
        + (f" [{m.source}]" if m.source != MEASURED else "")
        + (f" n={m.n_runs}" if m.n_runs > 1 else "")
        for m in points
    ]
    fig = Figure(figsize=(6.5 * len(panels) + 1.5, 1.3 + BAR_IN * len(points)), layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False, sharey=True)[0]
    for ax, (values, title, whiskers) in zip(axes, panels, strict=True):
        bars = ax.barh(
            range(len(points)),
            values,
            xerr=whiskers,
            color=[colours[m.gpu] for m in points],
            hatch=[PUBLISHED_HATCH if m.source != MEASURED else "" for m in points],
            edgecolor="white",
        )
        ax.bar_label(bars, labels=[number(v) if v else "" for v in values], fontsize="x-small", padding=3)
        ax.set_yticks(range(len(points)), labels, fontsize="small")
        ax.invert_yaxis()
        ends = [v + (whiskers[1][i] if whiskers else 0) for i, v in enumerate(values)]
        ax.set_xlim(0, max(ends, default=1) * 1.2 or 1)
        ax.set_title(title, fontsize="small", loc="left")
        ax.grid(axis="x", alpha=0.3)
    _legend(fig, {m.gpu: colours[m.gpu] for m in points}, any(m.source != MEASURED for m in points))
    fig.savefig(path, dpi=DPI)
    return path
