"""One rank's timed loop, in-process: one rank, no process group (src/rank/worker.py).

The stopping rule, the report a rank hands its job, and the failures a rank turns into reasons.
The same loop under real processes and ranks is covered end to end in test_cli.py.
"""

from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf

from src.config.finalise import finalize
from src.rank import worker
from src.rank.worker import OutOfMemory, train_rank
from tests.conftest import compose_cfg

TINY = ["gpu=cpu", "benchmark=smoke", "model=resnet50", "model._target_=tests.workloads.by_name"]

pytestmark = pytest.mark.usefixtures("one_thread")


def rank_cfg(*overrides: str) -> dict:
    """What the job hands each rank: the finalised config as a dict, plus the runtime it found. No
    profiled steps after the window unless the overrides ask (test_breakdown.py): the profiler takes
    half a second of each rank, the loop a few milliseconds."""
    args = [*TINY, "benchmark.breakdown_steps=0", *overrides]
    cfg = OmegaConf.to_container(finalize(compose_cfg(args)), resolve=True)
    return cfg | {"runtime": {"device": "cpu", "cpu_threads": 1}}


@pytest.fixture
def ci(monkeypatch):
    """Fix the confidence interval the loop sees: step times on a shared host are noise."""

    def set_ci(value: float) -> None:
        monkeypatch.setattr(worker, "relative_ci_halfwidth", lambda times: value)

    return set_ci


@pytest.mark.parametrize("interval", [0.9, 0.001])  # a tight CI over too few steps has not met the rule
def test_time_limit_stops_a_window_before_min_steps(ci, interval):
    ci(interval)
    (report,) = train_rank(
        rank_cfg(
            "model.name=tiny",
            "benchmark.min_steps=100000",
            "benchmark.max_steps=100000",
            "benchmark.time_limit_s=0.3",
        )
    )
    assert report.stop_reason == "time_limit"
    assert 2 <= len(report.step_times_s) < 100000
    assert 0.3 <= report.window_end - report.window_start < 5


def test_max_steps_ends_a_window_whose_ci_never_meets_the_target(ci):
    ci(0.9)
    (report,) = train_rank(
        rank_cfg(
            "model.name=tiny",
            "benchmark.min_steps=3",
            "benchmark.max_steps=7",
            "benchmark.check_every=100",
        )
    )
    assert report.stop_reason == "max_steps"
    assert len(report.step_times_s) == 7


def test_target_ci_stops_at_the_first_check_once_min_steps_are_measured(ci):
    ci(0.001)
    (report,) = train_rank(
        rank_cfg(
            "model.name=tiny",
            "benchmark.warmup_steps=3",
            "benchmark.min_steps=4",
            "benchmark.max_steps=100",
            "benchmark.check_every=2",
            "benchmark.target_ci=0.01",
        )
    )
    assert report.stop_reason == "ci"
    assert len(report.step_times_s) == 4  # warm-up steps are not in the window
    assert report.rank_started <= report.first_step_done <= report.window_start


def test_report_carries_what_the_job_combines():
    (report,) = train_rank(rank_cfg("model.name=tiny", "model.batch_size=3", "precision=bf16"))
    assert report.rank == 0 and report.world_size == 1
    assert report.batch_size == 3 and report.items_per_step == 3
    assert report.all_finite and report.loss_first > 0 and report.loss_last > 0
    assert report.precision_math["autocast_dtype"] == "bfloat16"
    assert report.device_name == "cpu" and report.peak_memory_gb is None
    assert report.runtime_versions["cuda"] == (torch.version.cuda or "none")


def test_fp32_runs_without_autocast():
    (report,) = train_rank(rank_cfg("model.name=tiny", "precision=fp32"))
    assert report.precision_math["autocast_dtype"] == "none"
    assert report.precision_math["grad_scaling"] is False


def test_a_non_finite_loss_is_reported_not_hidden():
    (report,) = train_rank(rank_cfg("model.name=diverge"))
    assert report.all_finite is False


def test_out_of_memory_names_the_batch_that_did_not_fit():
    with pytest.raises(OutOfMemory, match="out of memory at batch 2 per GPU"):
        train_rank(rank_cfg("model.name=oom"))


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def time(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("step_s", "steps"),
    [
        (0.4, 4),  # slow steps: the first, then three more (1.2 s >= warmup_s)
        (0.01, 10),  # fast steps: warmup_steps ends it
        (5.0, 3),  # very slow steps: still the first and MIN_WARMUP_AFTER_FIRST more
    ],
)
def test_warm_up_ends_at_warmup_steps_or_once_warmup_s_has_passed(monkeypatch, step_s, steps):
    clock = FakeClock()
    monkeypatch.setattr(worker.time, "time", clock.time)
    ran = []

    def step():
        clock.now += step_s
        ran.append(clock.now)

    bench = {"warmup_steps": 10, "warmup_s": 1.0}
    cpu = torch.device("cpu")
    first_done = worker._warm_up(step, worker.StopAgreement(1, cpu), bench, cpu, worker.Progress(None, False))
    assert len(ran) == steps
    assert first_done == ran[0]  # when the first step (autotuning, compilation) ended


def test_autotuning_tries_as_many_algorithms_as_the_config_says(monkeypatch):
    """benchmark.cudnn_benchmark_limit reaches torch; null leaves torch's own default."""
    monkeypatch.setattr(torch.backends.cudnn, "benchmark_limit", torch.backends.cudnn.benchmark_limit)
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", torch.backends.cudnn.benchmark)
    default = torch.backends.cudnn.benchmark_limit
    worker.set_cudnn_autotuning(rank_cfg("benchmark.cudnn_benchmark=true")["benchmark"])
    assert (torch.backends.cudnn.benchmark, torch.backends.cudnn.benchmark_limit) == (True, default)
    limited = rank_cfg("benchmark.cudnn_benchmark=true", f"benchmark.cudnn_benchmark_limit={default - 4}")
    worker.set_cudnn_autotuning(limited["benchmark"])
    assert torch.backends.cudnn.benchmark_limit == default - 4
