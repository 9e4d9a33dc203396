"""The speed/capacity split's charts: the ratios per model with their 95% intervals, and memory
as a curve (throughput against per-GPU batch, a line per card)."""

from __future__ import annotations

from pathlib import Path

from src.compare import intervals, style
from src.compare.capacity import FIGURES, SplitRow, by_batch
from src.compare.capacity_report import NONE_TEXT, figure_text
from src.compare.runs import Measurement

CURVE_STEM, SPLIT_STEM = "memory_curve", "capacity_split"


def split_chart(rows: list[SplitRow], out: Path) -> list[Path]:
    """Per model and precision: the iso-batch, max-batch and published ratios side by side, the
    measured two with their 95% intervals as whiskers and in their labels."""
    shown = [r for r in rows if r.figures["iso_ratio"] or r.figures["max_ratio"]]
    if not shown:
        return []
    fig = style.figure(8, 1.5 + 0.6 * len(shown))
    ax = fig.add_subplot()
    series = (("iso-batch (speed)", "iso_ratio"), ("max-batch (speed x capacity)", "max_ratio"),
              ("published (max-batch)", "published_ratio"))  # fmt: skip
    height = 0.8 / len(series)
    ends, flagged = [1.0], False
    for i, (name, figure) in enumerate(series):
        ys = [n + i * height for n in range(len(shown))]
        values = [_value(r, figure) or 0.0 for r in shown]
        spans = [r.figures[figure] and r.figures[figure].interval if figure in FIGURES else None for r in shown]
        bars = ax.barh(ys, values, height=height, label=name, xerr=style.whiskers(values, spans),
                       error_kw={"elinewidth": 1, "capsize": 2, "ecolor": "dimgrey"})  # fmt: skip
        for bar, r, value, span in zip(bars, shown, values, spans, strict=True):
            text = figure_text(r, figure) if figure in FIGURES else (
                f"{value:.2f}x" if r.published_ratio is not None else NONE_TEXT[figure])  # fmt: skip
            if figure in FIGURES and intervals.holds_one(span):
                text += " ~1"
            if figure == "max_ratio" and (factor := r.figures["capacity_factor"]):
                held = factor.no_difference
                text += f";  capacity {figure_text(r, 'capacity_factor')}" + (" ~1" if held else "")
            if figure in FIGURES and r.figures[figure] and (flags := r.figures[figure].flags):
                text += f"  ! {' '.join(flags)}"  # as the GPU ratios' charts mark a flagged figure
                flagged = True
            end = span[1] if span else value
            ends.append(end)
            ax.text(end, bar.get_y() + height / 2, " " + text, va="center", fontsize="small")
    ax.set_yticks([n + height for n in range(len(shown))])
    ax.set_yticklabels([f"{r.model} {r.precision} x{r.gpu_count}" for r in shown])
    ax.invert_yaxis()
    ax.axvline(1.0, color="grey", linewidth=0.8)
    ax.set_xlim(0, max(ends) * (2.2 if flagged else 1.6))  # room for the labels beside the bars
    ax.set_xlabel(f"throughput of {shown[0].card} / {shown[0].baseline_card}")
    style.title(fig, f"Speed and capacity: {shown[0].card} vs {shown[0].baseline_card}",
                "whiskers and brackets: 95% interval; ~1: it holds 1.0 (no measurable difference)")  # fmt: skip
    fig.legend(loc="outside lower center", ncols=3, fontsize="small")
    path = out / f"{SPLIT_STEM}.png"
    fig.savefig(path, dpi=110)
    return [path]


def _lines(card: str, at: dict[int, list[Measurement]]) -> dict[str, dict[int, Measurement]]:
    """A card's points as lines, one per software stack it was measured on (named where more than
    one), so that no line joins points of two stacks."""
    stacks: dict[tuple, dict[int, Measurement]] = {}
    for batch, found in at.items():
        for m in found:
            stacks.setdefault(tuple(m.software.items()), {})[batch] = m
    if len(stacks) == 1:
        return {card: next(iter(stacks.values()))}
    varying = {k for k in {k for s in stacks for k, _ in s} if len({dict(s).get(k) for s in stacks}) > 1}
    return {f"{card} {' '.join(f'{k}={v}' for k, v in s if k in varying)}": b for s, b in stacks.items()}


def _value(row: SplitRow, figure: str) -> float | None:
    if figure == "published_ratio":
        return row.published_ratio
    return row.figures[figure].value if row.figures[figure] else None


def curve_chart(measurements: list[Measurement], out: Path) -> list[Path]:
    """Per model and precision on one GPU: throughput against per-GPU batch, a line per card (a
    cap per memory size asked), whiskers the points' 95% intervals; only where a card ran two
    batches or more."""
    series: dict[tuple, dict[str, dict[int, Measurement]]] = {}
    for (model, precision, count), cards in by_batch(measurements).items():
        if count == 1:
            kept = {line: b for card, at in cards.items() for line, b in _lines(card, at).items() if len(b) > 1}
            if kept:
                series[(model, precision)] = kept
    if not series:
        return []
    fig = style.figure(8, 3.2 * len(series))
    for n, ((model, precision), cards) in enumerate(sorted(series.items())):
        ax = fig.add_subplot(len(series), 1, n + 1)
        ticks: set[int] = set()
        for card, at in sorted(cards.items()):
            batches = sorted(at)
            values = [at[b].throughput for b in batches]
            spans = [at[b].interval for b in batches]
            line = ax.errorbar(
                batches, values, yerr=style.whiskers(values, spans), marker="o", capsize=2, label=card
            )
            ax.annotate(f"largest run: {batches[-1]}", (batches[-1], values[-1]),
                        xytext=(0, -14), textcoords="offset points", ha="right",
                        color=line[0].get_color(), fontsize="small")  # fmt: skip
            ticks.update(batches)
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(ticks), [str(b) for b in sorted(ticks)])
        ax.minorticks_off()
        ax.set_xlabel("per-GPU batch")
        ax.set_ylabel(next(iter(next(iter(cards.values())).values())).unit)
        ax.set_title(f"{model} {precision}, 1 GPU", loc="left", fontsize="medium")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize="small", title="card (gpu@cap GB)")
    style.title(fig, "Throughput against per-GPU batch",
                "where does more memory stop paying? whiskers: 95% interval of each point")  # fmt: skip
    path = out / f"{CURVE_STEM}.png"
    fig.savefig(path, dpi=110)
    return [path]
