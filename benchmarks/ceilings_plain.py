"""The ceilings job's bandwidth figures checked against plain PyTorch: device-memory copy and read
and pinned host copies measured here in a few lines of torch, then `python -m src.train
model=ceilings` on the same device, then plain again (drift hits both alike), and the suite /
plain ratio of each figure. The matmul figures are held against mamf-finder (benchmarks/peers.py).

    python benchmarks/ceilings_plain.py                    # on a GPU: target every ratio within 3%
    python benchmarks/ceilings_plain.py --memory-mb 4 --host-mb 4 -- gpu=cpu benchmark=smoke

Arguments after `--` go to the suite's job (its buffers must match: on a CPU, benchmark=smoke is
4 MB). Prints each figure, the ratios, and the ceilings job's wall time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from common import job_runs, recorded, run_suite

TOLERANCE = 0.03


def per_call_s(fn, cuda: bool, sample_s: float = 0.05, samples: int = 7) -> float:
    """Median seconds per call over `samples` blocks of back-to-back calls, each about sample_s."""
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    fn()
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    calls = max(1, round(sample_s / max(time.perf_counter() - t0, 1e-9)))
    times = []
    for _ in range(samples):
        sync()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        times.append((time.perf_counter() - t0) / calls)
    return statistics.median(times)


def plain_figures(device: torch.device, memory_mb: float, host_mb: float) -> dict[str, float]:
    cuda = device.type == "cuda"
    figures = {}
    figures |= device_memory(device, int(memory_mb * 2**20))
    if cuda:
        host_size = int(host_mb * 2**20)
        host = torch.empty(host_size, dtype=torch.uint8, pin_memory=True)
        dev = torch.empty(host_size, dtype=torch.uint8, device=device)
        figures[recorded.ceiling_metric(recorded.HOST_TO_DEVICE_GBS)] = (
            host_size / per_call_s(lambda: dev.copy_(host, non_blocking=True), cuda) / 1e9
        )
        figures[recorded.ceiling_metric(recorded.DEVICE_TO_HOST_GBS)] = (
            host_size / per_call_s(lambda: host.copy_(dev, non_blocking=True), cuda) / 1e9
        )
    return figures


def device_memory(device: torch.device, size: int) -> dict[str, float]:
    cuda = device.type == "cuda"
    source = torch.ones(size // 4, device=device)
    target = torch.empty_like(source)
    return {
        recorded.ceiling_metric(recorded.MEMORY_COPY_GBS): 2 * size / per_call_s(lambda: target.copy_(source), cuda) / 1e9,
        recorded.ceiling_metric(recorded.MEMORY_READ_GBS): size / per_call_s(lambda: source.sum(), cuda) / 1e9,
    }


def main() -> None:
    argv = sys.argv[1:]
    suite_args = argv[argv.index("--") + 1 :] if "--" in argv else []
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memory-mb", type=float, default=2048)
    parser.add_argument("--host-mb", type=float, default=1024)
    args = parser.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    before = plain_figures(device, args.memory_mb, args.host_mb)
    with tempfile.TemporaryDirectory() as store:
        gpu = [] if any(a.startswith("gpu=") for a in suite_args) else ["gpu=auto"]
        wall = run_suite(["model=ceilings", *gpu, *suite_args], Path(store))
        run = job_runs(Path(store))[0]
        suite = run.data.metrics
    after = plain_figures(device, args.memory_mb, args.host_mb)
    print(
        f"\nceilings job: {wall:.1f} s wall (command), {suite.get(recorded.MEASURED_WINDOW_S, float('nan')):.1f} s measuring"
    )
    print(f"{'figure':<34}{'suite':>12}{'plain':>12}{'ratio':>8}")
    worst = 0.0
    for key in before:
        plain = statistics.fmean([before[key], after[key]])
        if key not in suite:
            print(f"{key:<34}{'-':>12}{plain:>12,.5g}")
            continue
        ratio = suite[key] / plain
        worst = max(worst, abs(ratio - 1))
        print(f"{key:<34}{suite[key]:>12,.5g}{plain:>12,.5g}{ratio:>8.3f}")
    print(f"largest difference {worst:.1%} ({'within' if worst <= TOLERANCE else 'beyond'} {TOLERANCE:.0%})")


if __name__ == "__main__":
    main()
