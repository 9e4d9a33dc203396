"""Compare's projection section (`project=[a6000,rtx3090]`): the measured points projected onto each
named card become points of their own source, `projected`, so they join the same tables, ratios,
category means and charts as measured and published ones without ever pooling with them; the
section adds what each ratio is made of, what could not be projected and why, `projection.csv`,
and one MLflow run per projected point (kind `projection`, its inputs named in its tags).
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field

from src.compare import intervals
from src.compare.runs import Measurement
from src.projection.model import Projection, project
from src.projection.onto import project_onto
from src.projection.sentences import pair_sentence
from src.stats import t95

PROJECTED = "projected"  # the source of a projected point: never pooled with `measured` or a publisher's
KIND = "projection"  # the job kind of its MLflow run
CSV = "projection.csv"
COLUMNS = ("model", "precision", "gpu_count", "gpu", "from_gpu", "batch", "math", "throughput", "throughput_low",
           "throughput_high", "step_ratio", "parts", "note", "from_runs", "ceilings_run")  # fmt: skip


@dataclass
class Section:
    projections: list[Projection] = field(default_factory=list)
    measurements: list[Measurement] = field(default_factory=list)  # the projections as compare's points
    sentences: list[str] = field(default_factory=list)  # one per model, precision, count and card
    notes: list[str] = field(default_factory=list)  # a batch that is not the card's own, and why
    refused: list[str] = field(default_factory=list)  # one line each: the run to make first


def build(measurements: list[Measurement], runs: list, targets: list[str], baseline: str, batch: str,
          model_error: float) -> Section:  # fmt: skip
    """Every measured point of a card not named in `targets` onto each of them."""
    done = project_onto(measurements, runs, targets, batch, model_error)
    section = Section(done.projections, refused=done.refused)
    for p in done.projections:
        [m] = [m for m in measurements if m.runs and m.runs[0].run_id == p.source.run_ids[0]]
        section.measurements.append(as_measurement(p, m))
        if id(p) in done.notes:
            section.notes.append(f"{p.target.name} {p.source.model} {p.source.precision}: {done.notes[id(p)]}")
    section.sentences = _sentences(done.projections, baseline, model_error)
    return section


def as_measurement(p: Projection, m: Measurement) -> Measurement:
    """The projection as a point of source `projected`, on the target card, with its band as the
    95% interval (a spread with no degrees of freedom to lose: the model's error is measured)."""
    low, high = p.interval
    se = math.log(high / p.throughput) / t95(10**6)
    config = tuple((k, v) for k, v in m.config if not k.startswith("tag:"))  # the stack is the source card's
    return dataclasses.replace(
        m, gpu=p.target.name, source=PROJECTED, throughput=p.throughput, throughput_min=low, throughput_max=high,
        per_watt=None, per_watt_basis=None, per_kusd=None, config=config,
        spread=intervals.Spread(se, math.inf, intervals.PROJECTED),
    )  # fmt: skip


def _sentences(projections: list[Projection], baseline: str, model_error: float) -> list[str]:
    """Each card over the baseline where the baseline is projected too, else over the card measured."""
    found = []
    keyed = {(p.target.name, p.source.model, p.source.precision, p.source.gpu_count, p.source.group): p
             for p in projections}  # fmt: skip
    for (gpu, model, precision, count, group), p in sorted(keyed.items(), key=lambda item: item[0][:4]):
        base = keyed.get((baseline, model, precision, count, group))
        if gpu == baseline:
            continue
        if base is None:  # against the card it was measured on: that card projected onto itself
            base = project(p.source, p.source_card, p.ceilings, p.source_card, model_error)
        found.append(pair_sentence(p, base, model_error))
    return found


def records(section: Section) -> list[dict]:
    return [
        {
            "model": p.source.model, "precision": p.source.precision, "gpu_count": p.source.gpu_count,
            "gpu": p.target.name, "from_gpu": p.source.gpu, "batch": p.source.batch, "math": p.math,
            "throughput": p.throughput, "throughput_low": p.interval[0], "throughput_high": p.interval[1],
            "step_ratio": p.step_ratio,
            "parts": "; ".join(f"{f.part} {f.share:.1%} x{f.scale:.3g} ({f.basis})" for f in p.factors if f.share),
            "note": next((n for n in section.notes if n.startswith(f"{p.target.name} {p.source.model} {p.source.precision}:")), ""),
            "from_runs": " ".join(p.source.run_ids), "ceilings_run": p.ceilings.run_id,
        }  # fmt: skip
        for p in section.projections
    ]


def markdown(section: Section, targets: list[str]) -> list[str]:
    lines = ["", "## Projection: " + ", ".join(targets), ""]
    lines += [
        "Each measured point on a card you may not have: its step time split as its breakdown logged it, "
        "each class scaled by the ratio that governs it on that card (matmul: the tensor rate of the math "
        "it runs there, the source's measured efficiency carried over; other compute and matmul waiting on "
        "memory: memory bandwidth; copies: the host link; communication: the GPU link; idle kept), at the "
        "card's own largest batch where the memory curve was measured. Projected figures are points of "
        f"source `{PROJECTED}` in every table and chart: never pooled with measured or published ones. "
        "docs/compare.md#projection says what the model misses.",
        "",
    ]
    lines += [f"- {s}" for s in section.sentences] or ["- Nothing projected."]
    if section.notes or section.refused:
        lines += ["", "Not projected, or not at the card's own batch:", ""]
        lines += [f"- {line}" for line in section.refused + section.notes]
    return lines + [""]


def log_runs(mlflow_client, experiment_id: str, parent_run_id: str, section: Section) -> list[str]:
    """One run per projected point, a child of the report run: its figures, each part's share and
    scale, and the runs it was made from (tags `projected_from`, `ceilings_run`)."""
    from mlflow.entities import Metric

    ids = []
    for p in section.projections:
        s = p.source
        tags = {"mlflow.parentRunId": parent_run_id, "job_kind": KIND, "source": PROJECTED, "gpu": p.target.name,
                "gpu_count": str(s.gpu_count), "model": s.model, "precision": s.precision, "projected_from_gpu": s.gpu,
                "projected_from": " ".join(s.run_ids), "ceilings_run": p.ceilings.run_id}  # fmt: skip
        run = mlflow_client.create_run(
            experiment_id, run_name=f"{p.target.name} x{s.gpu_count} {s.model} {s.precision} [{PROJECTED}]", tags=tags
        )
        metrics = {"throughput": p.throughput, "throughput_low": p.interval[0], "throughput_high": p.interval[1],
                   "batch_size": s.batch, "step_ratio": p.step_ratio}  # fmt: skip
        for f in p.factors:
            key = f.part.replace(", ", "_").replace(" ", "_")
            metrics |= {f"share_{key}": f.share, f"scale_{key}": f.scale}
        now = int(time.time() * 1000)
        mlflow_client.log_batch(run.info.run_id, metrics=[Metric(k, v, now, 0) for k, v in metrics.items()])
        mlflow_client.set_terminated(run.info.run_id, "FINISHED")
        ids.append(run.info.run_id)
    return ids
