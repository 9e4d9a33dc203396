"""Where a job's GPU time goes: one rank's own set-up (src.rank.worker.TrainingStep) for a config given
as on the suite's command line, in this process on one GPU. Prints the set-up time, the first
step's time (cuDNN autotuning and torch.compile land there), the steady step time and MFU after
warm-up, then the kernels that take the most GPU time over a few profiled steps.

    python benchmarks/profile_step.py gpu=h200 model=gpt2 precision=bf16 benchmark.compile=true
    python benchmarks/profile_step.py gpu=h200 model=resnet50 precision=fp32 benchmark.cudnn_benchmark=false
    python benchmarks/profile_step.py --profile-steps 0 gpu=h200 model=ssd300 precision=fp32 benchmark.cudnn_benchmark_limit=6
"""

from __future__ import annotations

import argparse
import sys
import time

import torch
from common import ROOT
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

sys.path.insert(0, str(ROOT))  # the suite's own modules, as its ranks import them
from src.config.schema import register_configs  # noqa: E402
from src.rank.worker import TrainingStep  # noqa: E402
from src.run.prepare import prepare  # noqa: E402


def rank_config(overrides: list[str]) -> dict:
    register_configs("config_schema")
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    return OmegaConf.to_container(prepare(cfg)[0], resolve=True)  # gpu=auto: the GPU's profile


def timed_steps(step: TrainingStep, count: int) -> float:
    """Mean seconds per step over `count` steps, between CUDA events."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(count):
        step()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / count


def print_kernels(prof, steps: int, step_s: float, top: int) -> None:
    kernels = [e for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA]
    kernels.sort(key=lambda e: e.device_time_total, reverse=True)
    busy_ms = sum(e.device_time_total for e in kernels) / 1e3 / steps
    print(f"GPU busy {busy_ms:.1f} ms of a {step_s * 1e3:.1f} ms step ({busy_ms / (step_s * 1e3):.1%})")
    print(f"{'ms/step':>8} {'share':>6} {'calls':>6}  kernel")
    for e in kernels[:top]:
        ms = e.device_time_total / 1e3 / steps
        print(f"{ms:8.2f} {ms / busy_ms:6.1%} {e.count // steps:6d}  {e.key[:110]}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=20, help="timed steps after warm-up")
    parser.add_argument("--profile-steps", type=int, default=3, help="profiled steps (0: no kernel table)")
    parser.add_argument("--top", type=int, default=25, help="kernels listed")
    parser.add_argument(
        "--sdpa",
        choices=["flash", "mem_efficient", "cudnn", "math"],
        help="allow only this attention backend",
    )
    parser.add_argument("overrides", nargs="*", help="config overrides, as for python -m src.train")
    args = parser.parse_args()

    cfg = rank_config(args.overrides)
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    torch.manual_seed(cfg["benchmark"]["seed"])
    if args.sdpa:
        for backend in ("flash", "mem_efficient", "cudnn", "math"):
            getattr(torch.backends.cuda, f"enable_{backend}_sdp")(backend == args.sdpa)
    started = time.perf_counter()
    step = TrainingStep(cfg, device, world=1)
    torch.cuda.synchronize()
    built = time.perf_counter()
    step()
    torch.cuda.synchronize()
    first = time.perf_counter()
    for _ in range(cfg["benchmark"]["warmup_steps"]):
        step()
    step_s = timed_steps(step, args.steps)

    workload = step.workload
    throughput = workload.items_per_step / step_s
    peak = cfg["gpu"]["peak_tflops"].get(cfg["precision"]["peak_key"])
    tflops = throughput * (workload.flops_per_item or 0) / 1e12
    print(" ".join(sys.argv[1:]))
    print(
        f"set-up {built - started:.1f} s, first step {first - built:.1f} s, "
        f"cudnn.benchmark {torch.backends.cudnn.benchmark} (limit {torch.backends.cudnn.benchmark_limit}), batch {step.batch_size}"
    )
    print(
        f"step {step_s * 1e3:.1f} ms: {throughput:,.1f} {cfg['model']['unit']}, {tflops:.1f} TFLOP/s"
        + (f", MFU {tflops / peak:.1%}" if peak else "")
        + f", peak memory {torch.cuda.max_memory_allocated() / 2**30:.1f} GB"
    )
    if args.profile_steps:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(args.profile_steps):
                step()
            torch.cuda.synchronize()
        print_kernels(prof, args.profile_steps, step_s, args.top)


if __name__ == "__main__":
    main()
