"""The split of a ratio into speed and capacity (`split=[A,B]`), and memory as a curve.

A card is a gpu profile, or a profile under a memory cap (`h200@24`: gpu=h200
gpu.memory_limit_gb=24). For cards A and B and one model, precision and GPU count:
- iso-batch ratio: A / B at the same per-GPU batch (the largest both ran): speed alone;
- max-batch ratio: A / B, each at the largest batch it ran (batch_size=auto makes that the largest
  that fits): speed and capacity together, what a published memory-sized ratio is;
- capacity factor: max-batch ratio / iso-batch ratio, what A's extra memory is worth on its own.
Where runs are missing, the split names them with the command that measures them. Beside it,
the published batch sizes (reference/lambda/pytorch-train-bs-*.csv) of the profiles whose memory
each card has, and the published ratio between them (imported runs), a max-batch ratio.
"""

from __future__ import annotations

import csv
import statistics
from dataclasses import dataclass
from pathlib import Path

from omegaconf import OmegaConf

from src.compare import style
from src.compare.analysis import precision_group
from src.compare.runs import MEASURED, Measurement
from src.config import points
from src.paths import PROJECT_ROOT

CAP_KEY = "gpu.memory_limit_gb"
SPLIT_CSV, CURVE_STEM, SPLIT_STEM = "capacity_split.csv", "memory_curve", "capacity_split"
PUBLISHED_BATCHES = {"fp32": "pytorch-train-bs-fp32.csv", "mixed": "pytorch-train-bs-fp16.csv"}
NONE_TEXT = {
    "iso_ratio": "no common batch",
    "max_ratio": "a card has no run",
    "published_ratio": "none published",
}
SPLIT_COLUMNS = (
    "model", "category", "precision", "gpu_count", "card", "baseline_card", "iso_batch", "iso_ratio",
    "max_batch", "baseline_max_batch", "max_ratio", "capacity_factor", "published_batch",
    "published_baseline_batch", "published_ratio",
)  # fmt: skip


@dataclass(frozen=True)
class SplitRow:
    model: str
    category: str
    precision: str
    gpu_count: int
    card: str
    baseline_card: str
    iso_batch: int | None
    iso_ratio: float | None
    max_batch: int | None
    baseline_max_batch: int | None
    max_ratio: float | None
    published_batch: int | None = None
    published_baseline_batch: int | None = None
    published_ratio: float | None = None

    @property
    def capacity_factor(self) -> float | None:
        if self.iso_ratio and self.max_ratio is not None:
            return self.max_ratio / self.iso_ratio
        return None


def card_of(m: Measurement) -> str:
    cap = dict(m.config).get(CAP_KEY)
    return f"{m.gpu}@{float(cap):g}" if cap not in (None, "None") else m.gpu


def batch_of(m: Measurement) -> int | None:
    value = dict(m.config).get(points.RAN_BATCH)
    return int(value) if value not in (None, "None", "auto") else None


def _by_batch(measurements: list[Measurement]) -> dict[tuple, dict[str, dict[int, Measurement]]]:
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
    for (model, precision, count), cards in sorted(_by_batch(measurements).items()):
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
                iso_ratio=a[iso].throughput / b[iso].throughput if iso else None,
                max_batch=max(a) if a else None,
                baseline_max_batch=max(b) if b else None,
                max_ratio=a[max(a)].throughput / b[max(b)].throughput if a and b else None,
                published_batch=published_batch(card, model, group),
                published_baseline_batch=published_batch(baseline, model, group),
                published_ratio=published.get((model, group, count)),
            )
        )
    return rows, missing


def category_means(rows: list[SplitRow]) -> list[dict]:
    """Per (category, precision group, GPU count): the mean iso and max-batch ratios over the
    models that have both, and the capacity factor of those means."""
    groups: dict[tuple, list[SplitRow]] = {}
    for r in rows:
        if r.iso_ratio is not None and r.max_ratio is not None:
            groups.setdefault((r.category, precision_group(r.precision), r.gpu_count), []).append(r)
    means = []
    for (category, group, count), members in sorted(groups.items()):
        iso = statistics.mean(r.iso_ratio for r in members)
        best = statistics.mean(r.max_ratio for r in members)
        means.append({
            "category": category, "precision_group": group, "gpu_count": count, "iso_ratio": iso,
            "max_ratio": best, "capacity_factor": best / iso, "models": ",".join(r.model for r in members),
        })  # fmt: skip
    return means


