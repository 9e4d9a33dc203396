"""Compare's projection section (`project=[a6000,rtx3090]`, src/projection/ holds the model): every
measured point of a card not named is projected onto each card named; the projected points become
points of their own source, `projected`, so they join the same tables, ratios, category means and
charts as measured and published ones without ever pooling with them.
"""

from __future__ import annotations

import json
import math
import tempfile
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

from omegaconf import OmegaConf

from src.compare import explain
from src.compare.ratio import Spread
from src.compare.report import Section, Table
from src.compare.runs import CAP_KEY, MEASURED, Measurement, aggregate, median_of, select, to_record
from src.projection import shipped
from src.projection.cards import known, profiles
from src.projection.choose import BATCHES, choose, nearest_source, settings
from src.projection.counts import OpCounts
from src.projection.model import Card, Ceilings, Projection, ProjectionRefused, SourcePoint, figures, project
from src.projection.sentences import pair_sentence
from src.results import recorded
from src.results.logged_spec import Spec, positive_number
from src.results.stats import t95

PROJECTED = recorded.PROJECTED  # a projected point's source: never pooled with `measured` or a publisher's
CSV = "projection.csv"
NO_DOF_TO_LOSE = 10**6  # a band's degrees of freedom: a normal interval, finite for Welch's sums
COLUMNS = (
    *("model", "precision", "gpu_count", "gpu", "from_gpu", "batch", "math", recorded.THROUGHPUT),
    *("throughput_low", "throughput_high", "step_ratio", "parts", "note", "from_runs", "ceilings_run"),
)
NOT_THE_WORKLOAD = (recorded.BATCH_SIZE, "model.batch_size", CAP_KEY)  # what a workload's points differ in
LOGGED_FIGURES = ("memory_gb", "memory_bandwidth_gbs", "host_link_gbs", "gpu_link_gbs", "tdp_w")


@dataclass
class Outcome:
    targets: list[str] = field(default_factory=list)  # the cards asked for: project=[...]
    projections: list[Projection] = field(default_factory=list)
    notes: dict[int, str] = field(default_factory=dict)  # id(projection): why not at the card's own batch
    batch_noted: int = 0  # of the projections, those at a batch their source did not run or not known to fit
    from_several: int = 0  # of the projections, those whose workload another card's point could stand for
    refused: list[str] = field(default_factory=list)  # one line each: the run to make first
    measurements: list[Measurement] = field(default_factory=list)  # the projections as compare's points
    sentences: list[str] = field(default_factory=list)  # one per model, precision, count and card
    shipped: str = ""  # the shipped measured source the points came from, where the store had none to project


def for_compare(cfg, runs, baseline):
    """project=[...]: the measured points onto each card named; none named: an empty section. The
    sources are the measured points the model, precision and count filters keep, on any card:
    `gpus=` and `sources=` select what is shown beside the projection."""
    if not cfg.project:
        return Outcome()
    outcome = _project(cfg, runs, stored_counts(cfg.tracking.uri))
    if not outcome.projections:  # none of the store's points can be: the project's own, shipped
        ship = shipped.read()
        from_store = outcome.refused
        outcome = _project(cfg, ship.runs, ship.counts.get)
        outcome.refused, outcome.shipped = from_store + outcome.refused, ship.name
    # each card over the baseline where the baseline is projected too, else over the card measured
    model_error = cfg.projection.model_error
    keyed = {_card_key(p): p for p in outcome.projections}
    for (gpu, *point), p in sorted(keyed.items(), key=lambda item: item[0][:4]):
        if gpu != baseline:  # else against the card it was measured on: that card projected onto itself
            base = keyed.get((baseline, *point)) or project(
                p.source, p.source_figures, p.source_figures, model_error, p.batch
            )
            outcome.sentences.append(pair_sentence(p, base, model_error))
    return outcome


def _card_key(p):
    """A projected point's card and workload, whichever card it was projected from."""
    return (p.target.name, p.source.model, p.source.precision, p.source.gpu_count, settings(p.source))


