"""The projection's inputs, read back from the runs compare reads: each measured point with its
step-time breakdown, FLOPs, batch and memory; its card's ceilings run; its card's spec sheet as
the run logged it (today's profile for figures it never logged)."""

from __future__ import annotations

import statistics

from src import recorded
from src.compare import explain
from src.compare.runs import Measurement
from src.hardware import devices
from src.projection.model import Card, Ceilings, SourcePoint

CAP_PARAM = "gpu.memory_limit_gb"
NOT_THE_WORKLOAD = (recorded.BATCH_SIZE, "model.batch_size", CAP_PARAM)  # what one workload's points differ in
LOGGED_FIGURES = ("memory_gb", "memory_bandwidth_gbs", "host_link_gbs", "gpu_link_gbs", "tdp_w")


def source_point(m: Measurement, runs: list[recorded.RunResult]) -> SourcePoint:
    """A measured point (`runs`: its runs as read back) as the projection reads it."""
    metrics = [r.metrics for r in runs]
    params = runs[0].params
    with_shares = [r.shares for r in runs if r.shares]
    shares = {s: statistics.median(x[s] or 0.0 for x in with_shares) for s in recorded.SHARES} if with_shares else None
    config = dict(m.config)
    batch = int(float(config.get(recorded.BATCH_SIZE) or runs[0].batch_size or 0))
    cap = _number(params.get(CAP_PARAM))
    peaks = [x[recorded.PEAK_MEMORY_GB] for x in metrics if recorded.PEAK_MEMORY_GB in x]
    flops = [x[recorded.FLOPS_PER_ITEM] for x in metrics if recorded.FLOPS_PER_ITEM in x]
    cap_part = f" gpu.memory_limit_gb={cap:g}" if cap else ""
    return SourcePoint(
        label=f"{m.gpu} x{m.gpu_count} {m.workload} {m.precision} [batch {batch}{f', {cap:g} GB cap' if cap else ''}]",
        gpu=m.gpu,
        model=m.model,
        precision=m.precision,
        math=m.spec.peak_key,
        gpu_count=m.gpu_count,
        batch=batch,
        throughput=m.throughput,
        interval=m.interval,
        shares=shares,
        flops_per_item=statistics.median(flops) if flops else None,
        memory_gb=cap or (max(peaks) if peaks else None),
        run_ids=tuple(r.run_id for r in runs),
        remeasure=(
            f"python -m src.train gpu={m.gpu} model={m.model} precision={m.precision} gpu.count={m.gpu_count} "
            f"model.batch_size={batch}{cap_part}"
        ),
        group=tuple((k, v) for k, v in m.config if k not in NOT_THE_WORKLOAD),
    )


def ceilings_of(m: Measurement, by_id: dict, found: list[explain.Ceilings]) -> Ceilings | None:
    """The point's card's ceilings: the latest ceilings run of its GPU name, count and stack."""
    runs = [by_id[r.run_id] for r in m.runs if r.run_id in by_id]
    matched = [explain.matching_ceilings(found, r) for r in runs]
    latest = max((c for c in matched if c), key=lambda c: c.started, default=None)
    if latest is None:
        return None
    prefix, suffix = recorded.matmul_figure("|").split("|")
    matmul = {
        k.removeprefix(prefix).removesuffix(suffix): v
        for k, v in latest.figures.items()
        if k.startswith(prefix) and k.endswith(suffix)
    }
    return Ceilings(latest.run_id, matmul, latest.figures.get(recorded.MEMORY_COPY_GBS))


def source_card(m: Measurement, params: dict) -> Card:
    """The card a point ran on: the spec sheet its run logged, today's profile for the rest."""
    profile = dict(devices.load_profile(m.gpu) or {"name": m.gpu})
    logged_peaks = {k.removeprefix("gpu.peak_tflops."): _number(v) for k, v in params.items() if k.startswith("gpu.peak_tflops.")}
    profile["peak_tflops"] = {**profile.get("peak_tflops", {}), **{k: v for k, v in logged_peaks.items() if v}}
    for key in LOGGED_FIGURES:
        if _number(params.get(f"gpu.{key}")):
            profile[key] = _number(params[f"gpu.{key}"])
    return Card.from_profile(profile)


def target_card(name: str) -> Card:
    return Card.from_profile(devices.load_profile(name) or {"name": name})


def _number(value) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None
