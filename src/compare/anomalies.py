"""Figures that cannot be right: flagged in the report and as an `anomaly` tag on their runs.

- scaling efficiency above 100% against the 1-GPU point of the same workload (data parallelism
  with a fixed per-GPU batch cannot beat linear scaling beyond timing noise);
- a multi-GPU point slower than its 1-GPU point;
- a ratio to the baseline outside what the spec sheets allow: a training step is bound by compute
  or by memory bandwidth, so its speed-up lies between the two spec ratios (peak TFLOP/s for the
  math that ran, and GB/s), give or take `spec_tolerance`;
- a figure whose runs stopped (max_steps, time limit) before their step times met target_ci;
- a figure whose runs shared a GPU with another program (the job's `gpu_foreign_processes` tag);
- a figure whose repeats were measured another way (other warm-up, window, stopping rule or
  telemetry sampling: the procedure keys of src/config/points.py).
A flag of some of a figure's runs (shared a GPU, stopped early, measured another way) names and
tags those runs only.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from src.compare.report import Section, Table
from src.compare.runs import Measurement, grouped, keys_that_differ
from src.config import points
from src.console import number
from src.results import recorded

SCALING_ABOVE_100 = "scaling_above_100"
SLOWER_THAN_1GPU = "slower_than_1gpu"
OUTSIDE_SPEC = "outside_spec"
CI_NOT_MET = "ci_not_met"
GPU_SHARED = "gpu_shared"
PROCEDURE_DIFFERS = "procedure_differs"
KINDS = (SCALING_ABOVE_100, SLOWER_THAN_1GPU, OUTSIDE_SPEC, CI_NOT_MET, GPU_SHARED, PROCEDURE_DIFFERS)


@dataclass(frozen=True)
class Anomaly:
    kind: str
    measurement: Measurement
    detail: str
    runs: tuple[str, ...] = ()  # the ids of the runs that earned it; () for the whole figure

    @property
    def run_ids(self):
        return self.runs or tuple(r.run_id for r in self.measurement.runs)


def find(measurements, rows, scaled, tolerances):
    """Every check's anomalies, in the anomalies table's order; `scaled`: each multi-GPU point's scaling
    efficiency (analysis.scaling); `tolerances`: the `anomalies` settings."""
    found = [a for kind in RUN_FLAWS for a in flawed_runs(measurements, kind)]
    found += procedure_anomalies(measurements) + scaling_anomalies(
        measurements, scaled, tolerances.scaling_tolerance
    )
    return found + spec_anomalies(rows, tolerances.spec_tolerance)


def scaling_anomalies(measurements, scaled, tolerance):
    found = []
    for m in measurements:
        if (ratio := scaled.get(m.point)) is None:
            continue
        one = m.throughput / (m.gpu_count * ratio)
        figures = f"1 GPU {number(one)} -> {m.gpu_count} GPUs {number(m.throughput)} {m.unit}"
        if m.throughput < one:
            found.append(Anomaly(SLOWER_THAN_1GPU, m, f"slower than its 1-GPU run: {figures}"))
        elif ratio > 1 + tolerance:
            found.append(Anomaly(SCALING_ABOVE_100, m, f"scaling efficiency {ratio:.0%}: {figures}"))
    return found


# what a run read back says of it that flags its point: the kind it earns, the words before what it says
RUN_FLAWS = {CI_NOT_MET: ("missed", "stopped early; "), GPU_SHARED: ("foreign", "shared a GPU: ")}


def flawed_runs(measurements, kind):
    """Points with a run that stopped before its interval met target_ci (CI_NOT_MET), or during
    which another program held one of its GPUs (GPU_SHARED): those runs earn it."""
    flaw, said = RUN_FLAWS[kind]
    found = []
    for m in measurements:
        flawed = [r for r in m.runs if getattr(r.result, flaw)]
        if flawed:
            detail = f"{len(flawed)} of {m.n_runs} run(s) {said}{getattr(flawed[0].result, flaw)}"
            found.append(Anomaly(kind, m, detail, tuple(r.run_id for r in flawed)))
    return found


def procedure_anomalies(measurements):
    """Points whose repeats were measured another way: 'repeats measured with different max_steps
    20/500: 1 of 4', naming the runs that differ from the most common way."""
    found = []
    for m in measurements:
        procedures = {r.run_id: points.procedure_config(r.result.params) for r in m.runs}
        ways = Counter(procedures.values())
        if len(ways) < 2:
            continue
        usual = ways.most_common(1)[0][0]
        settings = [dict(way) for way in ways]
        values = {k: "/".join(sorted({str(s.get(k)) for s in settings})) for k in keys_that_differ(settings)}
        what = ", ".join(f"{k.removeprefix('benchmark.')} {v}" for k, v in values.items())
        odd = tuple(i for i, way in procedures.items() if way != usual)
        detail = f"repeats measured with different {what}: {len(odd)} of {m.n_runs}"
        found.append(Anomaly(PROCEDURE_DIFFERS, m, detail, odd))
    return found


