"""The speed/capacity split written out: its CSVs, report.md's section, the console's table, charts.
Every figure comes with its 95% interval, marked where it holds 1.0: on one card under two caps the
iso-batch ratio is about 1 by construction, and the interval says whether it is more than noise."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

from src.compare import report, style
from src.compare.capacity import FIGURES, SplitMean, SplitRow, by_batch
from src.compare.ratio import NO_DIFFERENCE, SETTING_DIFFERS, STACK_DIFFERS, carried_flags, columns, holds_one
from src.compare.runs import Measurement
from src.console import gpus

CSV, MEANS_CSV = "capacity_split.csv", "capacity_split_categories.csv"  # the speed/capacity split
WORDS = {  # per figure: what it measures (for "no measurable difference"), its name, its text without runs
    "iso_ratio": ("speed", "speed (iso-batch)", "no common batch"),
    "max_ratio": ("speed x capacity", "speed x capacity (max-batch)", "a card has no run"),
    "capacity_factor": ("capacity", "capacity factor", ""),
}
MEANING, LABELS, NONE_TEXT = ({figure: words[i] for figure, words in WORDS.items()} for i in range(3))
NONE_TEXT["published_ratio"] = "none published"
FLAGS = (STACK_DIFFERS, SETTING_DIFFERS)  # the two cards' points unlike in more than the card
# the CSVs' columns: a split's fields in order, in place of `figures` its figures (interval's ends too), notes
_FIGURE_COLUMNS = (*(c for f in FIGURES for c in columns(f, None)), "interval", "difference", *FLAGS)
COLUMNS, MEAN_COLUMNS = (
    tuple(c for f in fields(kind) for c in (_FIGURE_COLUMNS if f.name == "figures" else [f.name]))
    for kind in (SplitRow, SplitMean)
)
SERIES = {  # the split chart's bars, per model
    "iso-batch (speed)": "iso_ratio",
    "max-batch (speed x capacity)": "max_ratio",
    "published (max-batch)": "published_ratio",
}


def _notes(split: SplitRow | SplitMean) -> dict:
    """What the intervals rest on (one text where all agree, else each's: `speed: repeats; capacity: ...`),
    which figures hold 1.0, and what differs between the two cards' points beside the card."""
    measured = {MEANING[f]: r for f, r in split.figures.items() if r}
    bases = {meaning: r.basis() for meaning, r in measured.items()}
    each = "; ".join(f"{meaning}: {text}" for meaning, text in bases.items())
    held = [meaning for meaning, r in measured.items() if r.no_difference]
    return {
        "interval": each if len(set(bases.values())) > 1 else "".join(set(bases.values())),
        "difference": f"{', '.join(held)}: {NO_DIFFERENCE}" if held else "",
    } | {flag: text for flag, text in carried_flags(measured.values()).items() if flag in FLAGS}


def records(splits: list[SplitRow] | list[SplitMean]) -> list[dict]:
    """CSV rows: a split's own fields (a mean's models joined), its figures with their intervals' ends, notes."""
    return [
        {f.name: getattr(split, f.name) for f in fields(split) if f.name != "figures"}
        | ({"models": " ".join(split.models)} if isinstance(split, SplitMean) else {})
        | {k: v for figure, r in split.figures.items() for k, v in columns(figure, r).items()}
        | _notes(split)
        for split in splits
    ]


def _figure(split: SplitRow | SplitMean, figure: str) -> tuple[float | None, tuple[float, float] | None]:
    """A figure's value and 95% interval; (None, None) where the runs lack it."""
    r = split.figures.get(figure)
    published = split.published_ratio if figure == "published_ratio" else None  # a number, no interval
    return (r.value, r.interval) if r else (published, None)


def figure_text(split: SplitRow | SplitMean, figure: str, mark: str = "") -> str:
    """`1.10x [1.08-1.13]`: the figure and its 95% interval where it has one, then `mark` if that holds 1.0."""
    value, interval = _figure(split, figure)
    if value is None:
        return NONE_TEXT[figure]
    text = f"{value:.2f}x" + (f" [{interval[0]:.2f}-{interval[1]:.2f}]" if interval else "")
    return text + (mark if holds_one(interval) else "")


def sentence(rows: list[SplitRow], means: list[SplitMean]) -> str:
    """The split in one sentence for report.md."""
    pair = f"Speed and capacity ({rows[0].card} vs {rows[0].baseline_card})"
    if not means:
        line = "no model has both the iso-batch and the max-batch pair yet; the runs to add are listed below"
        return f"{pair}: {line}."
    parts = [
        f"{m.category} {m.precision_group} x{m.gpu_count}: {figure_text(m, 'max_ratio')} at each card's "
        f"largest batch = {figure_text(m, 'iso_ratio')} speed at the same batch x "
        f"{figure_text(m, 'capacity_factor')} capacity" + (f" ({held})" if held else "")
        for m, held in ((m, _notes(m)["difference"]) for m in means)
    ]
    return f"{pair}, 95% intervals in brackets: " + "; ".join(parts) + "."


def _shown(split: SplitRow | SplitMean) -> dict:
    """The figures as read, the intervals' basis, and what holds 1.0 or differs beside the card."""
    notes = _notes(split)
    differs = [notes["difference"]] + [f"{flag}: {notes[flag]}" for flag in FLAGS if notes[flag]]
    shown = {LABELS[f]: figure_text(split, f) for f in FIGURES}
    return shown | {"interval": notes["interval"], "difference": "; ".join(filter(None, differs))}


def markdown(rows: list[SplitRow], means: list[SplitMean], missing: list[str]) -> list[str]:
    """report.md's section: the sentence, the category means, the models, the runs to add."""
    lines = [sentence(rows, means)]
    if means:
        cells = [{"category": m.category, "precision": m.precision_group, "GPUs": m.gpu_count, **_shown(m),
                  "models": ", ".join(m.models)} for m in means]  # fmt: skip
        lines += ["", f"Category means ({MEANS_CSV}):", "", *report.markdown_table(cells, tuple(cells[0]))]
    cells = [
        {"model": r.model, "precision": r.precision, "GPUs": r.gpu_count, "iso batch": r.iso_batch,
         "max batches": _batches(r.max_batch, r.baseline_max_batch), **_shown(r),
         "Lambda batches": _batches(r.published_batch, r.published_baseline_batch),
         "Lambda ratio": figure_text(r, "published_ratio")}
        for r in rows
    ]  # fmt: skip
    lines += ["", f"Per model ({CSV}; brackets: 95% intervals):", ""]
    lines += report.markdown_table(cells, tuple(cells[0]))
    return lines + ["", *[f"- {line}" for line in missing]] if missing else lines


def _batches(*batches: int | None) -> str:
    return " / ".join("-" if b is None else str(b) for b in batches)


def print_table(rows: list[SplitRow], means: list[SplitMean]) -> None:
    """The split in an 80-column terminal or a piped log: a section per model and per category mean."""
    from rich.markup import escape

    from src.console import note

    sections, whole = {}, []
    for split in [*rows, *means]:
        if isinstance(split, SplitRow):
            title, count = f"{split.model}, {split.precision}, {gpus(split.gpu_count)}", ""
            batches = [_batches(split.iso_batch), _batches(split.max_batch, split.baseline_max_batch), ""]
        else:
            title = f"mean: {split.category}, {split.precision_group}, {gpus(split.gpu_count)}"
            count, batches = f"{len(split.models)} model{'s' if len(split.models) > 1 else ''}", [""] * 3
        lines = sections.setdefault((escape(title), "", "", count), [])
        for (figure, r), batch in zip(split.figures.items(), batches, strict=True):
            shown = (report.console_ratio(r.value), report.interval_text(r.interval)) if r else ("-", "")
            lines.append([f"  {LABELS[figure]}", *shown, batch])
        notes = _notes(split)
        whole += [f"{flag}: {escape(title)}: {escape(notes[flag])}" for flag in FLAGS if notes[flag]]
    note(f"Speed and capacity: {rows[0].card} against {rows[0].baseline_card} ({CSV})")
    head = ("model, precision, GPUs / figure", "ratio", "95% CI", "batches")
    report.print_table(head, sections, whole=whole, marked=2)


def split_chart(rows: list[SplitRow], out: Path) -> list[Path]:
    """Per model: its iso-batch, max-batch and published ratios side by side, whiskers their 95% intervals."""
    shown = [r for r in rows if r.figures["iso_ratio"] or r.figures["max_ratio"]]
    if not shown:
        return []
    fig = style.figure(8, 1.5 + 0.6 * len(shown))
    ax = fig.add_subplot()
    height, found = 0.8 / len(SERIES), {f: [_figure(r, f) for r in shown] for f in SERIES.values()}
    tops = [span[1] if span else value or 0.0 for figures in found.values() for value, span in figures]
    flagged = any((measured := r.figures.get(f)) and measured.flags for r in shown for f in SERIES.values())
    end = max(1.0, *tops) * (2.2 if flagged else 1.6)  # room for the labels beside the bars
    for i, (name, figure) in enumerate(SERIES.items()):
        values, spans = zip(*found[figure], strict=True)
        at, texts = [n + i * height for n in range(len(shown))], [_bar_text(r, figure) for r in shown]
        style.hbars(ax, values, texts, end, spans, at, height=height, color=f"C{i}", label=name)
    labels = [f"{r.model} {r.precision} x{r.gpu_count}" for r in shown]
    ax.set_yticks([n + height for n in range(len(shown))], labels)  # at each row's middle bar
    ax.axvline(1.0, color="grey", linewidth=0.8)
    ax.set_xlabel(f"throughput of {shown[0].card} / {shown[0].baseline_card}")
    what = f"Speed and capacity: {shown[0].card} vs {shown[0].baseline_card}"
    detail = "whiskers and brackets: 95% interval; ~1: it holds 1.0 (no measurable difference)"
    handles = ax.get_legend_handles_labels()[0]
    return [style.save(fig, out / "capacity_split", what, detail, handles, below=3)]


def _bar_text(r: SplitRow, figure: str) -> str:
    """A bar's label: its figure marked as the GPU ratios' charts mark one, max-batch's with its capacity."""
    text = figure_text(r, figure, style.HOLDS_ONE)
    if figure == "max_ratio" and r.figures["capacity_factor"]:
        text += f";  capacity {figure_text(r, 'capacity_factor', style.HOLDS_ONE)}"
    if (measured := r.figures.get(figure)) and measured.flags:
        text += f"  ! {' '.join(measured.flags)}"
    return text


def _lines(card: str, at: dict[int, list[Measurement]]) -> dict[str, dict[int, Measurement]]:
    """A card's points as lines, one per software stack (named where more than one): no line joins two."""
    stacks: dict[tuple, dict[int, Measurement]] = {}
    for batch, found in at.items():
        for m in found:
            stacks.setdefault(tuple(m.software.items()), {})[batch] = m
    varying = {k for s in stacks for k, v in s if any(dict(t).get(k) != v for t in stacks)}
    return {" ".join([card, *(f"{k}={v}" for k, v in s if k in varying)]): b for s, b in stacks.items()}


def curve_chart(measurements: list[Measurement], out: Path) -> list[Path]:
    """Per model and precision on one GPU: throughput against per-GPU batch, a line per card (a cap
    per memory size asked) that ran two batches or more, whiskers the points' 95% intervals."""
    series: dict[tuple, dict[str, dict[int, Measurement]]] = {}
    for (model, precision, count), cards in by_batch(measurements).items():
        lines = {line: b for card, at in cards.items() for line, b in _lines(card, at).items() if len(b) > 1}
        if count == 1 and lines:
            series[(model, precision)] = lines
    if not series:
        return []
    fig = style.figure(8, 3.2 * len(series))
    for n, ((model, precision), cards) in enumerate(sorted(series.items())):
        ax = fig.add_subplot(len(series), 1, n + 1)
        for card, at in sorted(cards.items()):
            batches = sorted(at)
            values = [at[b].throughput for b in batches]
            yerr = style.whiskers(values, [at[b].interval for b in batches])
            line = ax.errorbar(batches, values, yerr=yerr, marker="o", capsize=2, label=card)
            ax.annotate(f"largest run: {batches[-1]}", (batches[-1], values[-1]),
                        xytext=(0, -14), textcoords="offset points", ha="right",
                        color=line[0].get_color(), fontsize="small")  # fmt: skip
        ticks = sorted({b for at in cards.values() for b in at})
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks, [str(b) for b in ticks])
        ax.minorticks_off()
        unit = next(iter(next(iter(cards.values())).values())).unit
        ax.set(xlabel="per-GPU batch", ylabel=unit, ylim=(0, None))
        ax.set_title(f"{model} {precision}, 1 GPU", loc="left", fontsize="medium")
        ax.legend(fontsize="small", title="card (gpu@cap GB)")
    detail = "where does more memory stop paying? whiskers: 95% interval of each point"
    return [style.save(fig, out / "memory_curve", "Throughput against per-GPU batch", detail)]
