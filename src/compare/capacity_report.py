"""The speed/capacity split written out: its CSVs, report.md's section, the console's table.

Every figure is shown with its 95% interval (src/compare/capacity.py); one whose interval holds
1.0 is marked, as every ratio of compare is: on one card under two caps the iso-batch ratio is
about 1 by construction, and the interval says whether its distance from 1 is more than noise.
"""

from __future__ import annotations

from src.compare import report
from src.compare.capacity import FIGURES, MEANING, SplitMean, SplitRow
from src.compare.ratio import NO_DIFFERENCE
from src.console import gpus

CSV, MEANS_CSV = "capacity_split.csv", "capacity_split_categories.csv"  # the speed/capacity split
NONE_TEXT = {
    "iso_ratio": "no common batch",
    "max_ratio": "a card has no run",
    "capacity_factor": "",
    "published_ratio": "none published",
}
_INTERVAL_COLUMNS = tuple(c for f in FIGURES for c in (f, f"{f}_low", f"{f}_high"))
COLUMNS = (
    "model", "category", "precision", "gpu_count", "card", "baseline_card", "iso_batch", "max_batch",
    "baseline_max_batch", *_INTERVAL_COLUMNS, "interval", "difference", "stack_differs", "setting_differs",
    "published_batch", "published_baseline_batch", "published_ratio",
)  # fmt: skip
MEAN_COLUMNS = (
    "category", "precision_group", "gpu_count", "card", "baseline_card", *_INTERVAL_COLUMNS, "interval",
    "difference", "stack_differs", "setting_differs", "models",
)  # fmt: skip
FLAGS = ("stack_differs", "setting_differs")  # the two cards' points unlike in more than the card
LABELS = {  # what each figure is called where a person reads it
    "iso_ratio": "speed (iso-batch)",
    "max_ratio": "speed x capacity (max-batch)",
    "capacity_factor": "capacity factor",
}


def _figures(split: SplitRow | SplitMean) -> dict:
    """Each figure, its interval's ends, what they rest on, and which hold 1.0."""
    record = {}
    for figure, r in split.figures.items():
        low, high = (r and r.interval) or (None, None)
        record |= {figure: r.value if r else None, f"{figure}_low": low, f"{figure}_high": high}
    held = [MEANING[f] for f, r in split.figures.items() if r and r.no_difference]
    record["interval"] = _basis_text(split)
    record["difference"] = f"{', '.join(held)}: {NO_DIFFERENCE}" if held else ""
    return record | _flags(split)


def _flags(split: SplitRow | SplitMean) -> dict:
    """What differs between the two cards' points beside the card: their stacks, their settings."""
    return {
        flag: "; ".join(sorted({getattr(r, flag) for r in split.figures.values() if r and getattr(r, flag)}))
        for flag in FLAGS
    }


def records(rows: list[SplitRow]) -> list[dict]:
    derived = _INTERVAL_COLUMNS + ("interval", "difference", *FLAGS)
    return [{c: getattr(r, c) for c in COLUMNS if c not in derived} | _figures(r) for r in rows]


def mean_records(means: list[SplitMean]) -> list[dict]:
    return [
        {"category": m.category, "precision_group": m.precision_group, "gpu_count": m.gpu_count,
         "card": m.members[0].card, "baseline_card": m.members[0].baseline_card,
         "models": " ".join(m.models)} | _figures(m)
        for m in means
    ]  # fmt: skip


def _basis_text(split: SplitRow | SplitMean) -> str:
    """What the intervals rest on: one text where every figure's is the same, else each figure's,
    `speed: repeats; capacity: ...`."""
    texts = {MEANING[f]: r.basis() for f, r in split.figures.items() if r}
    if len(set(texts.values())) <= 1:
        return next(iter(texts.values()), "")
    return "; ".join(f"{meaning}: {text}" for meaning, text in texts.items())


def figure_text(split: SplitRow | SplitMean, figure: str) -> str:
    """`1.10x [1.08-1.13]`: the figure and its 95% interval, or the figure alone when it has none."""
    r = split.figures[figure]
    if r is None:
        return NONE_TEXT[figure]
    interval = r.interval
    return f"{r.value:.2f}x" + (f" [{interval[0]:.2f}-{interval[1]:.2f}]" if interval else "")


