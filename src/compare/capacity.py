"""The split of a ratio into speed and capacity (`capacity_split=[A,B]`), with 95% intervals.

A card is a gpu profile, or a profile under a memory cap (`h200@24`: gpu=h200
gpu.memory_limit_gb=24). For cards A and B and one model, precision and GPU count:
- iso-batch ratio: A / B at the same per-GPU batch (the largest both ran): speed alone;
- max-batch ratio: A / B, each at the largest batch it ran (batch_size=auto makes that the largest
  that fits): speed and capacity together, what a published memory-sized ratio is;
- capacity factor: max-batch ratio / iso-batch ratio, what A's extra memory is worth on its own.
Each carries the 95% interval of src/compare/intervals.py from the spreads of the points it divides.
The factor divides two ratios that usually share a point (the smaller card's largest batch is the
iso batch): each point counts once, with its weights netted, so a shared one cancels instead of
widening the interval twice. Where runs are missing, the split names them with the command that
measures them. Beside it, the published batch sizes (reference/lambda/pytorch-train-bs-*.csv) of
the profiles whose memory each card has, and the published ratio between them (imported runs), a
max-batch ratio.
"""

from __future__ import annotations

import csv
import statistics
from dataclasses import dataclass, field

from omegaconf import OmegaConf

from src.compare import intervals
from src.compare.analysis import precision_group
from src.compare.runs import MEASURED, Measurement
from src.config import points
from src.paths import PROJECT_ROOT

CAP_KEY = "gpu.memory_limit_gb"
PUBLISHED_BATCHES = {"fp32": "pytorch-train-bs-fp32.csv", "mixed": "pytorch-train-bs-fp16.csv"}
FIGURES = ("iso_ratio", "max_ratio", "capacity_factor")
# what each figure measures, for "no measurable difference" and the tables
MEANING = {"iso_ratio": "speed", "max_ratio": "speed x capacity", "capacity_factor": "capacity"}

Pair = tuple[Measurement, Measurement]  # (the card's point, the baseline card's)


class _Figures:
    """The split's three figures with their intervals; a subclass's `terms(figure, weight)` gives a
    figure's log as the terms (point, spread, weight) of intervals.net_spread."""

    def spread(self, figure: str) -> intervals.Spread | None:
        return intervals.net_spread(self.terms(figure)) if getattr(self, figure) is not None else None

    def interval(self, figure: str) -> tuple[float, float] | None:
        spread = self.spread(figure)
        return spread.interval(getattr(self, figure)) if spread else None

    def no_difference(self) -> list[str]:
        """What the figures whose interval holds 1.0 measure: `speed` for an iso-batch ratio of ~1."""
        return [MEANING[f] for f in FIGURES if intervals.holds_one(self.interval(f))]

    def basis(self) -> str:
        """What the intervals rest on (intervals.describe of the points each figure divides): one
        text where every figure's is the same, else each figure's, `speed: repeats; capacity: ...`."""
        texts = {}
        for figure in FIGURES:
            if getattr(self, figure) is not None:
                spreads = [s for _, s, _ in self.terms(figure)]
                known = None if any(s is None for s in spreads) else intervals.combine(spreads)
                texts[MEANING[figure]] = intervals.describe(known)
        if len(set(texts.values())) <= 1:
            return next(iter(texts.values()), "")
        return "; ".join(f"{meaning}: {text}" for meaning, text in texts.items())


@dataclass(frozen=True)
class SplitRow(_Figures):
    model: str
    category: str
    precision: str
    gpu_count: int
    card: str
    baseline_card: str
    iso_batch: int | None
    max_batch: int | None
    baseline_max_batch: int | None
    iso_points: Pair | None = field(default=None, repr=False)  # the two points at the iso batch
    max_points: Pair | None = field(default=None, repr=False)  # each card's point at its largest batch
    published_batch: int | None = None
    published_baseline_batch: int | None = None
    published_ratio: float | None = None

    @property
    def iso_ratio(self) -> float | None:
        return _quotient(self.iso_points)

    @property
    def max_ratio(self) -> float | None:
        return _quotient(self.max_points)

    @property
    def capacity_factor(self) -> float | None:
        if self.iso_ratio and self.max_ratio is not None:
            return self.max_ratio / self.iso_ratio
        return None

    def terms(self, figure: str, weight: float = 1.0) -> list[tuple]:
        if figure == "capacity_factor":
            return self.terms("max_ratio", weight) + self.terms("iso_ratio", -weight)
        a, b = self.iso_points if figure == "iso_ratio" else self.max_points
        return [(a.point, a.spread, weight), (b.point, b.spread, -weight)]


@dataclass(frozen=True)
class SplitMean(_Figures):
    """Per (category, precision group, GPU count): the arithmetic means of the iso and max-batch
    ratios of the models that have both, and the capacity factor of those means."""

    category: str
    precision_group: str
    gpu_count: int
    members: tuple[SplitRow, ...] = field(repr=False)

    @property
    def models(self) -> tuple[str, ...]:
        return tuple(r.model for r in self.members)

    @property
    def iso_ratio(self) -> float:
        return statistics.fmean(r.iso_ratio for r in self.members)

    @property
    def max_ratio(self) -> float:
        return statistics.fmean(r.max_ratio for r in self.members)

    @property
    def capacity_factor(self) -> float:
        return self.max_ratio / self.iso_ratio

    def terms(self, figure: str, weight: float = 1.0) -> list[tuple]:
        if figure == "capacity_factor":
            return self.terms("max_ratio", weight) + self.terms("iso_ratio", -weight)
        ratios = [getattr(r, figure) for r in self.members]
        shares = intervals.mean_weights(ratios)
        return [
            term
            for r, share in zip(self.members, shares, strict=True)
            for term in r.terms(figure, weight * share)
        ]


