"""How every chart of a comparison looks, in one place so that a gpu looks the same in every picture:
colours, titles, legends, pages, bar values that stay readable, saving."""

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


def _palette() -> list:
    from matplotlib import colormaps

    palette = [colormaps[name](i) for name in ("tab20b", "tab20c") for i in range(20)]
    return [c for i, c in enumerate(palette) if i % 4 != 3]  # the palest shade reads as no bar


def _hashed(gpu: str, palette: list, shift: int = 0):
    return palette[(zlib.crc32(gpu.encode()) + shift) % len(palette)]  # not hash(): salted per process


def use_colours(gpus: Sequence[str]) -> None:
    """Fix one colour per gpu for every chart of one comparison, none shared: the profiles' own,
    and each other gpu its name's hash's, or, where a gpu before it in name order took that one,
    the next free one. The same gpus get the same colours in every comparison."""
    palette = _palette()
    _CHOSEN.clear()
    taken: set = set()
    for gpu in sorted(set(gpus)):
        if gpu in PROFILE_COLOURS:
            _CHOSEN[gpu] = PROFILE_COLOURS[gpu]
            continue
        ring = [_hashed(gpu, palette, shift) for shift in range(len(palette))]
        _CHOSEN[gpu] = next((c for c in ring if c not in taken), ring[0])  # none free: its hash's own
        taken.add(_CHOSEN[gpu])


def gpu_colour(gpu: str):
    """The comparison's colour of the gpu (use_colours); else the profile's, else its hash's."""
    return _CHOSEN.get(gpu) or PROFILE_COLOURS.get(gpu) or _hashed(gpu, _palette())


def figure(width_in: float, height_in: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(width_in, height_in), layout="constrained")


def title(fig, what: str, detail: str = "", page: tuple[int, int] = (1, 1)) -> None:
    """What the chart shows on its first line; the details (model, baseline...) and page on the second."""
    number_of = f"page {page[0]} of {page[1]}" if page[1] > 1 else ""
    second = "; ".join(part for part in (detail, number_of) if part)
    # wrapped to the figure: a one-panel chart is narrower than its explanation
    width = max(20, int(fig.get_figwidth() * 72 / (TITLE_PT * CHAR_EM) * TITLE_SHARE))
    lines = [line for part in (what, second) if part for line in textwrap.wrap(part, width)]
    fig.suptitle("\n".join(lines), fontsize=TITLE_PT, x=0.02, ha="left")


def legend(fig, handles: list) -> None:
    """One legend for the whole figure, outside every axes: never over data or a title."""
    if handles:
        fig.legend(handles=handles, loc="outside right upper", fontsize="small")


def save(fig, stem: Path, page: tuple[int, int] = (1, 1), dpi: int = DPI) -> Path:
    """The chart as stem.png, or stem_pN.png where it has pages, its bar labels inside their panels."""
    keep_labels_inside(fig)
    path = stem.parent / page_name(stem.name, *page)
    fig.savefig(path, dpi=dpi)
    return path


def hatch(source: str) -> str:
    """Measured bars are plain, published ones hatched, projected ones dotted."""
    return "" if source == MEASURED else PROJECTED_HATCH if source == PROJECTED else PUBLISHED_HATCH


def source_handles(sources) -> list:
    """The legend's entries for the kinds of figure other than measured that a chart holds."""
    from matplotlib.patches import Patch

    kinds = {("projected" if s == PROJECTED else "published", hatch(s)) for s in sources if s != MEASURED}
    return [Patch(facecolor="lightgrey", hatch=h, edgecolor="white", label=f"{kind} figure")
            for kind, h in sorted(kinds)]


def pages(heights: Sequence[float], budget_in: float = PAGE_IN) -> list[range]:
    """Consecutive rows of a grid, each page at most `budget_in` tall (a taller row alone)."""
    starts, used = [], 0.0
    for i, height in enumerate(heights):
        if not starts or used + height > budget_in:
            starts.append(i)
            used = 0.0
        used += height
    return [range(a, b) for a, b in pairwise([*starts, len(heights)])]


def page_name(stem: str, page: int, n_pages: int) -> str:
    return f"{stem}.png" if n_pages == 1 else f"{stem}_p{page}.png"


def axis_end(values: Sequence[float], outliers: Sequence[bool] | None = None) -> float:
    """Where a bar axis ends: past the largest value that is not an outlier (a figure no hardware
    can produce would squash every other bar to nothing; it is drawn to the edge and written)."""
    outliers = outliers or [False] * len(values)
    kept = [v for v, out in zip(values, outliers, strict=True) if not out] or list(values)
    return max(kept, default=1.0) * 1.18 or 1.0


def bar_values(ax, drawn, values: Sequence[float], texts: Sequence[str], end: float) -> None:
    """Write each bar's value beside it; one too short to see says so, one beyond the axis is cut
    at its edge and says so (keep_labels_inside moves a label that would leave its panel)."""
    for bar, value, text in zip(drawn, values, texts, strict=True):
        y = bar.get_y() + bar.get_height() / 2
        if value > end:
            bar.set_width(end)
            text, x, offset, align = f"{text} (beyond the axis)", end, -3, "right"
        else:
            text = f"{text} (too short to draw)" if 0 < value < TOO_SHORT * end else text
            x, offset, align = value, 3, "left"
        label = ax.annotate(text, (x, y), xytext=(offset, 0), textcoords="offset points", ha=align,
                            va="center", fontsize="small", bbox=LABEL_BOX)  # fmt: skip
        label.bar_end = min(value, end)


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
    return [
        [v - s[0] if s else 0.0 for v, s in zip(values, spans, strict=True)],
        [s[1] - v if s else 0.0 for v, s in zip(values, spans, strict=True)],
    ]
