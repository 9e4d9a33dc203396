"""How every chart of a comparison looks, in one place so that a gpu looks the same in every picture."""

from __future__ import annotations

import textwrap
import zlib
from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path

from src.recorded import MEASURED, PROJECTED

TITLE_PT = 12  # matplotlib's "large"
CHAR_EM = 0.55  # DejaVu Sans's mean character width, in ems
TITLE_SHARE = 0.8  # of the figure's width: the legend takes the right of the top line

# The gpu profiles (conf/gpu/) keep fixed colours, whatever else a comparison holds.
PROFILE_COLOURS = {
    "rtx3090": "tab:blue",
    "a6000": "tab:orange",
    "a100": "tab:green",
    "h100": "tab:red",
    "h200": "tab:purple",
    "cpu": "tab:gray",
}
PUBLISHED_HATCH = "///"
PROJECTED_HATCH = "..."  # a projected point (source `projected`, src/compare/projection.py)
DPI = 100
PAGE_IN = 18.0  # a chart taller than this many inches is split into pages
TOO_SHORT = 0.005  # a bar under this fraction of its axis cannot be seen: its value says so
LABEL_BOX = {"facecolor": "white", "edgecolor": "none", "pad": 0.5, "alpha": 0.8}
WHISKERS = {"elinewidth": 1, "capsize": 2, "ecolor": "dimgrey"}  # a 95% interval on a bar
HOLDS_ONE = "  ~1"  # after a bar's ratio whose 95% interval holds 1.0

_CHOSEN: dict[str, object] = {}  # this comparison's colours (use_colours)


def _ring(gpu: str) -> list:
    """The palette from the colour of the gpu's name's hash on (crc32, not hash(): salted per process)."""
    from matplotlib import colormaps

    # the palest shade of each hue reads as no bar
    palette = [colormaps[name](i) for name in ("tab20b", "tab20c") for i in range(20) if i % 4 != 3]
    start = zlib.crc32(gpu.encode()) % len(palette)
    return palette[start:] + palette[:start]


def use_colours(gpus: Sequence[str]) -> None:
    """One colour per gpu, none shared: the profile's, else its hash's or, taken by a gpu before it in
    name order, the next free one. The same gpus get the same colours in every comparison."""
    _CHOSEN.clear()
    for gpu in sorted(set(gpus)):
        ring = _ring(gpu)
        free = next((c for c in ring if c not in _CHOSEN.values()), ring[0])  # none free: its hash's own
        _CHOSEN[gpu] = PROFILE_COLOURS.get(gpu, free)


def gpu_colour(gpu: str):
    """The comparison's colour of the gpu (use_colours); else the profile's, else its hash's."""
    return _CHOSEN.get(gpu) or PROFILE_COLOURS.get(gpu) or _ring(gpu)[0]


def figure(width_in: float, height_in: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(width_in, height_in), layout="constrained")


def save(fig, stem: Path, what: str, detail: str = "", handles=(), page=(1, 1), below: int = 0) -> Path:
    """The chart titled (what, then the detail and page), its legend outside the panels (upper right,
    or below in `below` columns), as stem.png or, where it has pages, stem_pN.png."""
    number_of = f"page {page[0]} of {page[1]}" if page[1] > 1 else ""
    second = "; ".join(part for part in (detail, number_of) if part)
    # wrapped to the figure: a one-panel chart is narrower than its explanation
    width = max(20, int(fig.get_figwidth() * 72 / (TITLE_PT * CHAR_EM) * TITLE_SHARE))
    lines = [line for part in (what, second) if part for line in textwrap.wrap(part, width)]
    fig.suptitle("\n".join(lines), fontsize=TITLE_PT, x=0.02, ha="left")
    if handles:
        where = {"loc": "outside lower center", "ncols": below} if below else {"loc": "outside right upper"}
        fig.legend(handles=handles, fontsize="small", **where)
    keep_labels_inside(fig)
    path = stem.with_name(f"{stem.name}.png" if page[1] == 1 else f"{stem.name}_p{page[0]}.png")
    fig.savefig(path, dpi=DPI)
    return path


def hatch(source: str) -> str:
    """Measured bars are plain, published ones hatched, projected ones dotted."""
    return "" if source == MEASURED else PROJECTED_HATCH if source == PROJECTED else PUBLISHED_HATCH


