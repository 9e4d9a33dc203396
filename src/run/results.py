"""Combine the ranks' reports into the job's figures; derive efficiency figures."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from src import recorded
from src.reports import Report
from src.run import breakdown
from src.run.phases import rank_marks
from src.stats import percentile, relative_ci_halfwidth


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
    matmul_screen: str | None = None  # ...and its matmul_screen.csv
    foreign: str = ""  # other programs seen on the job's GPUs (src/hardware/occupancy.py), else ''
    communication: dict = field(default_factory=dict)  # NCCL's variables as the first rank saw them

    @property
    def measured_items(self) -> float:
        """Items every rank trained in the window, together (none in a ceilings job)."""
        return self.metrics.get(recorded.ITEMS_PER_STEP, 0) * self.metrics.get(recorded.MEASURED_STEPS, 0)


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
        recorded.THROUGHPUT: throughput,
        recorded.THROUGHPUT_PER_GPU: throughput / world,
        **summarize_step_times(step_times),
        recorded.ITEMS_PER_STEP: items_per_step,
        recorded.BATCH_SIZE: first.batch_size,  # per GPU: the one model.batch_size=auto chose, if so
        recorded.LOSS_FIRST: first.loss_first,
        recorded.LOSS_LAST: first.loss_last,
        # where start-up goes: launching the ranks, then building the model and its first step
        recorded.TIME_TO_RANK_START_S: max(r.rank_started for r in ranks) - job_started,
        recorded.TIME_TO_FIRST_STEP_S: max(r.first_step_done for r in ranks) - job_started,
        recorded.MEASURED_WINDOW_S: window[1] - window[0],
    }
    memory = [r.peak_memory_gb for r in ranks if r.peak_memory_gb is not None]
    if memory:
        metrics[recorded.PEAK_MEMORY_GB] = max(memory)
        metrics.update({recorded.peak_memory_of_rank(r.rank): r.peak_memory_gb for r in ranks})
    if first.flops_per_item:
        metrics[recorded.FLOPS_PER_ITEM] = first.flops_per_item
        metrics[recorded.ACHIEVED_TFLOPS_PER_GPU] = first.flops_per_item * throughput / world / 1e12
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


def summarize_step_times(step_times_s: list[float]) -> dict:
    mean = statistics.fmean(step_times_s)
    return {
        recorded.STEP_TIME_MS: percentile(step_times_s, 50) * 1e3,
        recorded.STEP_TIME_MEAN_MS: mean * 1e3,
        recorded.STEP_TIME_P10_MS: percentile(step_times_s, 10) * 1e3,
        recorded.STEP_TIME_P90_MS: percentile(step_times_s, 90) * 1e3,
        recorded.STEP_TIME_CI95_REL: relative_ci_halfwidth(step_times_s),
        recorded.STEP_TIME_CV: statistics.stdev(step_times_s) / mean if len(step_times_s) > 1 else 0.0,
        recorded.MEASURED_STEPS: len(step_times_s),
    }


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
    throughput = metrics[recorded.THROUGHPUT]
    price, power = gpu.get("price_usd"), metrics.get(recorded.POWER_MEAN_W)
    figures = {
        recorded.THROUGHPUT_PER_WATT: throughput / (power * world) if power else None,
        recorded.THROUGHPUT_PER_KUSD: throughput / (price * world / 1000) if price else None,
    }
    return {k: v for k, v in figures.items() if v is not None}