def _quotient(pair: Pair | None) -> float | None:
    return pair[0].throughput / pair[1].throughput if pair else None


def card_of(m: Measurement) -> str:
    cap = dict(m.config).get(CAP_KEY)
    return f"{m.gpu}@{float(cap):g}" if cap not in (None, "None") else m.gpu


def batch_of(m: Measurement) -> int | None:
    value = dict(m.config).get(points.RAN_BATCH)
    return int(value) if value not in (None, "None", "auto") else None


def by_batch(measurements: list[Measurement]) -> dict[tuple, dict[str, dict[int, Measurement]]]:
    """(model, precision, gpu_count) -> card -> batch -> its measurement (this project's runs)."""
    table: dict[tuple, dict[str, dict[int, Measurement]]] = {}
    for m in measurements:
        if m.source == MEASURED and (batch := batch_of(m)) is not None:
            cards = table.setdefault((m.model, m.precision, m.gpu_count), {})
            cards.setdefault(card_of(m), {}).setdefault(batch, m)
    return table


def split(measurements: list[Measurement], pair: list[str]) -> tuple[list[SplitRow], list[str]]:
    """The split of card pair[0] against pair[1] for every model either ran, and the runs missing."""
    card, baseline = pair
    rows, missing = [], []
    published = _published_ratios(measurements, card, baseline)
    for (model, precision, count), cards in sorted(by_batch(measurements).items()):
        a, b = cards.get(card, {}), cards.get(baseline, {})
        if not a and not b:
            continue
        category = next(iter((a or b).values())).category
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
                category=category,
                precision=precision,
                gpu_count=count,
                card=card,
                baseline_card=baseline,
                iso_batch=iso,
                max_batch=max(a) if a else None,
                baseline_max_batch=max(b) if b else None,
                iso_points=(a[iso], b[iso]) if iso else None,
                max_points=(a[max(a)], b[max(b)]) if a and b else None,
                published_batch=published_batch(card, model, group),
                published_baseline_batch=published_batch(baseline, model, group),
                published_ratio=published.get((model, group, count)),
            )
        )
    return rows, missing


def category_means(rows: list[SplitRow]) -> list[SplitMean]:
    """Per (category, precision group, GPU count): the means over the models that have both ratios."""
    groups: dict[tuple, list[SplitRow]] = {}
    for r in rows:
        if r.iso_ratio is not None and r.max_ratio is not None:
            groups.setdefault((r.category, precision_group(r.precision), r.gpu_count), []).append(r)
    return [SplitMean(*key, members=tuple(members)) for key, members in sorted(groups.items())]


def _command(card: str, model: str, precision: str, count: int, batch, why: str) -> str:
    gpu, _, cap = card.partition("@")
    cap_part = f" gpu.memory_limit_gb={cap}" if cap else ""
    count_part = f" gpu.count={count}" if count > 1 else ""
    return (
        f"capacity_split: {card} has no {model} {precision} x{count} run at batch {batch} ({why}); run: "
        f"python -m src.train gpu={gpu}{count_part}{cap_part} model={model} precision={precision} "
        f"model.batch_size={batch}"
    )


def stands_for(card: str) -> str:
    """The profile whose published figures set a card beside: a capped card, the profile of that
    much memory (h200@24 -> rtx3090); an uncapped one, itself."""
    gpu, _, cap = card.partition("@")
    if not cap:
        return gpu
    for path in sorted((PROJECT_ROOT / "conf" / "gpu").glob("*.yaml")):
        profile = OmegaConf.load(path)
        if profile.get("memory_gb") == float(cap) and profile.get("match"):
            return profile.name
    return gpu


def published_batch(card: str, model: str, group: str) -> int | None:
    """The per-GPU batch Lambda published for the card's profile (1-GPU rows), if any."""
    importer = OmegaConf.load(PROJECT_ROOT / "conf" / "import_results.yaml")
    names = [name for name, profile in importer.gpu_profiles.items() if profile == stands_for(card)]
    columns = [column for column, task in importer.tasks.items() if task.model == model]
    path = PROJECT_ROOT / "reference" / "lambda" / PUBLISHED_BATCHES.get(group, "")
    if not names or not columns or not path.is_file():
        return None
    with path.open() as f:
        for row in csv.DictReader(f):
            if row["name_gpu"] in names and row["num_gpu"] == "1" and row.get(columns[0]):
                return int(float(row[columns[0]]))
    return None


def _published_ratios(measurements: list[Measurement], card: str, baseline: str) -> dict[tuple, float]:
    """(model, precision group, count) -> the published ratio of the profiles the cards stand for."""
    a, b = stands_for(card), stands_for(baseline)
    found: dict[tuple, dict[str, float]] = {}
    for m in measurements:
        if m.source != MEASURED and m.gpu in (a, b):
            found.setdefault((m.model, precision_group(m.precision), m.gpu_count), {})[m.gpu] = m.throughput
    return {key: t[a] / t[b] for key, t in found.items() if a in t and b in t}