def as_measurement(p, m, variant):
    """The projection as a point of source `projected` on the target card, its band as the 95%
    interval (normal: the model's error is measured, no degrees of freedom to lose). `variant` names
    its batch where a card has several (projection.batch=same), as measured points of one workload do."""
    (low, high), t = p.interval, p.target
    # the stack is the source card's; its memory cap stood for the target's memory: neither is the target's
    config = tuple((k, v) for k, v in m.config if not k.startswith("tag:") and k != CAP_KEY)
    spec = Spec(p.math, t.peak_tflops[p.math], t.memory_bandwidth_gbs, t.tdp_w, None, t.memory_gb)
    spread = Spread(math.log(high / p.throughput) / t95(NO_DOF_TO_LOSE), NO_DOF_TO_LOSE, PROJECTED)
    return replace(
        m,
        gpu=t.name,
        side=t.name,
        source=PROJECTED,
        config=config,
        spec=spec,
        variant=variant,
        throughput=p.throughput,
        throughput_min=low,
        throughput_max=high,
        spread=spread,
        per_watt=None,
        per_watt_basis=None,
        per_kusd=None,
    )


def record(p, note):
    s, (low, high) = p.source, p.interval
    parts = "; ".join(f"{f.part} {f.share:.1%} x{f.scale:.3g} ({f.basis})" for f in p.factors if f.share)
    values = (
        s.model,
        s.precision,
        s.gpu_count,
        p.target.name,
        s.gpu,
        p.batch,
        p.math,
        p.throughput,
        low,
        high,
    )
    values += (p.step_ratio, parts, note, " ".join(s.run_ids), p.ceilings.run_id)
    return dict(zip(COLUMNS, values, strict=True))  # in COLUMNS' order


INTRO = (
    "Each measured point on a card you may not have: its step split by what bounds it (its counted ops' FLOPs and "
    "bytes against the card's measured ceilings, the time they do not explain bound by neither), each part scaled "
    "by what bounds it on that card (tensor rate, memory bandwidth, SMs x clock), at the batch the card's profile "
    "runs (the nearest measured batch, scaled through the counted ops), else the largest measured that fits its "
    f"memory. Projected figures are points of source `{PROJECTED}` in every table and chart: never pooled with "
    "measured or published ones. docs/projection.md says how, and what the model misses."
)


def section(outcome):
    """The report's section, projection.csv, and one console line for what was not projected as asked."""
    if not outcome.targets:
        return []
    lines = [INTRO, ""]
    if outcome.shipped:
        lines += [
            f"From the points shipped with gpubench ({outcome.shipped}): the store holds none of another card "
            "that can be projected.",
            "",
        ]
    lines += [f"- {s}" for s in outcome.sentences] or [f"- {nothing_projected(outcome).capitalize()}"]
    for heading, said in (("Not projected:", outcome.refused), (COUNTED, list(outcome.notes.values()))):
        lines += ["", heading, "", *[f"- {line}" for line in said]] if said else []
    rows = [record(p, outcome.notes.get(id(p), "")) for p in outcome.projections]
    return [
        Section(
            "Projection: " + ", ".join(outcome.targets),
            lines,
            [Table(rows, COLUMNS, CSV)],
            warnings=_said(outcome),
        )
    ]


COUNTED = "Projected otherwise than measured (at a batch its source did not run, through the counted ops; or from one card of several):"


def _said(outcome):
    """The console's one line: where the points came from, what was not projected, what was projected otherwise."""
    shipped_from = (
        f"from the points shipped with gpubench ({outcome.shipped}): the store holds none to project"
    )
    said = [f"projection: {shipped_from}"] if outcome.shipped else []
    if not outcome.projections:
        return [*said, f"projection onto {', '.join(outcome.targets)}: {nothing_projected(outcome)}"]
    counts = [f"{len(outcome.refused)} point(s) not projected"] if outcome.refused else []
    if outcome.batch_noted:
        counts.append(
            f"{outcome.batch_noted} projected at a batch their source did not run (through its counted ops) "
            "or not known to fit the card"
        )
    if outcome.from_several:
        counts.append(f"{outcome.from_several} from the nearest of several cards' points")
    if counts:
        said.append(
            f"projection: {', '.join(counts)}; report.md (Projection) says why and which runs measure them, "
            f"{CSV} lists each projected point"
        )
    return said