def _command(card: str, model: str, precision: str, count: int, batch, why: str) -> str:
    gpu, _, cap = card.partition("@")
    cap_part = f" gpu.memory_limit_gb={cap}" if cap else ""
    count_part = f" gpu.count={count}" if count > 1 else ""
    return (
        f"split: {card} has no {model} {precision} x{count} run at batch {batch} ({why}); run: "
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


def records(rows: list[SplitRow]) -> list[dict]:
    return [{c: getattr(r, c) for c in SPLIT_COLUMNS} for r in rows]


def sentence(rows: list[SplitRow], means: list[dict]) -> str:
    """The split in one sentence for report.md."""
    if not means:
        return (
            f"Speed and capacity ({rows[0].card} vs {rows[0].baseline_card}): no model has both the "
            "iso-batch and the max-batch pair yet; the runs to add are listed below."
        )
    parts = [
        f"{m['category']} {m['precision_group']} x{m['gpu_count']}: {m['max_ratio']:.2f}x at each card's "
        f"largest batch = {m['iso_ratio']:.2f}x speed at the same batch x {m['capacity_factor']:.2f}x capacity"
        for m in means
    ]
    return f"Speed and capacity ({rows[0].card} vs {rows[0].baseline_card}): " + "; ".join(parts) + "."


def split_chart(rows: list[SplitRow], out: Path) -> list[Path]:
    """Per model and precision: the iso-batch, max-batch and published ratios side by side."""
    shown = [r for r in rows if r.iso_ratio is not None or r.max_ratio is not None]
    if not shown:
        return []
    fig = style.figure(8, 1.2 + 0.6 * len(shown))
    ax = fig.add_subplot()
    series = (("iso-batch (speed)", "iso_ratio"), ("max-batch (speed x capacity)", "max_ratio"),
              ("published (max-batch)", "published_ratio"))  # fmt: skip
    height = 0.8 / len(series)
    for i, (name, field_name) in enumerate(series):
        ys = [n + i * height for n in range(len(shown))]
        values = [getattr(r, field_name) or 0.0 for r in shown]
        bars = ax.barh(ys, values, height=height, label=name)
        for bar, r, value in zip(bars, shown, values, strict=True):
            text = f"{value:.2f}" if getattr(r, field_name) is not None else NONE_TEXT[field_name]
            if field_name == "max_ratio" and r.capacity_factor is not None:
                text += f"  (capacity {r.capacity_factor:.2f}x)"
            ax.text(bar.get_width(), bar.get_y() + height / 2, " " + text, va="center", fontsize="small")
    ax.set_yticks([n + height for n in range(len(shown))])
    ax.set_yticklabels([f"{r.model} {r.precision} x{r.gpu_count}" for r in shown])
    ax.invert_yaxis()
    ax.axvline(1.0, color="grey", linewidth=0.8)
    end = max([getattr(r, f) or 0 for r in shown for _, f in series] + [1.0])
    ax.set_xlim(0, end * 1.45)
    ax.set_xlabel(f"throughput of {shown[0].card} / {shown[0].baseline_card}")
    style.title(fig, "Speed and capacity", f"{shown[0].card} vs {shown[0].baseline_card}")
    fig.legend(loc="outside lower center", ncols=3, fontsize="small")
    path = out / f"{SPLIT_STEM}.png"
    fig.savefig(path, dpi=110)
    return [path]


def curve_chart(measurements: list[Measurement], out: Path) -> list[Path]:
    """Per model and precision on one GPU: throughput against per-GPU batch, a line per card (a
    cap per memory size asked); only where a card ran two batches or more."""
    series: dict[tuple, dict[str, dict[int, Measurement]]] = {}
    for (model, precision, count), cards in _by_batch(measurements).items():
        if count == 1:
            kept = {card: b for card, b in cards.items() if len(b) > 1}
            if kept:
                series[(model, precision)] = kept
    if not series:
        return []
    fig = style.figure(8, 3.2 * len(series))
    for n, ((model, precision), cards) in enumerate(sorted(series.items())):
        ax = fig.add_subplot(len(series), 1, n + 1)
        ticks: set[int] = set()
        for card, by_batch in sorted(cards.items()):
            batches = sorted(by_batch)
            line = ax.plot(batches, [by_batch[b].throughput for b in batches], marker="o", label=card)
            ax.annotate(f"largest run: {batches[-1]}", (batches[-1], by_batch[batches[-1]].throughput),
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
    style.title(fig, "Throughput against per-GPU batch", "where does more memory stop paying?")
    path = out / f"{CURVE_STEM}.png"
    fig.savefig(path, dpi=110)
    return [path]
