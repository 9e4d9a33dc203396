"""PNG charts of a comparison: the study's relative-throughput figures, absolute and efficiency bars.

Built on matplotlib's Figure directly (no pyplot): no global state, no display needed.
"""

from __future__ import annotations

from pathlib import Path

from src.compare.analysis import GROUP_TITLES, SummaryRow, precision_group
from src.compare.runs import Measurement
from src.hardware.devices import slug

PANEL_GROUPS = ("fp32", "mixed")  # fp32 and mixed precision side by side, as in the study
BAR_HEIGHT_IN = 0.22
MARKERS = "osD^v"


def relative_by_category(summary: list[SummaryRow], baseline: str, path: Path) -> Path:
    """Relative throughput (category mean) against GPU count: one row per category, fp32 | mixed."""
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    colours = colormaps["tab20"]  # 20 colours, then the marker changes
    categories = sorted({s.category for s in summary})
    groups = list(PANEL_GROUPS) + sorted({precision_group(s.precision) for s in summary} - set(PANEL_GROUPS))
    counts = sorted({s.gpu_count for s in summary})
    fig = Figure(figsize=(6 * len(groups), 4 * len(categories)), layout="constrained")
    axes = fig.subplots(len(categories), len(groups), squeeze=False, sharex=True)
    for row, category in enumerate(categories):
        for col, group in enumerate(groups):
            ax = axes[row][col]
            series: dict[str, list[SummaryRow]] = {}
            for s in summary:
                if s.category == category and precision_group(s.precision) == group and s.gpu != baseline:
                    series.setdefault(f"{s.gpu} {s.precision} [{s.source}]", []).append(s)
            for i, (label, points) in enumerate(sorted(series.items())):
                points.sort(key=lambda s: s.gpu_count)
                x, y = [s.gpu_count for s in points], [s.relative_mean for s in points]
                # tab20 pairs dark and light shades of one hue: all dark ones first, then the light
                shade = (2 * i) % 20 + (i // 10) % 2
                style = {"color": colours(shade), "marker": MARKERS[i // 20 % len(MARKERS)]}
                ax.plot(x, y, label=label, **style)
            ax.axhline(1.0, color="black", linestyle="--", linewidth=1, label=f"{baseline} = 1")
            ax.set_xscale("log", base=2)
            ax.set_xticks(counts, [str(c) for c in counts])
            ax.set_title(f"{category}: {GROUP_TITLES.get(group, group)}")
            ax.set_xlabel("GPUs")
            ax.set_ylabel(f"throughput relative to {baseline} (mean over models)")
            if not series:
                ax.text(0.5, 0.5, "no runs", transform=ax.transAxes, ha="center", va="center")
            ax.legend(fontsize="x-small", loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.savefig(path, dpi=110)
    return path


def throughput_per_model(measurements: list[Measurement], out: Path) -> list[Path]:
    """One bar chart per model: the median throughput of each point, whiskers from min to max."""
    paths = []
    for model, points in _by_model(measurements).items():
        values = [m.throughput for m in points]
        spread = [
            [m.throughput - m.throughput_min for m in points],
            [m.throughput_max - m.throughput for m in points],
        ]
        title = f"{model}: training throughput ({points[0].unit}), median of runs, whiskers min-max"
        paths.append(_bars(points, [(values, title, spread)], out / f"throughput_{slug(model)}.png"))
    return paths


def efficiency_per_model(measurements: list[Measurement], out: Path) -> list[Path]:
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
            paths.append(_bars(points, panels, out / f"efficiency_{slug(model)}.png"))
    return paths


def _by_model(measurements: list[Measurement]) -> dict[str, list[Measurement]]:
    models: dict[str, list[Measurement]] = {}
    for m in measurements:
        models.setdefault(m.model, []).append(m)
    for points in models.values():
        points.sort(key=lambda m: (precision_group(m.precision), m.precision, m.gpu_count, m.throughput))
    return models


def _bars(points: list[Measurement], panels: list[tuple], path: Path) -> Path:
    """Horizontal bars, one per point, in one panel per (values, title, whiskers)."""
    from matplotlib.figure import Figure

    labels = [
        f"{m.gpu} x{m.gpu_count} {m.precision} [{m.source}]" + (f" n={m.n_runs}" if m.n_runs > 1 else "")
        for m in points
    ]
    precisions = sorted({m.precision for m in points})
    colours = {p: f"C{i}" for i, p in enumerate(precisions)}
    height = max(2.5, 1.2 + BAR_HEIGHT_IN * len(points))
    fig = Figure(figsize=(7 * len(panels), height), layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False, sharey=True)[0]
    for ax, (values, title, whiskers) in zip(axes, panels, strict=True):
        bars = ax.barh(
            range(len(points)), values, xerr=whiskers, color=[colours[m.precision] for m in points]
        )
        ax.bar_label(bars, labels=[f"{v:.4g}" if v else "" for v in values], fontsize="xx-small", padding=2)
        ax.set_yticks(range(len(points)), labels, fontsize="x-small")
        ax.set_title(title, fontsize="small")
        ax.grid(axis="x", alpha=0.3)
    fig.savefig(path, dpi=110)
    return path
