"""Busy-GPU drill: a second program holds the GPU with a small matmul loop while a job measures.

    python benchmarks/busy_gpu.py model=resnet50 precision=amp benchmark.time_limit_s=20

Three jobs of the same point into one temporary store: alone, beside the matmul loop (it must be
recorded in the run's gpu_foreign_processes tag and said on the result line), and beside it with
benchmark.exclusive=true (it must be refused, naming the loop's pid). Prints each throughput and
what was recorded; exits 1 when a check fails. Needs a CUDA GPU; the loop runs on the first one
the job would pick (CUDA device 0 in PCI bus order).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, job_runs, suite_command

HOG = """
import sys, torch
a = torch.randn(2048, 2048, device="cuda")
torch.cuda.synchronize()
print("holding", flush=True)
while True:
    for _ in range(50):
        a = (a @ a).clamp_(-1, 1)
    torch.cuda.synchronize()
"""


def start_hog() -> subprocess.Popen:
    env = {**os.environ, "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "0"}
    hog = subprocess.Popen([sys.executable, "-c", HOG], stdout=subprocess.PIPE, text=True, env=env)
    if hog.stdout.readline().strip() != "holding":
        sys.exit("the matmul loop did not start on the GPU")
    return hog


def job(overrides: list[str], store: Path) -> tuple[int, str]:
    done = subprocess.run(suite_command(overrides, store), cwd=ROOT, capture_output=True, text=True)
    return done.returncode, done.stdout + done.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("overrides", nargs="*", help="suite overrides, as on its command line")
    args = parser.parse_args()
    failures = []
    with tempfile.TemporaryDirectory() as folder:
        store = Path(folder)
        code, _ = job(args.overrides, store)
        alone = job_runs(store)[0]
        print(f"alone: {alone.data.metrics.get('throughput', 0):,.1f} (exit {code}); tag "
              f"{alone.data.tags.get('gpu_foreign_processes', 'none')!r}", flush=True)  # fmt: skip
        hog = start_hog()
        try:
            time.sleep(2)
            code, output = job(args.overrides, store)
            shared = job_runs(store)[0]
            tag = shared.data.tags.get("gpu_foreign_processes", "")
            line = " ".join(output.split())
            print(f"beside pid {hog.pid}: {shared.data.metrics.get('throughput', 0):,.1f} (exit {code}); tag {tag!r}")
            if f"pid {hog.pid}" not in tag or "in the window" not in tag:
                failures.append("the matmul loop is not in the run's gpu_foreign_processes tag")
            if f"GPU shared with pid {hog.pid}" not in line:
                failures.append("the result line does not say the GPU was shared")
            code, output = job([*args.overrides, "benchmark.exclusive=true"], store)
            refused = [ln for ln in output.splitlines() if ln.startswith("FAILED")]
            print(f"exclusive: exit {code}; {refused[0] if refused else 'no FAILED line'}")
            if code == 0 or not refused or f"pid {hog.pid}" not in refused[0]:
                failures.append("benchmark.exclusive=true did not refuse naming the loop's pid")
        finally:
            hog.kill()
            hog.wait()
    for failure in failures:
        print(f"FAIL: {failure}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