def nothing_projected(outcome, reported=True):
    """Why nothing was projected, and the run that would make a projection: the first refusal's (every
    one where no report.md lists the others: `reported` false), else a point of another card."""
    if outcome.refused:
        more = len(outcome.refused) - 1
        if not reported:
            return "nothing projected: " + "; ".join(outcome.refused)
        return (
            "nothing projected: " + outcome.refused[0] + (f" (and {more} more in report.md)" if more else "")
        )
    return (
        f"nothing projected: no measured point of a card other than {', '.join(outcome.targets)} that the filters keep; measure one: "
        "python -m src.train gpu=<a card you have> model=<model> precision=<precision>, and its ceilings: "
        "python -m src.train gpu=<that card> model=ceilings"
    )


def errors(cfg):
    """What is wrong with compare's `project` and `projection.*`, one line each."""
    names, asked = known(), list(cfg.project)
    unknown = [name for name in asked if name not in names]
    found = [f"project={asked}: {name!r} is not a gpu profile; one of {', '.join(names)}" for name in unknown]
    if asked and cfg.by:
        found.append(
            f"project={asked} with by={cfg.by}: by= compares the values of a tag on one card; "
            "project= compares cards: give one of them"
        )
    batch, model_error = cfg.projection.batch, cfg.projection.model_error
    if batch not in BATCHES:
        found.append(f"projection.batch={batch!r}: must be one of {', '.join(BATCHES)}")
    if not 0 <= model_error < 10:
        found.append(f"projection.model_error={model_error}: must be a fraction >= 0 (0.2 = 20%)")
    return found


# ---- the inputs: each measured point, its card's ceilings and spec sheet, as its runs logged them ----
def source_point(m, counts):
    """A measured point as the projection reads it: its summary (src/compare/runs.py); `counts`: a
    run's counted ops by its id."""
    first = m.runs[0].result
    batch = int(float(dict(m.config).get(recorded.BATCH_SIZE) or first.batch_size or 0))
    cap = positive_number(first.params.get(CAP_KEY))
    cap_said, cap_set = (f", {cap:g} GB cap", f" {CAP_KEY}={cap:g}") if cap else ("", "")
    train = f"python -m src.train gpu={m.gpu} model={m.model} precision={m.precision} gpu.count={m.gpu_count}"
    return SourcePoint(
        label=f"{m.gpu} x{m.gpu_count} {m.workload} {m.precision} [batch {batch}{cap_said}]",
        gpu=m.gpu,
        model=m.model,
        precision=m.precision,
        math=m.spec.peak_key,
        gpu_count=m.gpu_count,
        batch=batch,
        throughput=m.throughput,
        interval=m.interval,
        shares=m.shares,
        flops_per_item=m.flops_per_item,
        memory_gb=cap or m.peak_memory_gb,
        run_ids=tuple(r.run_id for r in m.runs),
        remeasure=f"{train} model.batch_size={batch}{cap_set}",
        group=tuple((k, v) for k, v in m.config if k not in NOT_THE_WORKLOAD),
        power_bound=m.throttled_power_share,
        counts=next(filter(None, map(counts, (r.run_id for r in m.runs))), None),
        tf32=first.tf32_math,
        items_per_step=first.window.items_per_step,
        profiled_step_s=median_of(
            r.result.breakdown.step_ms / 1e3
            for r in m.runs
            if r.result.breakdown and r.result.breakdown.step_ms
        ),
    )