def source_handles(sources) -> list:
    """The legend's entries for the kinds of figure other than measured that a chart holds."""
    from matplotlib.patches import Patch

    kinds = {("projected" if s == PROJECTED else "published", hatch(s)) for s in sources if s != MEASURED}
    return [Patch(fc="lightgrey", hatch=h, ec="white", label=f"{k} figure") for k, h in sorted(kinds)]


def pages(heights: Sequence[float], budget_in: float = PAGE_IN) -> list[range]:
    """Consecutive rows of a grid, each page at most `budget_in` tall (a taller row alone)."""
    starts, used = [], 0.0
    for i, height in enumerate(heights):
        if not starts or used + height > budget_in:
            starts.append(i)
            used = 0.0
        used += height
    return [range(a, b) for a, b in pairwise([*starts, len(heights)])]


def axis_end(values: Sequence[float], outliers: Sequence[bool]) -> float:
    """Where a bar axis ends: past the largest value that is not an outlier (a figure no hardware
    can produce would squash every other bar to nothing; it is drawn to the edge and written)."""
    kept = [v for v, out in zip(values, outliers, strict=True) if not out] or list(values)
    return max(kept, default=1.0) * 1.18 or 1.0


def hbars(ax, values: list, texts: list[str], end: float, spans=None, y=None, points=(), **bars) -> None:
    """Bars from 0 (None: 0) to an axis ending at `end`, whiskers the 95% intervals `spans`, each text past
    its whisker, coloured and hatched by `points`' side and source where given; a bar too short to see
    or cut at the axis' end says so."""
    if points:
        bars |= {"color": [gpu_colour(p.side) for p in points], "hatch": [hatch(p.source) for p in points]}
    values = [v or 0.0 for v in values]
    xerr = whiskers(values, spans) if spans else None
    at = range(len(values)) if y is None else y
    drawn = ax.barh(at, values, xerr=xerr, error_kw=WHISKERS, edgecolor="white", **bars)
    for bar, value, span, text in zip(drawn, values, spans or [None] * len(values), texts, strict=True):
        if value > end:
            bar.set_width(end)
            text += " (beyond the axis)"
        elif 0 < value < TOO_SHORT * end:
            text += " (too short to draw)"
        beside = (min(span[1], end) if span else bar.get_width(), bar.get_y() + bar.get_height() / 2)
        label = ax.annotate(text, beside, xytext=(3, 0), textcoords="offset points", va="center",
                            fontsize="small", bbox=LABEL_BOX)  # fmt: skip
        label.bar_end = bar.get_width()  # keep_labels_inside moves a label that would leave its panel
    ax.set_xlim(0, end)  # one scale for every panel: bar lengths compare
    ax.yaxis.set_inverted(True)  # the first bar on top
    ax.grid(axis="x", alpha=0.3)


def keep_labels_inside(fig) -> None:
    """Every bar label within its panel: one that would pass the right edge is written inside its bar,
    ending at its end (or at the panel's edge where the bar is shorter, smaller where that is too)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    labels = [(ax, label) for ax in fig.axes for label in ax.texts if hasattr(label, "bar_end")]
    if not labels:
        return
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw_without_rendering()  # the constrained layout places the panels: the labels' extents are known
    for ax, label in labels:
        box = ax.get_window_extent(renderer)
        if label.get_window_extent(renderer).x1 <= box.x1:
            continue
        label.set_horizontalalignment("right")
        label.xyann = (-3, 0)
        label.xy = (label.bar_end, label.xy[1])
        if label.get_window_extent(renderer).x0 < box.x0:  # longer than its bar
            label.xy = (ax.get_xlim()[1], label.xy[1])
        if label.get_window_extent(renderer).x0 < box.x0:  # longer than the panel
            label.set_fontsize("x-small")


def whiskers(values: Sequence[float], spans: Sequence[tuple[float, float] | None]) -> list[list[float]]:
    """matplotlib's xerr or yerr: each value's distances to its interval's ends (0 without one)."""
    below = [v - s[0] if s else 0.0 for v, s in zip(values, spans, strict=True)]
    return [below, [s[1] - v if s else 0.0 for v, s in zip(values, spans, strict=True)]]
