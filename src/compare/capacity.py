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
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from src import recorded
from src.compare.analysis import precision_group, setting_difference
from src.compare.ratio import Ratio, carried_flags, means, quotient, ratio
from src.compare.runs import MEASURED, Measurement, stack_difference
from src.config import points
from src.logged_spec import positive_number

CAP_KEY = "gpu.memory_limit_gb"
FIGURES = ("iso_ratio", "max_ratio", "capacity_factor")


@dataclass(frozen=True)
class SplitRow:
    model: str
    category: str
    precision: str
    gpu_count: int
    card: str
    baseline_card: str
    iso_batch: int | None
    max_batch: int | None
    baseline_max_batch: int | None
    figures: dict[str, Ratio | None] = field(repr=False)  # FIGURES -> the ratio, None without the runs
    published_batch: int | None = None
    published_baseline_batch: int | None = None
    published_ratio: float | None = None


@dataclass(frozen=True)
class SplitMean:
    """A category's split: the means of its models' iso and max-batch ratios, the factor of the means."""

    category: str
    precision_group: str
    gpu_count: int
    card: str
    baseline_card: str
    figures: dict[str, Ratio | None] = field(repr=False)
    models: tuple[str, ...]


def by_batch(measurements: list[Measurement]) -> dict[tuple, dict[str, dict[int, list[Measurement]]]]:
    """(model, precision, gpu_count) -> card -> batch -> this project's points, one per stack and setting."""
    table: dict = {}
    for m in measurements:
        cap, batch = (dict(m.config).get(key) for key in (CAP_KEY, points.RAN_BATCH))
        if m.source == MEASURED and batch not in (None, "None", "auto"):
            card = f"{m.gpu}@{float(cap):g}" if cap not in (None, "None") else m.gpu
            cards = table.setdefault((m.model, m.precision, m.gpu_count), {})
            cards.setdefault(card, {}).setdefault(int(batch), []).append(m)
    return table


def pair(ours: list[Measurement], theirs: list[Measurement]) -> Ratio:
    """One card's point over the other's at a batch: the two alike but for the card (the gpu, its
    cap) where such a pair exists, else the closest, flagged with what differs: settings first,
    then the software stack, then the more repeats."""

    def unlike(a: Measurement, b: Measurement) -> tuple:
        return (bool(setting_difference(a, b, (CAP_KEY,))), a.software != b.software, -a.n_runs - b.n_runs)

    a, b = min(itertools.product(ours, theirs), key=lambda two: unlike(*two))
    stacks, settings = stack_difference(a, b, tuple(points.SOFTWARE)), setting_difference(a, b, (CAP_KEY,))
    return quotient(a, b, stack_differs=stacks, setting_differs=settings)


def _figures(iso: Ratio | None, largest: Ratio | None) -> dict[str, Ratio | None]:
    factor = iso and largest and quotient(largest, iso, **carried_flags([iso, largest]))
    return {"iso_ratio": iso, "max_ratio": largest, "capacity_factor": factor}


def split(measurements: list[Measurement], cards: list[str]) -> tuple[list[SplitRow], list[str]]:
    """The split of card cards[0] against cards[1] for every model either ran, and the runs missing."""
    card, baseline = cards
    rows, missing = [], []
    published = [m for m in measurements if m.source != MEASURED]
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
        iso_ratio = pair(a[iso], b[iso]) if iso else None
        figures = _figures(iso_ratio, pair(a[largest], b[baseline_largest]) if a and b else None)
        category = next(iter((a or b).values()))[0].category
        found = (model, category, precision, count, card, baseline, iso, largest, baseline_largest, figures)
        rows.append(SplitRow(*found, *_published(published, stand_ins, model, precision, count)))
    return rows, missing


def category_means(rows: list[SplitRow]) -> list[SplitMean]:
    """Per (category, precision group, GPU count): the means over the models that have both ratios."""
    groups: dict[tuple, list[SplitRow]] = {}
    for r in rows:
        if r.figures["iso_ratio"] and r.figures["max_ratio"]:
            key = (r.category, precision_group(r.precision), r.gpu_count, r.card, r.baseline_card)
            groups.setdefault(key, []).append(r)
    found = []
    for key, members in sorted(groups.items()):
        iso, largest = (_mean([r.figures[f] for r in members]) for f in ("iso_ratio", "max_ratio"))
        found.append(SplitMean(*key, _figures(iso, largest), tuple(r.model for r in members)))
    return found


def _mean(ratios: list[Ratio]) -> Ratio:
    """The arithmetic mean of ratios, a point two of them share counting once (means() takes its
    ratios as independent, as category means of different models are)."""
    mean, _ = means(ratios)
    return ratio(mean.terms, value=mean.value, **carried_flags(ratios))


def is_card(card) -> bool:
    """gpu, or gpu@<memory_limit_gb> with a number of GB above 0."""
    gpu, at, cap = str(card).partition("@")
    try:
        return bool(gpu) and (not at or 0 < float(cap) < float("inf"))
    except ValueError:
        return False


def _command(card: str, model: str, precision: str, count: int, batch, why: str) -> str:
    gpu, _, cap = card.partition("@")
    more = (f" gpu.count={count}" if count > 1 else "") + (f" {CAP_KEY}={cap}" if cap else "")
    return (
        f"capacity_split: {card} has no {model} {precision} x{count} run at batch {batch} ({why}); run: "
        f"python -m src.train gpu={gpu}{more} model={model} precision={precision} model.batch_size={batch}"
    )


def stands_for(published: list[Measurement], card: str) -> str:
    """The published profile a card stands for, that of its memory: a capped card's is the profile whose
    `gpu.memory_gb` is its cap (h200@24 -> rtx3090), an uncapped card's is itself."""
    gpu, _, cap = card.partition("@")
    same = sorted({m.gpu for m in published if cap and m.spec.memory_gb == float(cap)})
    return same[0] if same else gpu


def _published(points: list[Measurement], gpus: list[str], model: str, precision: str, count: int) -> tuple:
    """Beside a row: the per-GPU batch each card's profile was published at (its 1-GPU figures), and
    their published ratio at the row's GPU count."""

    def at(gpu: str, n: int) -> list[Measurement]:
        key = (gpu, model, precision_group(precision), n)
        return [m for m in points if (m.gpu, m.model, precision_group(m.precision), m.gpu_count) == key]

    def batch(gpu: str) -> int | None:
        logged = (positive_number(m.runs[0].result.tags.get(recorded.PUBLISHED_BATCH)) for m in at(gpu, 1))
        return next((int(b) for b in logged if b), None)

    ours, theirs = (at(gpu, count) for gpu in gpus)
    return batch(gpus[0]), batch(gpus[1]), quotient(ours[-1], theirs[-1]).value if ours and theirs else None