def source_figures(point, by_id, profile):
    """The card a point ran on: the spec sheet its run logged (its profile for figures it never
    logged), its profile's measured figures, else its latest ceilings run of the same software."""
    profile = dict(profile or {"name": point.gpu})
    peak, logged = (
        "gpu.peak_tflops.",
        {k: positive_number(v) for k, v in by_id[point.run_ids[0]].params.items()},
    )
    logged_peaks = {k.removeprefix(peak): v for k, v in logged.items() if k.startswith(peak) and v}
    profile["peak_tflops"] = profile.get("peak_tflops", {}) | logged_peaks
    profile |= {key: logged[f"gpu.{key}"] for key in LOGGED_FIGURES if logged.get(f"gpu.{key}")}
    latest = explain.matching_ceilings(by_id.values(), *[by_id[i] for i in point.run_ids])
    if latest is None:
        raise ProjectionRefused(
            f"{point.label}: no ceilings run of its card, count and software; run: "
            f"python -m src.train model=ceilings gpu={point.gpu} gpu.count={point.gpu_count}"
        )
    found = latest.ceilings
    return figures(
        Card.from_profile(profile), Ceilings(latest.run_id, found.matmul_tflops, found.memory_copy_gbs)
    )


def stored_counts(uri):
    """A run's counted ops as its job logged them (recorded.OP_COUNTS) in the store at `uri`, by its
    id; None for a run without."""
    from mlflow.exceptions import MlflowException

    from src.tracking import store

    client = store.client(uri)

    def read(run_id):
        with tempfile.TemporaryDirectory() as folder:
            try:
                path = client.download_artifacts(run_id, recorded.OP_COUNTS, folder)
            except (MlflowException, OSError):
                return None
            return OpCounts.from_json(json.loads(Path(path).read_text()))

    return read


def _project(cfg, runs, counts):
    """The measured points of `runs` that the filters of a projection's sources keep, of every gpu
    that is not itself a target, onto each card of `project=`, and as compare's points. `counts`: a
    run's counted ops by its id."""
    targets, model_error = list(cfg.project), cfg.projection.model_error
    sources = OmegaConf.merge(cfg, {"gpus": [], "sources": [MEASURED]})
    records = [r for r in map(to_record, runs) if r]
    measured = [m for m in aggregate(select(records, sources)[0]) if m.gpu not in targets]
    # the targets' spec sheets and the measured cards' (for figures their runs never logged)
    cards = profiles([*targets, *(m.gpu for m in measured)])
    by_id, done = {r.run_id: r for r in runs}, Outcome(targets)
    points = [source_point(m, counts) for m in measured]
    for name in targets:
        try:
            target = Card.from_profile(cards.get(name) or {"name": name})
        except ProjectionRefused as exc:
            done.refused.append(str(exc))
            continue
        for chosen in choose(points, target, cfg.projection.batch):
            point = chosen.point
            if chosen.refused:
                done.refused.append(chosen.refused)
                continue
            try:
                source = source_figures(point, by_id, cards.get(point.gpu))
                projection = project(point, source, figures(target, source=source), model_error, chosen.batch)
            except ProjectionRefused as exc:
                done.refused.append(str(exc))
                continue
            done.projections.append(projection)
            if chosen.note:
                done.notes[id(projection)] = chosen.note
    done.refused = list(dict.fromkeys(done.refused))  # a point without its breakdown: once, not per target
    done.projections, set_aside = nearest_source(done.projections, set(done.notes))
    done.batch_noted = sum(id(p) in done.notes for p in done.projections)
    done.from_several = len(set_aside)
    said = {id(p): [done.notes.get(id(p)), set_aside.get(id(p))] for p in done.projections}
    done.notes = {i: "; ".join(filter(None, notes)) for i, notes in said.items() if any(notes)}
    per_card = Counter(map(_card_key, done.projections))
    for p in done.projections:
        [m] = [m for m in measured if m.runs[0].run_id == p.source.run_ids[0]]
        variant = f"batch_size={p.batch}" if per_card[_card_key(p)] > 1 else ""
        done.measurements.append(as_measurement(p, m, variant))
    return done
