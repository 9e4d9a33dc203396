"""Every measured point projected onto each target card: what compare's projection section and
benchmarks/projection_check.py both run."""

from __future__ import annotations

from dataclasses import dataclass, field

from src import recorded
from src.compare import explain
from src.compare.runs import MEASURED, Measurement
from src.projection import runs as inputs
from src.projection.choose import choose
from src.projection.model import Projection, ProjectionRefused, project


@dataclass
class Projected:
    projections: list[Projection] = field(default_factory=list)
    notes: dict[int, str] = field(default_factory=dict)  # id(projection) -> why its batch is not the target's own
    refused: list[str] = field(default_factory=list)  # one line each: what to measure first


def project_onto(
    measurements: list[Measurement], runs: list[recorded.RunResult], targets: list[str], batch: str, model_error: float
) -> Projected:
    """The measured points of every gpu that is not itself a target, onto each target."""
    by_id = {r.run_id: r for r in runs}
    found = explain.ceilings_runs(runs)
    done = Projected()
    pairs = [
        (m, inputs.source_point(m, [by_id[r.run_id] for r in m.runs if r.run_id in by_id]))
        for m in measurements
        if m.gpu not in targets and m.source == MEASURED and any(r.run_id in by_id for r in m.runs)
    ]
    for name in targets:
        try:
            target = inputs.target_card(name)
        except ProjectionRefused as exc:
            done.refused.append(str(exc))
            continue
        for chosen in choose([p for _, p in pairs], target, batch):
            m = next(m for m, p in pairs if p is chosen.point)
            try:
                card = inputs.source_card(m, by_id[chosen.point.run_ids[0]].params)
                ceilings = inputs.ceilings_of(m, by_id, found)
                projection = project(chosen.point, card, ceilings, target, model_error)
            except ProjectionRefused as exc:
                if str(exc) not in done.refused:  # a point lacking its breakdown is refused once, not per target
                    done.refused.append(str(exc))
                continue
            done.projections.append(projection)
            if chosen.note:
                done.notes[id(projection)] = chosen.note
    return done
