"""Which measured point stands for a target card: the one at the target's own batch, or the one at
the same batch.

`own`: of the points of one workload (same model, precision, count and settings, any batch or cap),
the one at the batch the target's profile runs it at (conf/gpu/<card>.yaml batch_sizes: what
`gpu=<card>` would run; Lambda's batches for the study's cards, sized by memory); where that batch
was not measured, or the profile sets none, the largest batch whose memory fits the target's. A
point's memory is the cap it ran under (`gpu.memory_limit_gb`, where `model.batch_size=auto` found
the largest batch that fits), else the peak it allocated; none fits: the one needing least. Each
fallback is said, with the command that measures the missing point. `same`: every point as it ran.

Where several cards' points of one workload project onto a card, one card's stand (nearest_source):
a projection from further off carries more of the model's error, and one workload counts once in a
mean. The others are said beside it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from src.projection.model import Card, Projection, SourcePoint

OWN, SAME = "own", "same"
BATCHES = (OWN, SAME)


@dataclass(frozen=True)
class Chosen:
    point: SourcePoint
    note: str = ""  # why this batch is not the target's own, where it is not


def workload_key(point: SourcePoint) -> tuple:
    """What points of one workload share: everything but the batch and the memory cap."""
    return (point.gpu, point.model, point.precision, point.gpu_count, point.group)


def choose(points: list[SourcePoint], target: Card, batch: str) -> list[Chosen]:
    """The points to project onto `target`: per workload, one (own) or all (same)."""
    if batch == SAME:
        return [Chosen(p) for p in points]
    groups: dict[tuple, list[SourcePoint]] = {}
    for p in points:
        groups.setdefault(workload_key(p), []).append(p)
    return [_own(group, target) for group in groups.values()]


def _own(group: list[SourcePoint], target: Card) -> Chosen:
    p = group[0]
    wanted = target.batch_for(p.model, p.precision)
    at_wanted = [q for q in group if q.batch == wanted]
    if at_wanted:
        return Chosen(min(at_wanted, key=lambda q: q.memory_gb or 0))
    known = [q for q in group if q.memory_gb is not None]
    fits = [q for q in known if q.memory_gb <= target.memory_gb]
    if fits and wanted is None:
        return Chosen(max(fits, key=lambda q: (q.batch, q.memory_gb)))
    if fits:
        chosen = max(fits, key=lambda q: (q.batch, q.memory_gb))
        said = f"projected at batch {chosen.batch}, the largest measured that fits its {target.memory_gb:g} GB"
    elif known:
        chosen = min(known, key=lambda q: (q.memory_gb, q.batch))
        said = (f"no measured batch fits its {target.memory_gb:g} GB: projected at batch {chosen.batch} "
                f"(needs {chosen.memory_gb:.0f} GB)")  # fmt: skip
    else:  # runs without a peak memory (a host that reports none): whether one fits is not known
        chosen = min(group, key=lambda q: q.batch)
        said = (f"no run logged its peak memory, so whether a batch fits its {target.memory_gb:g} GB is not "
                f"known: projected at batch {chosen.batch}, the smallest measured")  # fmt: skip
    if wanted is None:
        wanted_part, size = "", f"gpu.memory_limit_gb={target.memory_gb:g} model.batch_size=auto"
    else:
        wanted_part, size = f"its profile runs it at batch {wanted}, not measured on {p.gpu}; ", f"model.batch_size={wanted}"
    command = f"python -m src.train gpu={p.gpu} model={p.model} precision={p.precision} gpu.count={p.gpu_count} {size}"
    return Chosen(chosen, f"{target.name} {p.model} {p.precision}: {wanted_part}{said}; measure it: {command}")


def nearest_source(projections: list[Projection], noted: set[int]) -> tuple[list[Projection], dict[int, str]]:
    """Per target card and workload (its settings, whatever the stack), the projections from one
    source point: the one at the card's own batch (`noted`: ids of those not), then with the step
    time least scaled. Returns them and, by id of the first of each, a line naming the others."""
    workloads: dict[tuple, dict[tuple, list[Projection]]] = {}
    for p in projections:
        s = p.source
        settings = tuple(kv for kv in s.group if not kv[0].startswith("tag:"))
        workload = (p.target.name, s.model, s.precision, s.gpu_count, settings)
        workloads.setdefault(workload, {}).setdefault((s.gpu, s.group), []).append(p)
    kept, said = set(), {}
    for sources in workloads.values():
        ranked = sorted(
            sources.values(), key=lambda ps: (id(ps[0]) in noted, min(abs(math.log(p.step_ratio)) for p in ps))
        )
        kept |= {id(p) for p in ranked[0]}
        if len(ranked) > 1:
            said[id(ranked[0][0])] = _set_aside(ranked[0][0], [ps[0] for ps in ranked[1:]])
    return [p for p in projections if id(p) in kept], said


def _set_aside(chosen: Projection, others: list[Projection]) -> str:
    """`a6000 txl_large amp x1: projected from rtx3090 (step time x0.68); from h200 (x5.52) it would be
    7,433 [5,957-9,275], 0.51x of that`."""
    s = chosen.source
    head = f"{chosen.target.name} {s.model} {s.precision} x{s.gpu_count}: projected from {s.gpu}"
    also = [
        f"from {p.source.gpu} (x{p.step_ratio:.2f}) it would be {p.throughput:,.0f} "
        f"[{p.interval[0]:,.0f}-{p.interval[1]:,.0f}], {p.throughput / chosen.throughput:.2f}x of that"
        for p in others
    ]
    return f"{head} (step time x{chosen.step_ratio:.2f}), the nearer card; " + "; ".join(also)
