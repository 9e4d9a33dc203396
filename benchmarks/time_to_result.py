"""Time to result: wall time from the command to the logged result, process start and warm-up
included, for one job or a whole sweep (arguments as on the suite's command line), with each
job's phases (its `phase_*_s` metrics, src/run/phases.py).

    python benchmarks/time_to_result.py gpu=h200 model=resnet50 precision=amp          # target <= 20 s
    python benchmarks/time_to_result.py -m gpu=h200 model=ssd300,resnet50,maskrcnn,txl_base,txl_large precision=tf32,amp
                                                                                         # target <= 240 s
    python benchmarks/time_to_result.py -m gpu=cpu benchmark=smoke model=resnet50,txl_base precision=fp32,bf16
                                       # CPU: per job <= 2 x one `import torch`, measured in the same run

`--limit S` stops the command after S seconds as Ctrl-C would (the job running then ends
KILLED) and still prints the jobs that finished, marked as not a whole sweep's time.

With gpu=cpu it also times `python -c "import torch"` (twice before the command, twice after: the
machine's load moves) and prints a job's cost as a multiple of it.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, job_runs, recorded, suite_command

from src.results import run_result

# phase -> column heading (src/run/phases.py PHASES, in order)
COLUMNS = {
    "config": "cfg",
    "run_open": "open",
    "agent_up": "agent",
    "ranks_up": "ranks",
    "model_build": "build",
    "first_step": "1st",
    "warmup": "warm",
    "measure": "meas",
    "rank_exit": "exit",
    "logging": "log",
}


def import_torch_s() -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import torch"], check=True)
    return time.perf_counter() - started


def short_name(run) -> str:
    tags = run.data.tags
    return f"{tags.get('model', '?')}-{tags.get('precision', '?')}"[:15]


def phases_of(run) -> list[float | None]:
    return [run.data.metrics.get(f"phase_{p}_s") for p in COLUMNS]


def print_phases(runs) -> None:
    """One row per job: its phases in seconds (80 columns)."""
    print(f"{'job':<15}" + "".join(f"{h:>6}" for h in COLUMNS.values()))
    for run in runs:
        cells = "".join(f"{p:6.1f}" if p is not None else f"{'-':>6}" for p in phases_of(run))
        print(f"{short_name(run):<15}{cells}")


def run_until(args: list[str], store: Path, limit: float | None) -> tuple[float, bool]:
    """The suite's wall time, and whether it was stopped at `limit` seconds: then its process
    group gets SIGINT, as from Ctrl-C, so the jobs that finished are in the store to be shown."""
    started = time.perf_counter()
    suite = subprocess.Popen(suite_command(args, store), cwd=ROOT, start_new_session=True)
    try:
        suite.wait(timeout=limit)
        return time.perf_counter() - started, False
    except subprocess.TimeoutExpired:
        os.killpg(suite.pid, signal.SIGINT)
        suite.wait()
        return time.perf_counter() - started, True


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=float, help="stop the command after this many seconds")
    known, args = parser.parse_known_args()  # the rest go to the suite
    limit = known.limit
    cpu = "gpu=cpu" in args
    imports = [import_torch_s(), import_torch_s()] if cpu else []
    with tempfile.TemporaryDirectory() as store:
        seconds, stopped = run_until(args, Path(store), limit)
        runs = job_runs(Path(store), newest_first=False)
        print()
        phased = 0.0
        for run in runs:
            m = run.data.metrics
            in_phases = sum(p for p in phases_of(run) if p is not None)
            phased += in_phases
            print(
                f"{run.info.run_name:<26}{run.info.status:<9}{m.get(recorded.THROUGHPUT, float('nan')):>12,.1f} "
                f"{run.data.tags.get(recorded.UNIT, ''):<9}steps {int(m.get(recorded.MEASURED_STEPS, 0)):>4}{in_phases:7.1f} s"
            )
            if recorded.THROUGHPUT in m:  # a figure: did it meet its stopping rule?
                missed = run_result.read(run).missed
                print(f"  stopping rule: {'missed, ' + missed if missed else 'met'}")
        print()
        print_phases(runs)
    if stopped:
        finished = sum(run.info.status == "FINISHED" for run in runs)
        print(f"\nstopped at --limit {limit:g} s with {finished} job(s) finished: not a whole sweep's time")
    print(f"\ntime to result: {seconds:.1f} s for {len(runs)} job(s): {' '.join(args)}")
    print(
        f"  in the jobs' phases: {phased:.1f} s; final writes, exits, sweep summary: {seconds - phased:.1f} s"
    )
    if cpu and runs and not stopped:  # a stopped sweep has no per-job cost
        imports += [import_torch_s(), import_torch_s()]
        torch_s = statistics.median(imports)
        per_job = seconds / len(runs)
        print(
            f"  one `import torch`: {torch_s:.2f} s (median of {', '.join(f'{t:.2f}' for t in imports)})\n"
            f"  per job: {per_job:.1f} s = {per_job / torch_s:.2f} x one `import torch` (target <= 2)"
        )


if __name__ == "__main__":
    main()
