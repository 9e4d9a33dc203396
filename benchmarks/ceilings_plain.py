"""The ceilings job checked against plain PyTorch: best-of-shapes dense matmul per math and memory
bandwidth measured here in a few lines of torch, then `python -m src.train model=ceilings` on the
same device, then plain again (drift hits both alike), and the suite / plain ratio of each figure.

    python benchmarks/ceilings_plain.py                    # on a GPU: target every ratio within 3%
    python benchmarks/ceilings_plain.py --sizes 64 128 --memory-mb 4 --host-mb 4 -- gpu=cpu benchmark=smoke

Arguments after `--` go to the suite's job (its sizes must match: on a CPU, benchmark=smoke is the
64/128 set). Prints each figure, the ratios, and the ceilings job's wall time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from common import job_runs, run_suite

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


def plain_figures(
    device: torch.device, sizes: list[int], memory_mb: float, host_mb: float
) -> dict[str, float]:
    cuda = device.type == "cuda"
    maths = ["fp32", "bf16"]
    if cuda:
        maths = ["fp32", "tf32", "fp16", "bf16"]
        if torch.cuda.get_device_capability() >= (8, 9):
            maths.append("fp8")
    dtypes = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
    figures = {}
    for math in maths:
        torch.backends.cuda.matmul.allow_tf32 = math == "tf32"
        best = 0.0
        for n in sizes:
            if math == "fp8":
                a = torch.randn(n, n, device=device).to(torch.float8_e4m3fn)
                b = torch.randn(n, n, device=device).to(torch.float8_e4m3fn).t()
                one = torch.ones((), device=device)

                def call(a=a, b=b, one=one):
                    torch._scaled_mm(
                        a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=True
                    )
            else:
                a = torch.randn(n, n, device=device, dtype=dtypes[math])
                b = torch.randn(n, n, device=device, dtype=dtypes[math])

                def call(a=a, b=b):
                    a @ b

            best = max(best, 2 * n**3 / per_call_s(call, cuda) / 1e12)
            del a, b
        figures[f"ceiling_matmul_{math}_tflops"] = best
    torch.backends.cuda.matmul.allow_tf32 = False
    figures |= device_memory(device, int(memory_mb * 2**20))
    if cuda:
        host_size = int(host_mb * 2**20)
        host = torch.empty(host_size, dtype=torch.uint8, pin_memory=True)
        dev = torch.empty(host_size, dtype=torch.uint8, device=device)
        figures["ceiling_host_to_device_gbs"] = (
            host_size / per_call_s(lambda: dev.copy_(host, non_blocking=True), cuda) / 1e9
        )
        figures["ceiling_device_to_host_gbs"] = (
            host_size / per_call_s(lambda: host.copy_(dev, non_blocking=True), cuda) / 1e9
        )
    return figures


def device_memory(device: torch.device, size: int) -> dict[str, float]:
    cuda = device.type == "cuda"
    source = torch.ones(size // 4, device=device)
    target = torch.empty_like(source)
    return {
        "ceiling_memory_copy_gbs": 2 * size / per_call_s(lambda: target.copy_(source), cuda) / 1e9,
        "ceiling_memory_read_gbs": size / per_call_s(lambda: source.sum(), cuda) / 1e9,
    }


def main() -> None:
    argv = sys.argv[1:]
    suite_args = argv[argv.index("--") + 1 :] if "--" in argv else []
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192, 12288])
    parser.add_argument("--memory-mb", type=float, default=2048)
    parser.add_argument("--host-mb", type=float, default=1024)
    args = parser.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    before = plain_figures(device, args.sizes, args.memory_mb, args.host_mb)
    with tempfile.TemporaryDirectory() as store:
        gpu = [] if any(a.startswith("gpu=") for a in suite_args) else ["gpu=auto"]
        wall = run_suite(["model=ceilings", *gpu, *suite_args], Path(store))
        run = job_runs(Path(store))[0]
        suite = run.data.metrics
    after = plain_figures(device, args.sizes, args.memory_mb, args.host_mb)
    print(
        f"\nceilings job: {wall:.1f} s wall (command), {suite.get('measured_window_s', float('nan')):.1f} s measuring"
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
