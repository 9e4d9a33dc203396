"""The split of a ratio into speed and capacity (`capacity_split=[A,B]`), with 95% intervals.

A card is a gpu profile, or a profile under a memory cap (`h200@24`: gpu=h200
gpu.memory_limit_gb=24). For cards A and B and one model, precision and GPU count:
- iso-batch ratio: A / B at the same per-GPU batch (the largest both ran): speed alone;
- max-batch ratio: A / B, each at the largest batch it ran (batch_size=auto makes that the largest
  that fits): speed and capacity together, what a published memory-sized ratio is;
- capacity factor: max-batch ratio / iso-batch ratio, what A's extra memory is worth on its own.
Each is a ratio of src/compare/ratio.py; the factor divides two ratios that usually share a point
(the smaller card's largest batch is the iso batch): it is netted, so a shared point cancels
instead of widening the interval twice. Where runs are missing, the split names them with the
command that measures them. Beside it, from the imported runs: the published figures of the
profiles whose memory each card has (the `gpu.memory_gb` they logged), their ratio (a max-batch
ratio) and the per-GPU batches they were published at.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from src import recorded
from src.compare.analysis import precision_group, setting_difference
from src.compare.ratio import Ratio, carried_flags, means, quotient, ratio
from src.compare.runs import MEASURED, Measurement, stack_difference
from src.config import points

CAP_KEY = "gpu.memory_limit_gb"
FIGURES = ("iso_ratio", "max_ratio", "capacity_factor")
# what each figure measures, for "no measurable difference" and the tables
MEANING = {"iso_ratio": "speed", "max_ratio": "speed x capacity", "capacity_factor": "capacity"}


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
    """Per (category, precision group, GPU count): the arithmetic means of the iso and max-batch
    ratios of the models that have both, and the capacity factor of those means."""

    category: str
    precision_group: str
    gpu_count: int
    members: tuple[SplitRow, ...] = field(repr=False)
    figures: dict[str, Ratio | None] = field(repr=False)

    @property
    def models(self) -> tuple[str, ...]:
        return tuple(r.model for r in self.members)


def card_of(m: Measurement) -> str:
    cap = dict(m.config).get(CAP_KEY)
    return f"{m.gpu}@{float(cap):g}" if cap not in (None, "None") else m.gpu


def batch_of(m: Measurement) -> int | None:
    value = dict(m.config).get(points.RAN_BATCH)
    return int(value) if value not in (None, "None", "auto") else None


def by_batch(measurements: list[Measurement]) -> dict[tuple, dict[str, dict[int, list[Measurement]]]]:
    """(model, precision, gpu_count) -> card -> batch -> its points (this project's runs): one per
    stack and setting it was measured with."""
    table: dict[tuple, dict[str, dict[int, list[Measurement]]]] = {}
    for m in measurements:
        if m.source == MEASURED and (batch := batch_of(m)) is not None:
            cards = table.setdefault((m.model, m.precision, m.gpu_count), {})
            cards.setdefault(card_of(m), {}).setdefault(batch, []).append(m)
    return table


def pair(ours: list[Measurement], theirs: list[Measurement]) -> Ratio:
    """One card's point over the other's at a batch: the two alike but for the card (the gpu, its
    cap) where such a pair exists, else the closest, flagged with what differs: settings first,
    then the software stack, then the more repeats."""

    def unlike(a: Measurement, b: Measurement) -> tuple:
        return (bool(setting_difference(a, b, (CAP_KEY,))), a.software != b.software, -a.n_runs - b.n_runs)

    a, b = min(((a, b) for a in ours for b in theirs), key=lambda p: unlike(*p))
    return quotient(
        a,
        b,
        stack_differs=stack_difference(a, b, tuple(points.SOFTWARE)),
        setting_differs=setting_difference(a, b, (CAP_KEY,)),
    )


def _figures(iso: tuple | None, largest: tuple | None) -> dict[str, Ratio | None]:
    iso_ratio = pair(*iso) if iso else None
    max_ratio = pair(*largest) if largest else None
    factor = None
    if iso_ratio and max_ratio:
        factor = ratio([(max_ratio, 1.0), (iso_ratio, -1.0)], **carried_flags([iso_ratio, max_ratio]))
    return {"iso_ratio": iso_ratio, "max_ratio": max_ratio, "capacity_factor": factor}


def split(measurements: list[Measurement], pair: list[str]) -> tuple[list[SplitRow], list[str]]:
    """The split of card pair[0] against pair[1] for every model either ran, and the runs missing."""
    card, baseline = pair
    rows, missing = [], []
    published = Published(measurements, card, baseline)
    for (model, precision, count), cards in sorted(by_batch(measurements).items()):
        a, b = cards.get(card, {}), cards.get(baseline, {})
        if not a and not b:
            continue
        for name, have in ((card, a), (baseline, b)):
            if not have:
                missing.append(_command(name, model, precision, count, "auto", "its largest batch"))
        common = sorted(set(a) & set(b))
        if a and b and not common:
            smaller = min(max(a), max(b))
            lacking = card if smaller not in a else baseline
            missing.append(_command(lacking, model, precision, count, smaller, "the iso-batch point"))
        iso = common[-1] if common else None
        group = precision_group(precision)
        rows.append(
            SplitRow(
                model=model,
                category=next(iter((a or b).values()))[0].category,
                precision=precision,
                gpu_count=count,
                card=card,
                baseline_card=baseline,
                iso_batch=iso,
                max_batch=max(a) if a else None,
                baseline_max_batch=max(b) if b else None,
                figures=_figures((a[iso], b[iso]) if iso else None, (a[max(a)], b[max(b)]) if a and b else None),
                published_batch=published.batch(card, model, group),
                published_baseline_batch=published.batch(baseline, model, group),
                published_ratio=published.ratio(model, group, count),
            )
        )
    return rows, missing


def category_means(rows: list[SplitRow]) -> list[SplitMean]:
    """Per (category, precision group, GPU count): the means over the models that have both ratios;
    each point counts once (a mean's weights on the points of its ratios are netted)."""
    groups: dict[tuple, list[SplitRow]] = {}
    for r in rows:
        if r.figures["iso_ratio"] and r.figures["max_ratio"]:
            groups.setdefault((r.category, precision_group(r.precision), r.gpu_count), []).append(r)
    found = []
    for key, members in sorted(groups.items()):
        iso, largest = (_mean([r.figures[f] for r in members]) for f in ("iso_ratio", "max_ratio"))
        factor = ratio([(largest, 1.0), (iso, -1.0)], value=largest.value / iso.value, **carried_flags([iso, largest]))
        figures = {"iso_ratio": iso, "max_ratio": largest, "capacity_factor": factor}
        found.append(SplitMean(*key, members=tuple(members), figures=figures))
    return found


def _mean(ratios: list[Ratio]) -> Ratio:
    """The arithmetic mean of ratios, a point two of them share counting once (means() takes its
    ratios as independent, as category means of different models are)."""
    mean, _ = means(ratios)
    terms = [(r, share) for r, (_, share) in zip(ratios, mean.terms, strict=True)]
    return ratio(terms, value=mean.value, **carried_flags(ratios))


def is_card(card) -> bool:
    """gpu, or gpu@<memory_limit_gb> with a number of GB above 0."""
    gpu, at, cap = str(card).partition("@")
    try:
        return bool(gpu) and (not at or 0 < float(cap) < float("inf"))
    except ValueError:
        return False


def _command(card: str, model: str, precision: str, count: int, batch, why: str) -> str:
    gpu, _, cap = card.partition("@")
    cap_part = f" gpu.memory_limit_gb={cap}" if cap else ""
    count_part = f" gpu.count={count}" if count > 1 else ""
    return (
        f"capacity_split: {card} has no {model} {precision} x{count} run at batch {batch} ({why}); run: "
        f"python -m src.train gpu={gpu}{count_part}{cap_part} model={model} precision={precision} "
        f"model.batch_size={batch}"
    )


class Published:
    """The published figures beside the split: each card stands for the published profile of its
    memory (a capped card: the profile whose `gpu.memory_gb` is its cap, h200@24 -> rtx3090; an
    uncapped one: itself), read from the imported runs."""

    def __init__(self, measurements: list[Measurement], card: str, baseline: str):
        self.points = [m for m in measurements if m.source != MEASURED]
        self.a, self.b = self.stands_for(card), self.stands_for(baseline)

    def stands_for(self, card: str) -> str:
        gpu, _, cap = card.partition("@")
        if not cap:
            return gpu
        same = sorted({m.gpu for m in self.points if m.spec.memory_gb == float(cap)})
        return same[0] if same else gpu

    def batch(self, card: str, model: str, group: str) -> int | None:
        """The per-GPU batch published for the card's profile (1-GPU figures), if any."""
        gpu = self.stands_for(card)
        for m in self.points:
            if (m.gpu, m.model, m.gpu_count, precision_group(m.precision)) == (gpu, model, 1, group):
                batch = recorded.positive_number(m.runs[0].result.tags.get(recorded.PUBLISHED_BATCH))
                if batch:
                    return int(batch)
        return None

    def ratio(self, model: str, group: str, count: int) -> float | None:
        found = {m.gpu: m.throughput for m in self.points
                 if (m.model, precision_group(m.precision), m.gpu_count) == (model, group, count)}  # fmt: skip
        return found[self.a] / found[self.b] if self.a in found and self.b in found else None
