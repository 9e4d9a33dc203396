"""Combine the ranks' reports into the job's figures; derive efficiency figures."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from src.reports import Report
from src.run import breakdown
from src.run.phases import rank_marks
from src.stats import summarize_step_times


@dataclass
class JobOutcome:
    """What the job makes of its ranks' reports: the figures it logs and what it needs to log them."""

    metrics: dict[str, float]
    step_times_s: list[float]  # per step, the slowest rank's
    window: tuple[float, float]  # the measured window (epoch seconds): from the first rank in to the last out
    marks: dict[str, float]  # phase marks, src/run/phases.py
    all_finite: bool
    stop_reason: str  # the ranks agreed on it: ci, max_steps or time_limit
    precision_math: dict
    device_name: str
    runtime_versions: dict
    world_size: int
    breakdown: dict | None = None  # the step-time breakdown, combined (src/run/breakdown.py)
    ceilings_table: str | None = None  # a model=ceilings job's ceilings.csv (src/run/ceilings.py)
    foreign: str = ""  # other programs seen on the job's GPUs (src/hardware/occupancy.py), else ''
    communication: dict = field(default_factory=dict)  # NCCL's variables as the first rank saw them

    @property
    def measured_items(self) -> float:
        """Items every rank trained in the window, together (none in a ceilings job)."""
        return self.metrics.get("items_per_step", 0) * self.metrics.get("measured_steps", 0)


def combine_ranks(ranks: list[Report], job_started: float) -> JobOutcome:
    """Global figures: every rank's items per step over the step time of the slowest rank.

    DDP synchronises ranks every step, so a step ends when its slowest rank ends it.
    """
    ranks = sorted(ranks, key=lambda r: r.rank)
    first = ranks[0]
    n = min(len(r.step_times_s) for r in ranks)
    step_times = [max(r.step_times_s[i] for r in ranks) for i in range(n)]
    items_per_step = sum(r.items_per_step for r in ranks)
    world = len(ranks)
    throughput = items_per_step / statistics.fmean(step_times)
    window = (min(r.window_start for r in ranks), max(r.window_end for r in ranks))
    metrics = {
        "throughput": throughput,
        "throughput_per_gpu": throughput / world,
        **summarize_step_times(step_times),
        "items_per_step": items_per_step,
        "batch_size": first.batch_size,  # per GPU: the one model.batch_size=auto chose, if so
        "loss_first": first.loss_first,
        "loss_last": first.loss_last,
        # where start-up goes: launching the ranks, then building the model and its first step
        "time_to_rank_start_s": max(r.rank_started for r in ranks) - job_started,
        "time_to_first_step_s": max(r.first_step_done for r in ranks) - job_started,
        "measured_window_s": window[1] - window[0],
    }
    memory = [r.peak_memory_gb for r in ranks if r.peak_memory_gb is not None]
    if memory:
        metrics["peak_memory_gb"] = max(memory)
        metrics.update({f"peak_memory_gb_rank{r.rank}": r.peak_memory_gb for r in ranks})
    if first.flops_per_item:
        metrics["flops_per_item"] = first.flops_per_item
        metrics["achieved_tflops_per_gpu"] = first.flops_per_item * throughput / world / 1e12
    return JobOutcome(
        metrics=metrics,
        step_times_s=step_times,
        window=window,
        marks=rank_marks(ranks),
        all_finite=all(r.all_finite for r in ranks),
        stop_reason=first.stop_reason,
        precision_math=first.precision_math,
        device_name=first.device_name,
        runtime_versions=first.runtime_versions,
        world_size=world,
        breakdown=breakdown.combine(ranks),
        communication=first.communication,
    )


def mfu(achieved_tflops_per_gpu: float | None, peak_tflops: float | None) -> float | None:
    """Model FLOPs utilisation: achieved over the spec sheet's dense peak for the math that ran."""
    if not achieved_tflops_per_gpu or not peak_tflops:
        return None
    return achieved_tflops_per_gpu / peak_tflops


def efficiency(metrics: dict, gpu, world: int) -> dict:
    """Efficiency figures from the job's metrics and the gpu profile; one whose inputs are missing
    is left out.

    throughput_per_watt: items/s per watt of measured GPU power (all GPUs); throughput_per_kusd:
    items/s per 1,000 USD of GPU list price. Scaling efficiency needs runs at several GPU counts:
    `python -m src.compare` computes it, against the 1-GPU run of the same settings.
    """
    throughput = metrics["throughput"]
    price, power = gpu.get("price_usd"), metrics.get("power_mean_w")
    figures = {
        "throughput_per_watt": throughput / (power * world) if power else None,
        "throughput_per_kusd": throughput / (price * world / 1000) if price else None,
    }
    return {k: v for k, v in figures.items() if v is not None}