def sentence(rows: list[SplitRow], means: list[SplitMean]) -> str:
    """The split in one sentence for report.md."""
    pair = f"Speed and capacity ({rows[0].card} vs {rows[0].baseline_card})"
    if not means:
        return f"{pair}: no model has both the iso-batch and the max-batch pair yet; the runs to add are listed below."
    parts = []
    for m in means:
        held = [MEANING[f] for f, r in m.figures.items() if r and r.no_difference]
        parts.append(
            f"{m.category} {m.precision_group} x{m.gpu_count}: {figure_text(m, 'max_ratio')} at each card's "
            f"largest batch = {figure_text(m, 'iso_ratio')} speed at the same batch x "
            f"{figure_text(m, 'capacity_factor')} capacity"
            + (f" ({', '.join(held)}: {NO_DIFFERENCE})" if held else "")
        )
    return f"{pair}, 95% intervals in brackets: " + "; ".join(parts) + "."


def markdown(rows: list[SplitRow], means: list[SplitMean], missing: list[str]) -> list[str]:
    """report.md's section: the sentence, the category means, the models, the runs to add."""
    lines = [sentence(rows, means)]
    figures = {LABELS[f]: f for f in FIGURES}
    if means:
        lines += ["", f"Category means ({MEANS_CSV}):", ""]
        lines += report.markdown_table(
            [{"category": m.category, "precision": m.precision_group, "GPUs": m.gpu_count,
              **{label: figure_text(m, f) for label, f in figures.items()}, **_basis(m),
              "models": ", ".join(m.models)} for m in means],
            ("category", "precision", "GPUs", *figures, "interval", "difference", "models"),
        )  # fmt: skip
    lines += ["", f"Per model ({CSV}; brackets: 95% intervals):", ""]
    lines += report.markdown_table(
        [{"model": r.model, "precision": r.precision, "GPUs": r.gpu_count, "iso batch": r.iso_batch,
          "max batches": _pair(r.max_batch, r.baseline_max_batch),
          **{label: figure_text(r, f) for label, f in figures.items()}, **_basis(r),
          "Lambda batches": _pair(r.published_batch, r.published_baseline_batch),
          "Lambda ratio": NONE_TEXT["published_ratio"] if r.published_ratio is None
          else f"{r.published_ratio:.2f}x"} for r in rows],
        ("model", "precision", "GPUs", "iso batch", "max batches", *figures, "interval", "difference",
         "Lambda batches", "Lambda ratio"),
    )  # fmt: skip
    return lines + ["", *[f"- {line}" for line in missing]] if missing else lines


def _basis(split: SplitRow | SplitMean) -> dict:
    """The interval's basis and, where the two cards' points differ in more than the card, the flags."""
    flags = "; ".join(f"{flag}: {text}" for flag, text in _flags(split).items() if text)
    basis = {k: v for k, v in _figures(split).items() if k in ("interval", "difference")}
    return basis | {"difference": "; ".join(t for t in (basis["difference"], flags) if t)}


def _pair(one, other) -> str:
    return f"{'-' if one is None else one} / {'-' if other is None else other}"


def print_table(rows: list[SplitRow], means: list[SplitMean]) -> None:
    """The split in an 80-column terminal or a piped log: a section per model and per category
    mean, a line per figure with its 95% interval (`=` where it holds 1.0)."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    from src.console import console, note

    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1))
    table.add_column("model, precision, GPUs / figure", no_wrap=True)
    for header in ("ratio", "95% CI", "batches"):
        table.add_column(header, justify="right", no_wrap=True)
    marks = []
    sections = [(f"{r.model}, {r.precision}, {gpus(r.gpu_count)}", r, "", _batches(r)) for r in rows]
    sections += [
        (f"mean: {m.category}, {m.precision_group}, {gpus(m.gpu_count)}", m,
         f"{len(m.models)} model{'s' if len(m.models) > 1 else ''}", {})
        for m in means
    ]  # fmt: skip
    for title, split, count, batches in sections:
        table.add_row(f"[bold]{escape(title)}[/]", "", "", count)
        for figure in FIGURES:
            r = split.figures[figure]
            interval = report.interval_text(r.interval) if r else ""
            marks.append(interval)
            ratio = report.console_ratio(r.value) if r else "-"
            table.add_row(f"  {LABELS[figure]}", ratio, interval, batches.get(figure, ""))
    note(f"Speed and capacity: {rows[0].card} against {rows[0].baseline_card} ({CSV})")
    console.print(table)
    if any(text.endswith("=") for text in marks):
        console.print("  = the interval holds 1.0: no measurable difference")
    for title, split, _, _ in sections:
        for flag, text in _flags(split).items():
            if text:
                console.print(f"  {flag}: {escape(title)}: {escape(text)}", soft_wrap=True)


def _batches(r: SplitRow) -> dict:
    return {"iso_ratio": "-" if r.iso_batch is None else str(r.iso_batch),
            "max_ratio": _pair(r.max_batch, r.baseline_max_batch)}  # fmt: skip
