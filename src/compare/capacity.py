"""The split of a ratio into speed and capacity (`capacity_split=[A,B]`), with 95% intervals.

A card is a gpu profile, or one under a memory cap (`h200@24`: gpu=h200 gpu.memory_limit_gb=24).
For cards A and B and one model, precision and GPU count:
- iso-batch ratio: A / B at the same per-GPU batch (the largest both ran): speed alone;
- max-batch ratio: A / B, each at the largest batch it ran (batch_size=auto makes that the largest
  that fits): speed and capacity together, what a published memory-sized ratio is;
- capacity factor: max-batch ratio / iso-batch ratio, what A's extra memory is worth on its own.
The factor's two ratios usually share a point (the smaller card's largest batch is the iso batch):
it is netted, so that it cancels instead of widening the interval twice. Beside the split: the
published figures of the profiles whose memory each card has: their ratio and per-GPU batches.
On one card under two caps the iso-batch ratio is about 1 by construction; its interval says
whether it is more than noise.
"""

from __future__ import annotations

import functools
import itertools

from src.compare import charts
from src.compare.ratio import NO_DIFFERENCE, carried_flags, describe, mean, quotient
from src.compare.report import Section, Table, ratio_columns, ratio_text
from src.compare.runs import CAP_KEY, MEASURED, differing, grouped, precision_group, unlike
from src.config import points
from src.results import recorded
from src.results.logged_spec import positive_number

CSV, MEANS_CSV = "capacity_split.csv", "capacity_split_categories.csv"
FIGURES = {
    "iso_ratio": "speed",
    "max_ratio": "speed x capacity",
    "capacity_factor": "capacity",
}  # what each is
SPLIT = (
    *(c for f in FIGURES for c in ratio_columns(f)),
    "interval",
    "difference",
    "stack_differs",
    "setting_differs",
)
COLUMNS = (
    *("model", "category", "precision", "gpu_count", "card", "baseline_card", "iso_batch", "max_batch"),
    *("baseline_max_batch", *SPLIT, "published_batch", "published_baseline_batch", "published_ratio"),
)
MEAN_COLUMNS = ("category", "precision_group", "gpu_count", "card", "baseline_card", *SPLIT, "models")


def by_batch(measurements):
    """(model, precision, gpu_count) -> card -> batch -> this project's points, one per stack and setting."""
    table: dict = {}
    for m in measurements:
        cap, batch = (dict(m.config).get(key) for key in (CAP_KEY, points.RAN_BATCH))
        if m.source == MEASURED and batch not in (None, "None", "auto"):
            card = f"{m.gpu}@{float(cap):g}" if cap not in (None, "None") else m.gpu
            cards = table.setdefault((m.model, m.precision, m.gpu_count), {})
            cards.setdefault(card, {}).setdefault(int(batch), []).append(m)
    return table


def pair(ours, theirs):
    """One card's point over the other's at a batch: the two alike but for the card (the gpu, its
    cap) where such a pair exists, else the closest, flagged with what differs: settings first,
    then the stack, then the more repeats. One gpu under two caps is one card: its detected name
    and power limit are held like the software (700 W against 450 W is another card)."""
    one_gpu = ours[0].gpu == theirs[0].gpu
    stack = ("software", "card") if one_gpu else ("software",)
    free = ("side", "gpu", "cap", "batch") if one_gpu else ("side", "gpu", "cap", "batch", "card")

    def rank(two):
        a, b = two
        return (unlike(a, b, free, ("setting", stack)), -a.n_runs - b.n_runs)

    a, b = min(itertools.product(ours, theirs), key=rank)
    return quotient(a, b, stack_differs=differing(a, b, stack), setting_differs=differing(a, b, ("setting",)))


def _split(iso, largest):
    """The figures of a split and its notes: what their intervals rest on (one text where all agree,
    else each's: `speed: repeats; capacity: ...`), which hold 1.0, what differs beside the card."""
    factor = iso and largest and quotient(largest, iso, **carried_flags([iso, largest]))
    figures = {"iso_ratio": iso, "max_ratio": largest, "capacity_factor": factor}
    measured = {FIGURES[f]: r for f, r in figures.items() if r}
    bases = {meaning: describe(r.spread) for meaning, r in measured.items()}
    held = [meaning for meaning, r in measured.items() if r.no_difference]
    texts = set(bases.values())
    interval = texts.pop() if len(texts) == 1 else "; ".join(f"{m}: {text}" for m, text in bases.items())
    difference = f"{', '.join(held)}: {NO_DIFFERENCE}" if held else ""
    return figures | carried_flags(measured.values()) | {"interval": interval, "difference": difference}


def split(measurements, cards):
    """The split of card cards[0] against cards[1] for every model either ran, and the runs missing."""
    card, baseline = cards
    rows, missing = [], []
    published = [
        m for m in measurements if m.source not in (MEASURED, recorded.PROJECTED)
    ]  # projected: no one's
    stand_ins = [stands_for(published, c) for c in cards]
    for (model, precision, count), batches in sorted(by_batch(measurements).items()):
        a, b = batches.get(card, {}), batches.get(baseline, {})
        if not a and not b:
            continue
        lacking = [name for name, have in ((card, a), (baseline, b)) if not have]
        missing += [_command(name, model, precision, count, "auto", "its largest batch") for name in lacking]
        iso = max(set(a) & set(b), default=None)
        if a and b and iso is None:
            smaller = min(max(a), max(b))
            lacking = card if smaller not in a else baseline
            missing.append(_command(lacking, model, precision, count, smaller, "the iso-batch point"))
        largest, baseline_largest = max(a, default=None), max(b, default=None)
        category = next(iter((a or b).values()))[0].category
        rows.append(
            {"model": model, "category": category, "precision": precision, "gpu_count": count, "card": card}
            | {
                "baseline_card": baseline,
                "iso_batch": iso,
                "max_batch": largest,
                "baseline_max_batch": baseline_largest,
            }
            | _split(
                pair(a[iso], b[iso]) if iso else None,
                pair(a[largest], b[baseline_largest]) if a and b else None,
            )
            | _published(published, stand_ins, model, precision, count)
        )
    return rows, missing