def spec_checkable(rows):
    """The rows the spec check can judge: a baseline on another side, and peak TFLOP/s and bandwidth
    logged on both (a profile without them: nothing to check against)."""
    for row in rows:
        m, base = row.measurement, row.baseline
        logged = base is not None and all(
            x.spec.peak_tflops and x.spec.memory_bandwidth_gbs for x in (m, base)
        )
        if logged and m.side != base.side:
            yield row


def spec_anomalies(rows, tolerance):
    found = []
    for row in spec_checkable(rows):
        ours, theirs = row.measurement.spec, row.baseline.spec
        compute = ours.peak_tflops / theirs.peak_tflops
        bandwidth = ours.memory_bandwidth_gbs / theirs.memory_bandwidth_gbs
        low, high = min(compute, bandwidth), max(compute, bandwidth)
        if row.value > high * (1 + tolerance) or row.value < low / (1 + tolerance):
            detail = (
                f"{row.value:.2f}x {row.baseline.side} outside the spec range {low:.2f}-{high:.2f}x "
                f"(peak {ours.peak_key} {ours.peak_tflops:g}/{theirs.peak_tflops:g} TFLOP/s, "
                f"bandwidth {ours.memory_bandwidth_gbs:g}/{theirs.memory_bandwidth_gbs:g} GB/s)"
            )
            found.append(Anomaly(OUTSIDE_SPEC, row.measurement, detail))
    return found


COLUMNS = ("kind", "model", "precision", "gpu_count", "gpu", "source", "detail", "run_ids")


def section(found):
    rows = [
        {name: getattr(a.measurement, name, None) for name in COLUMNS}
        | {"kind": a.kind, "model": a.measurement.workload, "gpu": a.measurement.side, "detail": a.detail}
        | {"run_ids": " ".join(a.run_ids)}  # the runs that earned it
        for a in found
    ]
    table = Table(rows, COLUMNS, "anomalies.csv", COLUMNS[:-1] if rows else ())
    return Section(f"Anomalies ({len(rows)})", [] if rows else ["None found."], [table])


_ENTRY = re.compile(rf"; (?=(?:{'|'.join(KINDS)}): )")  # the tag's entries, `kind: detail; kind: detail`
_SPEC_BASELINE = re.compile(rf"{OUTSIDE_SPEC}: \S+ (\S+) outside")  # the baseline its spec check was against


def tag_runs(uri, measurements, rows, scaled, anomalies):
    """Set `anomaly` on the runs behind each flagged figure, clear an entry only where the check that
    made it ran again (the spec check against the same baseline) and no longer holds, keep the others;
    how many runs carry the tag now."""
    from src.tracking import store

    flagged = grouped((run_id, f"{a.kind}: {a.detail}") for a in anomalies for run_id in a.run_ids)
    specced = {row.measurement.point: row.baseline.side for row in spec_checkable(rows)}
    mlflow_client = store.client(uri)
    tagged = 0
    for m in measurements:
        for run in m.runs:
            old = run.result.anomaly
            kept = [e for e in _ENTRY.split(old or "") if not _made_again(e, m, scaled, specced)]
            text = "; ".join(kept + flagged.get(run.run_id, []))[:5000]
            tagged += bool(text)
            if text and text != old:
                mlflow_client.set_tag(run.run_id, recorded.ANOMALY, text)
            elif not text and old is not None:
                mlflow_client.delete_tag(run.run_id, recorded.ANOMALY)
    return tagged


def _made_again(entry, m, scaled, specced):
    """Whether this comparison made again the check behind a tag's entry on a run of `m`: the spec
    check against the baseline the entry names (a filter or another baseline may leave it unmade),
    the scaling checks where the point's 1-GPU run was kept; a point's own runs are all the others need."""
    kind = entry.split(":")[0]
    if kind == OUTSIDE_SPEC:
        against = _SPEC_BASELINE.match(entry)
        return m.point in specced and (against is None or against[1] == specced[m.point])
    if kind in (SCALING_ABOVE_100, SLOWER_THAN_1GPU):
        return m.gpu_count == 1 or m.point in scaled
    return True
