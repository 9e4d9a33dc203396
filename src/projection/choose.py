"""Which measured point stands for a target card, and at which batch it is projected there.

`own`: of the points of one workload (same model, precision, count and settings, any batch or cap),
the target runs the batch its profile names (conf/gpu/<card>.yaml batch_sizes: what `gpu=<card>`
would run; Lambda's batches for the study's cards, sized by memory). The point measured at that
batch stands for it; where none was, the measured point of the nearest batch, projected to the
profile's batch through the step's counted ops (said as `counted`). A profile that names no batch:
the largest measured batch whose memory fits the target's (a point's memory is the cap it ran
under, `gpu.memory_limit_gb`, else the peak it allocated); none fits: refused, with the command
that measures one that does; no run logged its memory: the smallest, said as not known to fit.
`same`: every point at the batch it ran.

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
    batch: int  # per GPU, on the target
    note: str = ""  # how this batch differs from one measured that fits, where it does
    refused: str = ""  # why none is projected: no measured batch fits the target's memory


def workload_key(point: SourcePoint) -> tuple:
    """What points of one workload share: everything but the batch and the memory cap."""
    return (point.gpu, point.model, point.precision, point.gpu_count, point.group)


def settings(point: SourcePoint) -> tuple:
    """Its workload's settings, whatever the stack and card it ran on: what points of two cards share."""
    return tuple(kv for kv in point.group if not kv[0].startswith("tag:"))


def choose(points: list[SourcePoint], target: Card, batch: str) -> list[Chosen]:
    """The points to project onto `target`: per workload, one (own) or all (same)."""
    if batch == SAME:
        return [Chosen(p, p.batch) for p in points]
    groups: dict[tuple, list[SourcePoint]] = {}
    for p in points:
        groups.setdefault(workload_key(p), []).append(p)
    return [_own(group, target) for group in groups.values()]


def at_batch(group: list[SourcePoint], wanted: int) -> SourcePoint:
    """Of one workload's points, the one measured at batch `wanted` (per GPU), else at the nearest
    (by ratio), the least memory on a tie."""
    return min(group, key=lambda q: (abs(math.log(q.batch / wanted)), q.memory_gb or 0))


def _own(group: list[SourcePoint], target: Card) -> Chosen:
    p = group[0]
    wanted = target.batch_for(p.model, p.precision)
    if wanted:
        nearest = at_batch(group, wanted)
        if nearest.batch == wanted:
            return Chosen(nearest, wanted)
        return Chosen(
            nearest,
            wanted,
            f"{target.name} {p.model} {p.precision}: at batch {wanted}, its profile's, "
            f"from {p.gpu}'s batch {nearest.batch} through the counted ops; measure it: "
            f"{_command(p)} model.batch_size={wanted}",
        )
    known = [q for q in group if q.memory_gb is not None]
    fits = [q for q in known if q.memory_gb <= target.memory_gb]
    if fits:
        chosen = max(fits, key=lambda q: (q.batch, q.memory_gb))
        return Chosen(chosen, chosen.batch)
    size = f"gpu.memory_limit_gb={target.memory_gb:g} model.batch_size=auto"
    if known:
        least = min(known, key=lambda q: (q.memory_gb, q.batch))
        return Chosen(
            least,
            least.batch,
            refused=(
                f"{target.name} {p.model} {p.precision}: no measured batch fits its {target.memory_gb:g} GB (batch "
                f"{least.batch} needs {least.memory_gb:.0f} GB); measure one that does: {_command(p)} {size}"
            ),
        )
    smallest = min(group, key=lambda q: q.batch)  # runs without a peak memory (a host that reports none)
    return Chosen(
        smallest,
        smallest.batch,
        (
            f"{target.name} {p.model} {p.precision}: no run logged its peak memory, so whether batch {smallest.batch} "
            f"fits its {target.memory_gb:g} GB is not known; measure it: {_command(p)} {size}"
        ),
    )


def _command(p: SourcePoint) -> str:
    return f"python -m src.train gpu={p.gpu} model={p.model} precision={p.precision} gpu.count={p.gpu_count}"


def nearest_source(projections: list[Projection], noted: set[int]) -> tuple[list[Projection], dict[int, str]]:
    """Per target card and workload (its settings, whatever the stack), the projections from one
    source point: the one at the card's own batch (`noted`: ids of those not), then with the step
    time least scaled. Returns them and, by id of the first of each, a line naming the others."""
    workloads: dict[tuple, dict[tuple, list[Projection]]] = {}
    for p in projections:
        s = p.source
        workload = (p.target.name, s.model, s.precision, s.gpu_count, settings(s))
        workloads.setdefault(workload, {}).setdefault((s.gpu, s.group), []).append(p)
    kept, said = set(), {}
    for sources in workloads.values():
        ranked = sorted(
            sources.values(),
            key=lambda ps: (id(ps[0]) in noted, min(abs(math.log(p.step_ratio)) for p in ps)),
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
