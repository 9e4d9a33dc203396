"""Which measured point stands for a target card: the one at the target's own largest batch (as
Lambda sized batches by memory), or the one at the same batch.

A point's memory is the cap it ran under (`gpu.memory_limit_gb`, where `model.batch_size=auto`
found the largest batch that fits), else the peak it allocated. `own`: of the points of one
workload (same model, precision, count and settings, any batch or cap), the largest batch whose
memory fits the target's; none fits: the one needing least, said so with the command that measures
the curve. `same`: every point as it ran.
"""

from __future__ import annotations

from dataclasses import dataclass

from src.projection.model import Card, SourcePoint

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
    return [_largest_that_fits(group, target) for group in groups.values()]


def _largest_that_fits(group: list[SourcePoint], target: Card) -> Chosen:
    known = [p for p in group if p.memory_gb is not None]
    fits = [p for p in known if p.memory_gb <= target.memory_gb]
    if fits:
        return Chosen(max(fits, key=lambda p: (p.batch, p.memory_gb)))
    least = min(known or group, key=lambda p: (p.memory_gb or 0, p.batch))
    first = group[0]
    return Chosen(
        least,
        f"no measured batch of {first.model} {first.precision} fits {target.name}'s {target.memory_gb:g} GB "
        f"(batch {least.batch} needed {least.memory_gb or 0:.0f} GB): projected at that batch; measure the "
        f"batch that fits: python -m src.train gpu={first.gpu} gpu.memory_limit_gb={target.memory_gb:g} "
        f"model={first.model} precision={first.precision} model.batch_size=auto",
    )
