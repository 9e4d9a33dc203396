"""One training rank: build the workload, warm up, time steps until the stopping rule holds.

Runs inside a process started by torch's elastic launcher (torchrun's engine). It never logs to
MLflow: it returns its numbers as data (src/results/reports.py) and the job process combines the ranks.
"""

from __future__ import annotations

import functools
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record

from src.hardware.environment import communication_settings, runtime_versions
from src.models import build_workload
from src.rank.collectives import StopAgreement
from src.rank.memory_cap import apply_memory_cap, cap_note
from src.rank.precision import PrecisionContext
from src.results.recorded import CEILINGS
from src.results.reports import CeilingsReport, RankReport
from src.results.stats import relative_ci_halfwidth


class StepClock:
    """Step boundaries: CUDA events on a GPU (no host sync per step), perf_counter on a CPU."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.marks: list = []
        self.durations: list[float] = []  # seconds, for the boundaries read so far

    def mark(self) -> None:
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self.marks.append(event)
        else:
            self.marks.append(time.perf_counter())

    def read(self, settled: bool = False) -> list[float]:
        """Durations of the marked steps. `settled` (on a GPU): all but the last, waiting only for
        the mark before it, so that the last step stays queued and the device never idles for the
        read (a drained queue makes the next step pay for its launch, which a steady loop hides)."""
        last = len(self.marks) - (2 if settled and self.cuda else 1)
        if self.cuda and last >= 0:
            self.marks[last].synchronize()
        for i in range(len(self.durations) + 1, last + 1):
            a, b = self.marks[i - 1], self.marks[i]
            self.durations.append(a.elapsed_time(b) / 1e3 if self.cuda else b - a)
        return self.durations


class Progress:
    """Rank 0 tells the job process how far it is, through a small JSON file it overwrites."""

    def __init__(self, path: str | None, enabled: bool, job_id: str | None = None):
        self.path = Path(path) if (path and enabled) else None
        self.job_id = job_id  # the reader skips states of any other job

    def update(self, **state) -> None:
        if self.path is None:
            return
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"job_id": self.job_id, **state}))
        os.replace(tmp, self.path)


def _stop_reason(ci: float, n: int, elapsed: float, over_time: bool, bench: dict) -> str | None:
    """Why this rank would stop now: its CI met target_ci over min_steps or more, else its time or
    step budget ran out (a window the time limit cut short of min_steps never met its rule)."""
    if ci <= bench["target_ci"] and n >= bench["min_steps"]:
        return "ci"
    if over_time or elapsed >= bench["time_limit_s"]:
        return "time_limit"
    return "max_steps" if n >= bench["max_steps"] else None


def set_cudnn_autotuning(benchmark: dict) -> None:
    """cuDNN autotuning on or off, and how many algorithms it tries per convolution (null keeps
    torch's default)."""
    torch.backends.cudnn.benchmark = benchmark["cudnn_benchmark"]
    if benchmark.get("cudnn_benchmark_limit") is not None:
        torch.backends.cudnn.benchmark_limit = benchmark["cudnn_benchmark_limit"]


class TrainingStep:
    """One rank's model, optimizer and precision, as one callable training step.

    Everything a rank sets up before its first step: cuDNN autotuning, the batch size (searched
    here for `auto`), the workload, DDP across ranks, torch.compile and the optimizer.
    """

    def __init__(self, cfg: dict, device: torch.device, world: int, batch_size: int | None = None):
        """`batch_size` overrides the config's (a smaller batch after an auto batch failed)."""
        model_cfg = {**cfg["model"], "channels_last": cfg["benchmark"].get("channels_last", False)}
        if device.type == "cuda":
            set_cudnn_autotuning(cfg["benchmark"])
        apply_memory_cap(cfg["gpu"].get("memory_limit_gb"), device)  # before anything is allocated
        self.precision = PrecisionContext(cfg["precision"], device)
        self.batch_size = batch_size or model_cfg["batch_size"]
        if self.batch_size == "auto":  # searched in the rank's own process, before anything is timed
            from src.rank.autobatch import find_batch_size

            self.batch_size = find_batch_size(model_cfg, self.precision, device, world, cap_note(cfg))
        self.workload = build_workload(model_cfg, self.batch_size, device)
        model = self.workload.model
        model.train()
        if world > 1:
            model = torch.nn.parallel.DistributedDataParallel(
                model, device_ids=[device.index] if device.type == "cuda" else None
            )
        if cfg["benchmark"].get("compile"):
            model = torch.compile(model)
        self.model = model
        self.optimizer = self.workload.make_optimizer()
        self.device = device
        self.count_finite_from_here()
        if device.type == "cuda":  # the peak reported is the training's, not the batch search's trials
            torch.cuda.reset_peak_memory_stats(device)

    def __call__(self) -> torch.Tensor:
        with self.precision.autocast():
            loss = self.workload.loss_fn(self.model, self.workload.batch)
        self.precision.backward_and_step(loss, self.optimizer, self.workload.clip_grad_norm)
        loss = loss.detach()
        # On the device, and in warm-up too: a kernel's first launch may wait for the GPU to drain
        # (lazy module loading), which must not happen inside the measured window.
        self.finite &= torch.isfinite(loss)
        return loss

    def count_finite_from_here(self) -> None:
        """From now on `finite` says whether every loss was finite (the measured window's)."""
        self.finite = torch.ones((), dtype=torch.bool, device=self.device)


def counted_ops(cfg: dict, device: torch.device):
    """The ops of this config's training step, counted at small batches (src/rank/op_count.py)."""
    from src.rank.op_count import count_workload, counting_config

    build = functools.partial(TrainingStep, counting_config(cfg), device, 1)
    return count_workload(lambda batch: build(batch_size=batch), device)


class OutOfMemory(RuntimeError):
    """The rank ran out of device memory; the message names the batch size that did not fit."""


def _explain_oom(train):
    """An OOM anywhere in a rank becomes the one line a sweep summary shows."""

    @functools.wraps(train)
    def wrapper(cfg: dict, *args):
        try:
            return train(cfg, *args)
        except torch.OutOfMemoryError as exc:
            batch = cfg["model"]["batch_size"]
            raise OutOfMemory(f"out of memory at batch {batch} per GPU{cap_note(cfg)}") from exc

    return wrapper


@record
@_explain_oom
def train_rank(cfg: dict, progress_path: str | None = None) -> list[RankReport | CeilingsReport]:
    """Entry point of each rank. `cfg` is the finalised config as a plain dict.

    Returns the reports of all ranks of the job on each node's first rank, [] on the others. Its
    steps are the rank's phases (src/run/phases.py): ranks up, model build, first step and
    warm-up, the measured window; then the breakdown (after the window) and the report.
    """
    started = time.time()
    rank = _start_rank(cfg)
    if cfg["model"]["kind"] == CEILINGS:  # the card's own limits, not a training loop
        from src.rank.ceiling_probes import rank_report

        return _gather(rank_report(cfg, rank.device, rank.world, rank.rank, started), rank)
    # one writer per node's job process
    progress = Progress(progress_path, enabled=rank.local_rank == 0, job_id=cfg["runtime"].get("job_id"))
    agreement = StopAgreement(rank.world, rank.device)
    step, built, first_step_done = _build_and_warm_up(cfg, rank, agreement, progress)
    window = _measure(step, agreement, cfg["benchmark"], rank, progress, first_step_done)
    breakdown = None
    if cfg["benchmark"]["breakdown_steps"]:  # after the window: the measured figure never sees the profiler
        from src.rank.step_profiler import profile_steps

        step_s = statistics.median(window.clock.read())
        breakdown = profile_steps(step, rank.device, cfg["benchmark"]["breakdown_steps"], step_s, rank.world)
    report = _report(rank, step, window, breakdown, started, built)
    if breakdown is not None:  # the step's ops counted once the report holds the window's peak memory
        del step
        breakdown["op_counts"] = counted_ops(cfg, rank.device).to_json()
    return _gather(report, rank)


@dataclass(frozen=True)
class Rank:
    """Where this rank is in the job, and its device."""

    rank: int
    local_rank: int
    world: int
    device: torch.device


def _start_rank(cfg: dict) -> Rank:
    """This rank's place in the job, its device and process group, its seed and CPU threads."""
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if cfg["runtime"]["device"] == "cuda":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
        if cfg["runtime"].get("cpu_threads"):
            torch.set_num_threads(cfg["runtime"]["cpu_threads"])
    if world > 1:
        dist.init_process_group(
            backend="nccl" if device.type == "cuda" else "gloo",
            timeout=timedelta(seconds=cfg["benchmark"]["timeout_s"]),
            device_id=device if device.type == "cuda" else None,
        )
    torch.manual_seed(cfg["benchmark"]["seed"] + rank)
    return Rank(rank, local_rank, world, device)


@dataclass
class Window:
    """The measured window as the rank saw it."""

    clock: StepClock
    start: float
    end: float
    first_step_done: float
    first_loss: float
    last_loss: float
    all_finite: bool
    stop_reason: str


def _measure(
    step, agreement: StopAgreement, bench: dict, rank: Rank, progress: Progress, first_step_done: float | None
) -> Window:
    """Timed steps until the ranks agree that the stopping rule holds (src/results/stats.py's CI)."""
    device, world = rank.device, rank.world
    if device.type == "cuda" and first_step_done is not None:
        # One more unmeasured step, unsynced: the GPU is busy with it when the window opens, so
        # the first measured step starts right after the one before, as every later one does.
        step()
    step.count_finite_from_here()
    clock = StepClock(device)
    window_start = time.time()
    clock.mark()
    first_loss = last_loss = None
    n = 0
    while True:
        last_loss = step()
        clock.mark()
        n += 1
        if first_loss is None:
            first_loss = last_loss
            if first_step_done is None:
                first_step_done = time.time()  # no warm-up: the first measured step is the first
        if stop_reason := agreement.settle():  # proposed a step ago (GPUs): this step queued behind it
            break
        # One rank may also stop on the host clock (no device sync), so slow steps cannot overrun
        # the time limit before min_steps; several ranks check only at step counts they share,
        # since each check is a collective.
        over_time = world == 1 and n >= 2 and time.time() - window_start >= bench["time_limit_s"]
        at_check = n >= bench["min_steps"] and (
            n % bench["check_every"] == 0 or n + agreement.lag >= bench["max_steps"]
        )
        if not (at_check or over_time):
            continue
        times = clock.read(settled=True)  # the steps before this one, which stays queued
        elapsed = sum(times)
        ci = relative_ci_halfwidth(times)
        items_per_s = step.workload.items_per_step * world * len(times) / elapsed
        progress.update(phase="measuring", step=n, items_per_s=items_per_s, ci=ci)
        # across GPUs a stop proposed now takes effect after the next step: the budget counts it
        agreement.propose(_stop_reason(ci, n + agreement.lag, elapsed, over_time, bench))
        if not agreement.lag and (stop_reason := agreement.settle()):
            break
    _sync(device)
    return Window(
        clock,
        window_start,
        time.time(),
        first_step_done,
        float(first_loss),
        float(last_loss),
        bool(step.finite),
        stop_reason,  # finite: the window's, before any step outside it
    )


def _report(rank: Rank, step, window: Window, breakdown, started: float, built: float) -> RankReport:
    device = rank.device
    return RankReport(
        rank=rank.rank,
        pid=os.getpid(),
        world_size=rank.world,
        step_times_s=window.clock.read(),
        items_per_step=step.workload.items_per_step,
        flops_per_item=step.workload.flops_per_item,
        batch_size=step.batch_size,
        loss_first=window.first_loss,
        loss_last=window.last_loss,
        all_finite=window.all_finite,
        stop_reason=window.stop_reason,
        precision_math=step.precision.describe(),
        device_name=torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        runtime_versions=runtime_versions(),
        peak_memory_gb=torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None,
        rank_started=started,
        built=built,
        first_step_done=window.first_step_done,
        window_start=window.start,
        window_end=window.end,
        breakdown=breakdown,
        communication=communication_settings(),
    )


def _gather(result, rank: Rank) -> list:
    """An elastic agent collects only its own node's ranks: every rank's report is gathered so that
    node 0's job process can combine the whole job, whichever global ranks it holds."""
    reports = [result]
    if rank.world > 1:
        reports = [None] * rank.world
        dist.all_gather_object(reports, result)
        dist.destroy_process_group()
    return reports if rank.local_rank == 0 else []


AUTO_RETREATS = 3  # times an auto batch that ran out of memory in warm-up is stepped down


def _build_and_warm_up(cfg: dict, rank: Rank, agreement: StopAgreement, progress: Progress):
    """The training step, when it was built and when its first step ended (_warm_up).

    With model.batch_size=auto on one rank, a batch the search passed can still run out of memory
    in warm-up: the allocator's fragments after more steps are not the trials'. It then steps
    down (autobatch.smaller) up to AUTO_RETREATS times, saying so; the batch logged is the one
    measured. Across ranks an out-of-memory on one would leave the others in a collective: it fails.
    """
    batch, tried = None, []  # None: the search's batch
    while True:
        step = TrainingStep(cfg, rank.device, rank.world, batch_size=batch)
        built = time.time()
        try:
            return step, built, _warm_up(step, agreement, cfg["benchmark"], rank.device, progress)
        except torch.OutOfMemoryError as exc:
            if cfg["model"]["batch_size"] != "auto" or rank.world > 1:
                raise
            tried.append(step.batch_size)
            if len(tried) > AUTO_RETREATS or step.batch_size == 1:
                raise OutOfMemory(
                    f"out of memory in warm-up at batch auto per GPU{cap_note(cfg)}: "
                    f"tried {', '.join(map(str, tried))}"
                ) from exc
        from src.rank.autobatch import release, smaller  # outside the handler: its frame held the tensors

        failed, batch = step.batch_size, smaller(step.batch_size)
        del step
        release(rank.device)
        print(
            f"model.batch_size=auto: batch {failed} ran out of memory in warm-up{cap_note(cfg)}; "
            f"running batch {batch}",
            file=sys.stderr,
            flush=True,
        )


MIN_WARMUP_AFTER_FIRST = 2  # steps after the first that warm-up never skips


def _warm_up(
    step, agreement: StopAgreement, bench: dict, device: torch.device, progress: Progress
) -> float | None:
    """Unmeasured steps; returns when the first ended (None without warm-up).

    The first step always (cuDNN autotuning, compilation, allocator growth), then up to
    warmup_steps in all, ending sooner once at least MIN_WARMUP_AFTER_FIRST steps after the first
    have taken warmup_s together: ten 450 ms steps of Mask R-CNN are more warm-up than a
    steady GPU needs. Each step is synced to be timed; ranks agree when to stop.
    """
    first_step_done = None
    for i in range(bench["warmup_steps"]):
        step()
        _sync(device)
        if i == 0:
            first_step_done = time.time()
        progress.update(phase="warmup", step=i + 1, of=bench["warmup_steps"])
        if i >= MIN_WARMUP_AFTER_FIRST:
            agreement.propose("time_limit" if time.time() - first_step_done >= bench["warmup_s"] else None)
            if agreement.settle():
                break
    return first_step_done


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
