"""Busy-GPU drill: a second program holds the GPU with a small matmul loop while a job measures.

    python benchmarks/busy_gpu.py model=resnet50 precision=amp benchmark.time_limit_s=20

Three jobs of the same point into one temporary store: alone, beside the matmul loop (it must be
recorded in the run's gpu_foreign_processes tag and said on the result line), and beside it with
benchmark.exclusive=true (it must be refused, naming the loop's pid). Then resume, in a store of its
own: the point once beside the loop, then `-m benchmark.repeat=0,1,2` alone, as a user would resume
a sweep: repeat 0 must be measured again with a line saying why, and compare must show one clean
point of three runs. `--drill refuse` or `--drill resume` runs one half. Prints each throughput and
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

from common import ROOT, job_runs, recorded, suite_command, tracking_uri

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


def job(overrides: list[str], store: Path, rerun: bool = True) -> tuple[int, str]:
    command = suite_command(overrides, store, rerun)
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    return done.returncode, done.stdout + done.stderr


def refuse_drill(overrides: list[str], failures: list[str]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        store = Path(folder)
        code, _ = job(overrides, store)
        alone = job_runs(store)[0]
        print(f"alone: {alone.data.metrics.get(recorded.THROUGHPUT, 0):,.1f} (exit {code}); tag "
              f"{alone.data.tags.get(recorded.GPU_FOREIGN_PROCESSES, 'none')!r}", flush=True)  # fmt: skip
        hog = start_hog()
        try:
            time.sleep(2)
            code, output = job(overrides, store)
            shared = job_runs(store)[0]
            tag = shared.data.tags.get(recorded.GPU_FOREIGN_PROCESSES, "")
            line = " ".join(output.split())
            print(f"beside pid {hog.pid}: {shared.data.metrics.get(recorded.THROUGHPUT, 0):,.1f} (exit {code}); tag {tag!r}")
            if f"pid {hog.pid}" not in tag or "in the window" not in tag:
                failures.append("the matmul loop is not in the run's gpu_foreign_processes tag")
            if f"GPU shared with pid {hog.pid}" not in line:
                failures.append("the result line does not say the GPU was shared")
            code, output = job([*overrides, "benchmark.exclusive=true"], store)
            refused = [ln for ln in output.splitlines() if ln.startswith("FAILED")]
            print(f"exclusive: exit {code}; {refused[0] if refused else 'no FAILED line'}")
            if code == 0 or not refused or f"pid {hog.pid}" not in refused[0]:
                failures.append("benchmark.exclusive=true did not refuse naming the loop's pid")
        finally:
            hog.kill()
            hog.wait()


def resume_drill(overrides: list[str], failures: list[str]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        store = Path(folder)
        hog = start_hog()
        try:
            time.sleep(2)
            code, _ = job(overrides, store, rerun=False)
        finally:
            hog.kill()
            hog.wait()
        shared = job_runs(store)[0]
        print(f"beside the loop: {shared.data.metrics.get(recorded.THROUGHPUT, 0):,.1f} (exit {code}); "
              f"tag {shared.data.tags.get(recorded.GPU_FOREIGN_PROCESSES, '')!r}", flush=True)  # fmt: skip
        code, output = job(["-m", *overrides, "benchmark.repeat=0,1,2"], store, rerun=False)
        again = [" ".join(ln.split()) for ln in output.splitlines() if ln.lstrip().startswith("measure ")]
        print(f"resumed sweep (exit {code}): {again[0] if again else 'no measure line'}", flush=True)
        if not any(shared.info.run_id in line and "shared its GPU" in line for line in again):
            failures.append("the resumed sweep did not measure repeat 0 again saying it shared its GPU")
        runs = job_runs(store)
        print("runs: " + "; ".join(f"{r.info.run_name} {r.info.status} "
                                   f"{r.data.metrics.get(recorded.THROUGHPUT, 0):,.1f}" for r in runs))  # fmt: skip
        points = compare_points(store)
        print("compare's points: " + "; ".join(f"{m.label} n_runs={m.n_runs} flawed={sum(r.flawed for r in m.runs)} "
                                                f"superseded={len(m.superseded)}" for m in points))  # fmt: skip
        if len(points) != 1 or points[0].n_runs != 3 or any(r.flawed for r in points[0].runs):
            failures.append("compare does not show one clean point of three runs")


def compare_points(store: Path):
    """The store's points as compare reads them (src/compare/runs.py): a lone GPU has no ratio to print."""
    from mlflow.tracking import MlflowClient

    from src.compare.runs import aggregate, search_finished, to_record

    names = [e.name for e in MlflowClient(tracking_uri(store)).search_experiments()]
    runs, _ = search_finished(tracking_uri(store), names, "", "")
    return aggregate([r for r in map(to_record, runs) if r])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("overrides", nargs="*", help="suite overrides, as on its command line")
    parser.add_argument("--drill", choices=("all", "refuse", "resume"), default="all")
    args = parser.parse_args()
    failures: list[str] = []
    if args.drill in ("all", "refuse"):
        refuse_drill(args.overrides, failures)
    if args.drill in ("all", "resume"):
        resume_drill(args.overrides, failures)
    for failure in failures:
        print(f"FAIL: {failure}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
