"""The job's outcome (`JobOutcome`): the ranks' reports combined into the job's figures; efficiency
figures derived from them."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field, replace

from src.results.recorded import Breakdown, CeilingFigures, Window
from src.results.reports import Report
from src.results.stats import percentile, relative_ci_halfwidth
from src.run import profile_figures
from src.run.phases import rank_marks


@dataclass
class JobOutcome:
    """What the job makes of its ranks' reports: the figures it logs and what it needs to log them."""

    measured: Window  # the window's figures (a ceilings job's: its length only)
    step_times_s: list[float]  # per step, the slowest rank's
    window: tuple[float, float]  # the measured window (epoch seconds): from the first rank in to the last out
    marks: dict[str, float]  # phase marks, src/run/phases.py
    all_finite: bool
    stop_reason: str  # the ranks agreed on it: ci, max_steps or time_limit
    precision_math: dict
    device_name: str
    runtime_versions: dict
    world_size: int
    breakdown: Breakdown | None = None  # the step-time breakdown, combined (src/run/profile_figures.py)
    top_kernels: list[dict] | None = None  # ...and rank 0's costliest kernels
    ceilings: CeilingFigures | None = None  # a model=ceilings job's figures (src/run/ceiling_figures.py)
    ceilings_table: str | None = None  # a model=ceilings job's ceilings.csv (src/run/ceiling_figures.py)
    matmul_screen: str | None = None  # ...and its matmul_screen.csv
    foreign: str = ""  # other programs seen on the job's GPUs (src/hardware/occupancy.py), else ''
    communication: dict = field(default_factory=dict)  # NCCL's variables as the first rank saw them

    @property
    def measured_items(self) -> float:
        """Items every rank trained in the window, together (none in a ceilings job)."""
        return (self.measured.items_per_step or 0) * (self.measured.measured_steps or 0)


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
    memory = {r.rank: r.peak_memory_gb for r in ranks if r.peak_memory_gb is not None}
    flops = first.flops_per_item or None
    measured = replace(
        summarize_step_times(step_times),
        throughput=throughput,
        throughput_per_gpu=throughput / world,
        items_per_step=items_per_step,
        batch_size=first.batch_size,  # per GPU: the one model.batch_size=auto chose, if so
        loss_first=first.loss_first,
        loss_last=first.loss_last,
        # where start-up goes: launching the ranks, then building the model and its first step
        time_to_rank_start_s=max(r.rank_started for r in ranks) - job_started,
        time_to_first_step_s=max(r.first_step_done for r in ranks) - job_started,
        measured_window_s=window[1] - window[0],
        peak_memory_gb=max(memory.values(), default=None),
        peak_memory_gb_of_rank=memory,
        flops_per_item=flops,
        achieved_tflops_per_gpu=flops * throughput / world / 1e12 if flops else None,
    )
    profiled, top_kernels = profile_figures.combine(ranks)
    return JobOutcome(
        measured=measured,
        step_times_s=step_times,
        window=window,
        marks=rank_marks(ranks),
        all_finite=all(r.all_finite for r in ranks),
        stop_reason=first.stop_reason,
        precision_math=first.precision_math,
        device_name=first.device_name,
        runtime_versions=first.runtime_versions,
        world_size=world,
        breakdown=profiled,
        top_kernels=top_kernels,
        communication=first.communication,
    )


def summarize_step_times(step_times_s: list[float]) -> Window:
    """The window's step-time statistics (the figures about its items come from the ranks)."""
    mean = statistics.fmean(step_times_s)
    return Window(
        step_time_ms=percentile(step_times_s, 50) * 1e3,
        step_time_mean_ms=mean * 1e3,
        step_time_p10_ms=percentile(step_times_s, 10) * 1e3,
        step_time_p90_ms=percentile(step_times_s, 90) * 1e3,
        step_time_ci95_rel=relative_ci_halfwidth(step_times_s),
        step_time_cv=statistics.stdev(step_times_s) / mean if len(step_times_s) > 1 else 0.0,
        measured_steps=len(step_times_s),
    )


def mfu(achieved_tflops_per_gpu: float | None, peak_tflops: float | None) -> float | None:
    """Model FLOPs utilisation: achieved over the spec sheet's dense peak for the math that ran."""
    if not achieved_tflops_per_gpu or not peak_tflops:
        return None
    return achieved_tflops_per_gpu / peak_tflops


def efficiency(
    measured: Window, peak_tflops: float | None, power_mean_w: float | None, gpu, world: int
) -> Window:
    """The window's efficiency figures from the gpu profile and measured power; one whose inputs
    are missing stays None.

    mfu: see `mfu`; throughput_per_watt: items/s per watt of measured GPU power (all GPUs);
    throughput_per_kusd: items/s per 1,000 USD of GPU list price. Scaling efficiency needs runs at
    several GPU counts: `python -m src.compare` computes it, against the 1-GPU run of the same settings.
    """
    throughput, price = measured.throughput, gpu.get("price_usd")
    return replace(
        measured,
        mfu=mfu(measured.achieved_tflops_per_gpu, peak_tflops),
        throughput_per_watt=throughput / (power_mean_w * world) if power_mean_w else None,
        throughput_per_kusd=throughput / (price * world / 1000) if price else None,
    )
