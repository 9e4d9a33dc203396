"""Fault drills: a real job loses a rank, hangs, or is interrupted, and must end cleanly and in time.

    python benchmarks/fault_drill.py [--store DIR] [--sweep KEY=A,B] OVERRIDES [--drills kill stop interrupt]
    python benchmarks/fault_drill.py gpu=h200 gpu.count=2 model=resnet50 precision=amp \\
        benchmark.time_limit_s=20 benchmark.timeout_s=40 --sweep precision=amp,bf16

Each drill runs `python -m src.train OVERRIDES` into a tracking store of its own, waits until
rank 0 reports the measured window (or --wait-s passes), then sends its signal:
  kill       SIGKILL to the job's highest local rank (rank 1 of two): a rank that dies
  stop       SIGSTOP to that rank: a hang, ended by benchmark.timeout_s or the NCCL/gloo timeout
  interrupt  SIGINT to the job's process group (Ctrl-C) in the first job of a two-job sweep (--sweep)
The job measures until benchmark.time_limit_s (no CI or step count ends it sooner), so the signal
lands inside the window; keep time_limit_s and timeout_s short to keep the drills short.

One line per drill: seconds from the signal to the job's exit, its exit code, every run's status
and the first line of its `error` tag, and any process of the job left alive after it exited
(including new holders of a GPU, where nvidia-smi exists). Exits 1 if any drill fails its
expectation: a non-zero exit (130 for interrupt) within benchmark.timeout_s + 30 s of the signal,
no run left RUNNING, the job's run FAILED (kill, stop) or every run KILLED and the second point
never started (interrupt), and no process left.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a file from anywhere

from common import ROOT, store_runs, suite_command  # noqa: E402

from tests.process_tree import ProcessTree, rank_processes  # noqa: E402

# Before the user's overrides, so theirs win: the window runs until benchmark.time_limit_s.
KEEP_MEASURING = ["benchmark.target_ci=1e-9", "benchmark.max_steps=1000000"]
LATE_S = 30  # beyond benchmark.timeout_s: how late a job may end (grace, closing its run)
GPU_SETTLE_S = 10  # how long the driver may take to list a dead process's context as gone


@dataclass(frozen=True)
class Drill:
    signal: signal.Signals
    at_rank: bool  # True: one rank gets the signal; False: the job's process group, as Ctrl-C
    sweep: bool = False
    exit_code: int | None = None  # None: any non-zero code
    job_status: str = "FAILED"
    parent_status: str | None = None  # the sweep's parent run, for a drill that runs a sweep


DRILLS = {
    "kill": Drill(signal.SIGKILL, at_rank=True),
    "stop": Drill(signal.SIGSTOP, at_rank=True),
    "interrupt": Drill(
        signal.SIGINT, at_rank=False, sweep=True, exit_code=130, job_status="KILLED", parent_status="KILLED"
    ),
}


@dataclass
class Outcome:
    name: str
    at: str = ""  # where the job was when the signal went out
    seconds: float | None = None
    exit_code: int | None = None
    runs: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def line(self) -> str:
        ended = f"exit {self.exit_code} after {self.seconds:.1f} s" if self.seconds is not None else "no exit"
        verdict = "ok" if not self.problems else "FAIL: " + "; ".join(self.problems)
        return (
            f"{self.name:<10} {self.at}: {ended} | runs: {', '.join(self.runs) or 'none'} | "
            f"left: {', '.join(self.left) or 'none'} | {verdict}"
        )


def timeout_s(overrides: list[str]) -> float:
    """benchmark.timeout_s as the job will compose it."""
    from hydra import compose, initialize_config_dir

    from src.config.schema import register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return float(compose("config", overrides=overrides).benchmark.timeout_s)


def without_key(overrides: list[str], key: str) -> list[str]:
    return [o for o in overrides if o.split("=", 1)[0].lstrip("+~") != key]


def progress(folder: Path) -> dict:
    """Rank 0's latest progress report in the drill's (first) job, {} before there is one."""
    for path in sorted(folder.rglob("progress.node0.json")):
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):  # being replaced right now
            pass
    return {}


def wait_until_measuring(folder: Path, job: subprocess.Popen, wait_s: float) -> str:
    """Wait for rank 0's first report from the measured window; says where the job got to."""
    deadline = time.monotonic() + wait_s
    while job.poll() is None and time.monotonic() < deadline:
        if progress(folder).get("phase") == "measuring":
            break
        time.sleep(0.2)
    state = progress(folder)
    return f"{state['phase']} step {state['step']}" if state else "before the first step"


