"""The benchmark group: warm-up, the stopping rule and the settings the measurement runs with
(conf/benchmark/: `default`, `smoke`)."""

from __future__ import annotations

from dataclasses import dataclass

from omegaconf import MISSING, DictConfig

from src.config.checks import Errors, positive_int


@dataclass
class BenchmarkConfig:
    name: str = MISSING  # the option's own name (conf/benchmark/<name>.yaml)
    warmup_steps: int = 10  # at most; the first step always (autotuning, compilation)
    warmup_s: float = 2.0  # warm-up ends sooner once the steps after the first have taken this long
    min_steps: int = 20
    max_steps: int = 500
    time_limit_s: float = 60.0
    target_ci: float = 0.01  # 95% CI half-width of the mean step time, relative
    check_every: int = 10  # steps between stopping-rule checks (each one syncs the device)
    seed: int = 0
    compile: bool = False  # torch.compile the model
    channels_last: bool | None = None  # NHWC memory format; null: on for vision models, off otherwise
    cudnn_benchmark: bool | None = None  # cuDNN autotuning; null: on unless model.static_shapes is false
    cudnn_benchmark_limit: int | None = (
        None  # algorithms autotuning tries per convolution, 0: all; null: torch's 10
    )
    breakdown_steps: int = 3  # at most this many steps profiled after the window (about 1 s of them); 0: off
    timeout_s: float = 900.0  # a job (or a hung collective) past this is failed
    rerun: bool = False  # run a point even if its config already has a FINISHED run (see src/run/resume.py)
    repeat: int = 0  # which repeat of the point (benchmark.repeat=0,1,2): a run of its own, the same point
    exclusive: bool = False  # true: refuse to start on a GPU another program is using (else: run, flag it)
    cpu_threads: int | None = None  # intra-op threads per CPU rank; null: the cores shared among the ranks


def check(cfg: DictConfig, errors: Errors) -> None:
    b, m = cfg.benchmark, cfg.model
    errors.need(
        isinstance(b.warmup_steps, int) and b.warmup_steps >= 0,
        "benchmark.warmup_steps",
        b.warmup_steps,
        "an integer >= 0",
    )
    errors.need(
        isinstance(b.warmup_s, int | float) and b.warmup_s >= 0,
        "benchmark.warmup_s",
        b.warmup_s,
        "a number of seconds >= 0",
    )
    errors.need(
        positive_int(b.min_steps) and b.min_steps >= 2, "benchmark.min_steps", b.min_steps, "an integer >= 2"
    )
    errors.need(
        positive_int(b.max_steps) and b.max_steps >= b.min_steps,
        "benchmark.max_steps",
        b.max_steps,
        f"an integer >= benchmark.min_steps ({b.min_steps})",
    )
    errors.need(b.time_limit_s > 0, "benchmark.time_limit_s", b.time_limit_s, "> 0 seconds")
    errors.need(
        0 < b.target_ci < 1, "benchmark.target_ci", b.target_ci, "a fraction between 0 and 1 (0.01 = 1%)"
    )
    errors.need(positive_int(b.check_every), "benchmark.check_every", b.check_every, "a positive integer")
    errors.need(isinstance(b.seed, int) and b.seed >= 0, "benchmark.seed", b.seed, "an integer >= 0")
    errors.need(
        b.timeout_s > b.time_limit_s,
        "benchmark.timeout_s",
        b.timeout_s,
        f"more seconds than benchmark.time_limit_s ({b.time_limit_s:g}): it bounds the whole job",
    )
    errors.need(
        isinstance(b.breakdown_steps, int) and b.breakdown_steps >= 0,
        "benchmark.breakdown_steps",
        b.breakdown_steps,
        "an integer >= 0 (steps profiled after the window; 0: no step-time breakdown)",
    )
    errors.need(isinstance(b.repeat, int) and b.repeat >= 0, "benchmark.repeat", b.repeat, "an integer >= 0")
    _check_cpu_threads(b.cpu_threads, cfg.gpu.device, errors)
    limit = b.cudnn_benchmark_limit
    errors.need(
        limit is None or (isinstance(limit, int) and limit >= 0),
        "benchmark.cudnn_benchmark_limit",
        limit,
        "an integer >= 0 (0: every algorithm) or null (torch's default, 10)",
    )
    errors.need(
        not (b.channels_last and m.category != "vision"),
        "benchmark.channels_last",
        b.channels_last,
        f"false for model={m.name}: the NHWC memory format applies to vision models only",
    )


def _check_cpu_threads(threads, device: str, errors: Errors) -> None:
    """benchmark.cpu_threads: null, or a positive count on a CPU. A GPU rank's threads only feed
    the device: refused rather than ignored, so no GPU run is tagged with a count that did nothing."""
    if threads is None:
        return
    key = "benchmark.cpu_threads"
    if device == "cuda":
        errors.need(False, key, threads, "null on a GPU (it sizes a CPU rank's thread pool)")
    else:
        errors.need(
            positive_int(threads), key, threads, "a positive integer, or null (the cores shared by the ranks)"
        )
