"""Figures that cannot be right: flagged in the report and as an `anomaly` tag on their runs.

- scaling efficiency above 100% against the 1-GPU run of the same workload (data parallelism
  with a fixed per-GPU batch cannot beat linear scaling beyond timing noise);
- a multi-GPU run slower than its 1-GPU run;
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

from src import recorded
from src.compare.analysis import RelativeRow
from src.compare.ratio import GPU_SHARED
from src.compare.runs import Measurement
from src.config import points
from src.console import number

SCALING_ABOVE_100 = "scaling_above_100"
SLOWER_THAN_1GPU = "slower_than_1gpu"
OUTSIDE_SPEC = "outside_spec"
CI_NOT_MET = "ci_not_met"
PROCEDURE_DIFFERS = "procedure_differs"


@dataclass(frozen=True)
class Anomaly:
    kind: str
    measurement: Measurement
    detail: str
    runs: tuple[str, ...] = ()  # the ids of the runs that earned it; () for the whole figure

    @property
    def run_ids(self) -> tuple[str, ...]:
        return self.runs or tuple(r.run_id for r in self.measurement.runs)


def scaling_efficiency(measurements: list[Measurement]) -> dict[tuple, float]:
    """Point -> throughput over gpu_count x the 1-GPU throughput of the same workload and source."""
    singles = {m.point: m.throughput for m in measurements if m.gpu_count == 1}
    efficiency = {}
    for m in measurements:
        one = singles.get((m.side, 1, m.model, m.precision, m.source, m.config))
        if one is not None and m.gpu_count > 1:
            efficiency[m.point] = m.throughput / (m.gpu_count * one)
    return efficiency


def scaling_anomalies(measurements: list[Measurement], tolerance: float) -> list[Anomaly]:
    efficiency = scaling_efficiency(measurements)
    found = []
    for m in measurements:
        if m.point not in efficiency:
            continue
        ratio = efficiency[m.point]
        one = m.throughput / (m.gpu_count * ratio)
        figures = f"1 GPU {number(one)} -> {m.gpu_count} GPUs {number(m.throughput)} {m.unit}"
        if m.throughput < one:
            found.append(Anomaly(SLOWER_THAN_1GPU, m, f"slower than its 1-GPU run: {figures}"))
        elif ratio > 1 + tolerance:
            found.append(Anomaly(SCALING_ABOVE_100, m, f"scaling efficiency {ratio:.0%}: {figures}"))
    return found


def _flawed_runs(measurements: list[Measurement], kind: str, flaw, said: str) -> list[Anomaly]:
    """Points with runs whose `flaw` (what a run read back says of it) is set: those runs earn it."""
    found = []
    for m in measurements:
        flawed = [r for r in m.runs if flaw(r.result)]
        if flawed:
            detail = f"{len(flawed)} of {m.n_runs} run(s) {said}{flaw(flawed[0].result)}"
            found.append(Anomaly(kind, m, detail, tuple(r.run_id for r in flawed)))
    return found


def stopping_anomalies(measurements: list[Measurement]) -> list[Anomaly]:
    """Points with a run that stopped before its confidence interval met target_ci."""
    return _flawed_runs(measurements, CI_NOT_MET, lambda run: run.missed, "stopped early; ")


def shared_gpu_anomalies(measurements: list[Measurement]) -> list[Anomaly]:
    """Points with a run during which another program held one of its GPUs."""
    return _flawed_runs(measurements, GPU_SHARED, lambda run: run.foreign, "shared a GPU: ")


def procedure_anomalies(measurements: list[Measurement]) -> list[Anomaly]:
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
        keys = sorted(k for k in set().union(*settings) if len({s.get(k) for s in settings}) > 1)
        values = {k: "/".join(sorted({str(s.get(k)) for s in settings})) for k in keys}
        what = ", ".join(f"{k.removeprefix('benchmark.')} {v}" for k, v in values.items())
        odd = tuple(i for i, way in procedures.items() if way != usual)
        detail = f"repeats measured with different {what}: {len(odd)} of {m.n_runs}"
        found.append(Anomaly(PROCEDURE_DIFFERS, m, detail, odd))
    return found


def spec_checkable(rows: list[RelativeRow]):
    """Each row the spec check can judge, with both sides' limits: a baseline on another side, and
    peak TFLOP/s and bandwidth logged on both (a profile without them: nothing to check against)."""
    for row in rows:
        m, base = row.measurement, row.baseline
        if base is not None and m.side != base.side and (ours := _limits(m)) and (theirs := _limits(base)):
            yield row, ours, theirs


def spec_anomalies(rows: list[RelativeRow], tolerance: float) -> list[Anomaly]:
    found = []
    for row, ours, theirs in spec_checkable(rows):
        m, base = row.measurement, row.baseline
        compute, bandwidth = ours[1] / theirs[1], ours[2] / theirs[2]
        low, high = min(compute, bandwidth), max(compute, bandwidth)
        if row.relative > high * (1 + tolerance) or row.relative < low / (1 + tolerance):
            detail = (
                f"{row.relative:.2f}x {base.side} outside the spec range {low:.2f}-{high:.2f}x "
                f"(peak {ours[0]} {ours[1]:g}/{theirs[1]:g} TFLOP/s, "
                f"bandwidth {ours[2]:g}/{theirs[2]:g} GB/s)"
            )
            found.append(Anomaly(OUTSIDE_SPEC, m, detail))
    return found


def _limits(m: Measurement) -> tuple[str, float, float] | None:
    """(peak key, peak TFLOP/s, GB/s) as its runs logged them, or None where they lack them."""
    spec = m.spec
    if spec.peak_tflops and spec.memory_bandwidth_gbs:
        return spec.peak_key, spec.peak_tflops, spec.memory_bandwidth_gbs
    return None


KINDS = (SCALING_ABOVE_100, SLOWER_THAN_1GPU, OUTSIDE_SPEC, CI_NOT_MET, GPU_SHARED, PROCEDURE_DIFFERS)
_ENTRY = re.compile(rf"; (?=(?:{'|'.join(KINDS)}): )")  # the tag's entries, `kind: detail; kind: detail`


def checked_kinds(measurements: list[Measurement], rows: list[RelativeRow]) -> dict[tuple, set[str]]:
    """Point -> the kinds whose check ran on it with everything it needs: a filter that leaves out
    a multi-GPU point's 1-GPU run, or a baseline without spec figures, leaves that check unmade."""
    scaled = scaling_efficiency(measurements)
    specced = {row.measurement.point for row, _, _ in spec_checkable(rows)}
    checked = {}
    for m in measurements:
        kinds = {CI_NOT_MET, GPU_SHARED, PROCEDURE_DIFFERS}  # a point's own runs are all they need
        if m.gpu_count == 1 or m.point in scaled:
            kinds |= {SCALING_ABOVE_100, SLOWER_THAN_1GPU}
        if m.point in specced:
            kinds.add(OUTSIDE_SPEC)
        checked[m.point] = kinds
    return checked


def tag_runs(
    uri: str, measurements: list[Measurement], rows: list[RelativeRow], anomalies: list[Anomaly]
) -> int:
    """Set `anomaly` on the runs behind each flagged figure, clear an entry where its check ran
    again and no longer holds, keep one whose check this comparison could not make; how many runs
    carry the tag now."""
    from src.tracking import store

    flagged: dict[str, list[str]] = {}
    for anomaly in anomalies:
        for run_id in anomaly.run_ids:
            flagged.setdefault(run_id, []).append(f"{anomaly.kind}: {anomaly.detail}")
    checked = checked_kinds(measurements, rows)
    mlflow_client = store.client(uri)
    tagged = 0
    for m in measurements:
        for run in m.runs:
            old = run.result.anomaly
            kept = [e for e in _ENTRY.split(old or "") if e.split(":")[0] in set(KINDS) - checked[m.point]]
            text = "; ".join(kept + flagged.get(run.run_id, []))[:5000]
            tagged += bool(text)
            if text and text != old:
                mlflow_client.set_tag(run.run_id, recorded.ANOMALY, text)
            elif not text and old is not None:
                mlflow_client.delete_tag(run.run_id, recorded.ANOMALY)
    return tagged