def gpu_holders() -> set[int]:
    """Pids with a compute context on any GPU; empty where there is no nvidia-smi."""
    if shutil.which("nvidia-smi") is None:
        return set()
    listed = subprocess.run(
        ["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return {int(word) for word in listed.stdout.split() if word.isdigit()}


def run_drill(
    name: str, drill: Drill, overrides: list[str], sweep: str, folder: Path, wait_s: float
) -> Outcome:
    outcome = Outcome(name)
    limit_s = timeout_s([*KEEP_MEASURING, *overrides]) + LATE_S
    args = [*KEEP_MEASURING, *overrides]
    if drill.sweep:
        args = ["-m", *without_key(args, sweep.split("=", 1)[0]), sweep]
    folder.mkdir(parents=True, exist_ok=True)
    gpu_before = gpu_holders()
    with open(folder / "train.log", "w") as log:
        job = subprocess.Popen(
            suite_command(args, folder),
            cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, as a terminal's foreground job
        )
    tree = ProcessTree(job.pid)
    try:
        outcome.at = wait_until_measuring(folder, job, wait_s)
        if job.poll() is not None:
            return not_signalled(outcome, f"the job ended (code {job.returncode}) first; see {log.name}")
        if drill.at_rank:
            ranks = rank_processes(job.pid)
            if not ranks:
                return not_signalled(outcome, "no rank process found")
            local_rank, pid = max(ranks.items())  # rank 1 of two: not rank 0, which reports progress
            os.kill(pid, drill.signal)
            outcome.at += f", {drill.signal.name} to local rank {local_rank}"
        else:
            os.killpg(job.pid, drill.signal)
            outcome.at += f", {drill.signal.name} to the job"
        sent = time.monotonic()
        try:
            outcome.exit_code = job.wait(limit_s + LATE_S)  # wait past the limit, to say how late
            outcome.seconds = time.monotonic() - sent
        except subprocess.TimeoutExpired:
            pass
    finally:
        if job.poll() is None:  # never leave a drill's job behind, however the drill went
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
        tree.stop()
        left = tree.alive()
        outcome.left = [f"pid {pid}" for pid in left]
        for pid in left:  # reported above; ended here so that the next drill starts clean
            os.kill(pid, signal.SIGKILL)
    outcome.left += [f"gpu pid {pid}" for pid in settled_gpu_holders(gpu_before)]
    check(outcome, drill, limit_s, folder)
    return outcome


def not_signalled(outcome: Outcome, why: str) -> Outcome:
    outcome.at += ", no signal sent"
    outcome.problems.append(why)
    return outcome


def settled_gpu_holders(before: set[int]) -> set[int]:
    """GPU holders that were not there before the drill, once the driver has had time to notice."""
    deadline = time.monotonic() + GPU_SETTLE_S
    while (new := gpu_holders() - before) and time.monotonic() < deadline:
        time.sleep(0.5)
    return new


def check(outcome: Outcome, drill: Drill, limit_s: float, folder: Path) -> None:
    """Record the runs, and every way the drill missed its expectation."""
    problems = outcome.problems
    if outcome.seconds is None:
        problems.append(f"still running {limit_s + LATE_S:g} s after the signal: killed")
    elif outcome.seconds > limit_s:
        problems.append(f"ended after {outcome.seconds:.1f} s, more than timeout_s + {LATE_S} s")
    if outcome.exit_code == 0 or (drill.exit_code and outcome.exit_code != drill.exit_code):
        problems.append(f"exit code {outcome.exit_code}, expected {drill.exit_code or 'non-zero'}")
    jobs = 0
    for run in store_runs(folder, newest_first=False):
        parent = run.data.tags.get("sweep") == "true"
        jobs += not parent
        shown, expected = ("sweep", drill.parent_status) if parent else (run.info.run_name, drill.job_status)
        error = run.data.tags.get("error", "").strip().splitlines()
        outcome.runs.append(f"{shown} {run.info.status}" + (f" ({error[0][:160]})" if error else ""))
        if run.info.status != expected:  # RUNNING never is
            problems.append(f"{shown} is {run.info.status}, expected {expected}")
    if jobs != 1:  # one job ran, and an interrupted sweep did not go on with its next point
        problems.append(f"{jobs} job runs, expected 1")
    if outcome.left:
        problems.append("processes left behind")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(  # after the overrides: it takes every word up to the next option
        "--drills", nargs="+", choices=list(DRILLS), default=list(DRILLS)
    )
    parser.add_argument("--store", type=Path, help="keep each drill's store and logs under DIR/<drill>")
    parser.add_argument(
        "--sweep", default="benchmark.seed=0,1", help="the two-point sweep the interrupt drill runs (KEY=A,B)"
    )
    parser.add_argument(
        "--wait-s", type=float, default=180, help="longest wait for the measured window before signalling"
    )
    parser.add_argument("overrides", nargs="*", help="the suite's overrides, as on its command line")
    args = parser.parse_args()
    if len(args.sweep.split("=", 1)[-1].split(",")) != 2:
        parser.error(f"--sweep={args.sweep}: must be KEY=A,B (two points)")

    with tempfile.TemporaryDirectory() as scratch:
        store = args.store.resolve() if args.store else Path(scratch)
        print(f"fault drills: {' '.join(args.overrides)}  (stores under {store})", flush=True)
        outcomes = []
        for name in args.drills:
            outcomes.append(
                run_drill(name, DRILLS[name], args.overrides, args.sweep, store / name, args.wait_s)
            )
            print(outcomes[-1].line(), flush=True)
    sys.exit(1 if any(o.problems for o in outcomes) else 0)


if __name__ == "__main__":
    main()