def category_means(rows):
    """Per (category, precision group, GPU count): the means over the models that have both ratios; a
    point two models' ratios share counts once."""
    groups = grouped(
        ((r["category"], precision_group(r["precision"]), r["gpu_count"], r["card"], r["baseline_card"]), r)
        for r in rows
        if r["iso_ratio"] and r["max_ratio"]
    )
    return [
        dict(zip(MEAN_COLUMNS[:5], key, strict=True))
        | _split(*(mean([r[f] for r in members], independent=False) for f in ("iso_ratio", "max_ratio")))
        | {"models": " ".join(r["model"] for r in members)}
        for key, members in sorted(groups.items())
    ]


def is_card(card):
    """gpu, or gpu@<memory_limit_gb> with a number of GB above 0."""
    gpu, at, cap = str(card).partition("@")
    try:
        return bool(gpu) and (not at or 0 < float(cap) < float("inf"))
    except ValueError:
        return False


def _command(card, model, precision, count, batch, why):
    gpu, _, cap = card.partition("@")
    more = (f" gpu.count={count}" if count > 1 else "") + (f" {CAP_KEY}={cap}" if cap else "")
    return (
        f"capacity_split: {card} has no {model} {precision} x{count} run at batch {batch} ({why}); run: "
        f"python -m src.train gpu={gpu}{more} model={model} precision={precision} model.batch_size={batch}"
    )


def stands_for(published, card):
    """The published profile a card stands for, that of its memory: a capped card's is the profile whose
    `gpu.memory_gb` is its cap (h200@24 -> rtx3090), an uncapped card's is itself."""
    gpu, _, cap = card.partition("@")
    same = sorted({m.gpu for m in published if cap and m.spec.memory_gb == float(cap)})
    return same[0] if same else gpu


def _published(points, gpus, model, precision, count):
    """Beside a row: the per-GPU batch each card's profile was published at (its 1-GPU figures), and
    their published ratio at the row's GPU count."""

    def at(gpu, n):
        key = (gpu, model, precision_group(precision), n)
        return [m for m in points if (m.gpu, m.model, m.precision_group, m.gpu_count) == key]

    def batch(gpu):
        logged = (positive_number(m.runs[0].result.tags.get(recorded.PUBLISHED_BATCH)) for m in at(gpu, 1))
        return next((int(b) for b in logged if b), None)

    ours, theirs = (at(gpu, count) for gpu in gpus)
    return {
        "published_batch": batch(gpus[0]),
        "published_baseline_batch": batch(gpus[1]),
        "published_ratio": quotient(ours[-1], theirs[-1]).value if ours and theirs else None,
    }


def section(measurements, cards):
    """capacity_split=[A,B]: the split's rows and means, or the runs it lacks with their commands."""
    if not cards:
        return []
    rows, missing = split(measurements, cards)
    if not rows:
        missing.insert(0, f"capacity_split: neither {cards[0]} nor {cards[1]} has a run with a batch size")
        return [Section("Speed and capacity", [f"- {line}" for line in missing], warnings=missing[:1])]
    pair = f"{rows[0]['card']} against {rows[0]['baseline_card']}"
    means = category_means(rows)
    lines = [f"- {sentence(m)}." for m in means] or [
        "- No model has both the iso-batch and the max-batch pair yet; the runs to add are listed below."
    ]
    model, category, shown = ("model", "precision", "gpu_count"), MEAN_COLUMNS[:3], (*FIGURES, "interval")
    title = f"Speed and capacity, {pair}: category means"
    tables = [
        Table(means, MEAN_COLUMNS, MEANS_CSV, (*category, *shown, "models"), (*category, *FIGURES), 3, title),
        Table(
            rows,
            COLUMNS,
            CSV,
            (*model, *COLUMNS[6:9], *shown, *COLUMNS[-3:]),
            (*model, *FIGURES),
            3,
            "per model",
        ),
    ]
    warnings = [f"capacity_split: {len(missing)} run(s) to add; report.md (Speed and capacity) names each"]
    return [
        Section(
            f"Speed and capacity: {pair}",
            lines + [f"- {line}" for line in missing],
            tables,
            warnings=warnings if missing else [],
            draw=functools.partial(charts.capacity, rows),
        )
    ]


def sentence(m):
    """A category's split in words: `1.65x [1.61-1.69] at each card's largest batch = ...`."""
    iso, largest, factor = (ratio_text(m[f].value, m[f].interval) for f in FIGURES)
    said = (
        f"{m['category']} {m['precision_group']} x{m['gpu_count']}: {largest} at each card's largest batch = "
    )
    return said + f"{iso} speed at the same batch x {factor} capacity"
