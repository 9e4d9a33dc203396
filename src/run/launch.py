"""Start the ranks of one job with torch's elastic launcher, the engine behind `torchrun`.

The elastic agent runs in a child process of the job, in a session of its own, exactly as the
`torchrun` command would: fresh worker processes for every job, a c10d rendezvous on a free port
(or the endpoint a multi-node run names), and the ranks' own stdout/stderr captured under the
job's folder. Its own session lets the job stop everything it started in one `killpg`: the agent,
the ranks, and whatever the ranks spawned. The job waits at most `benchmark.timeout_s` for it, so a
rank that hangs outside a collective fails the job too; Ctrl-C or SIGTERM in the job stops it.

    src/rank/agent.py is the agent's side (`python -m src.rank.agent SPEC.json`, started here, not by users).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from src.errors import RankFailure

GRACE_S = 5.0  # after SIGTERM, how long the ranks get before SIGKILL
POLL_S = 0.2


def rendezvous_id(run_name: str, nnodes: int) -> str:
    """The rendezvous every node of a job joins: shared across nodes, fresh for a single node.

    Under Slurm the job id tells array tasks apart; started by hand, the run name tells a sweep's
    points apart (each point rendezvouses anew on the same endpoint).
    """
    if nnodes == 1:
        return str(uuid.uuid4())
    return f"{run_name}-{os.environ.get('SLURM_JOB_ID', 'nodes')}"


def launch_ranks(
    rank_cfg: dict, nproc: int, launcher: dict, log_dir: Path, progress_path: Path, run_id: str
) -> list[dict]:
    """Run this node's ranks; returns the reports of all the job's ranks, on every node.

    Raises RankFailure if any rank failed or time ran out.
    """
    log_dir.mkdir(parents=True, exist_ok=True)
    spec_path, outcome_path = log_dir / "launch.json", log_dir / "outcome.json"
    outcome_path.unlink(missing_ok=True)
    spec = {
        "rank_cfg": rank_cfg,
        "nproc": nproc,
        "launcher": launcher,
        "run_id": run_id,
        "log_dir": str(log_dir),
        "progress_path": str(progress_path),
        "outcome_path": str(outcome_path),
        "job_pid": os.getpid(),
    }
    spec_path.write_text(json.dumps(spec))
    timeout_s = float(rank_cfg["benchmark"]["timeout_s"])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}  # what the job imports
    with open(log_dir / "launcher.log", "wb") as agent_log:
        agent = subprocess.Popen(
            [sys.executable, "-m", "src.rank.agent", str(spec_path)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=agent_log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        finished = _wait_exit(agent.pid, time.monotonic() + timeout_s)
        if not finished:
            raise RankFailure(
                f"timed out after {timeout_s:g} s (benchmark.timeout_s): ranks stopped\n"
                f"(rank logs under {log_dir})"
            )
    finally:
        _stop_session(agent)  # on success too: nothing the ranks started outlives the job
    return _read_outcome(outcome_path, agent.returncode, log_dir)


def _wait_exit(pid: int, deadline: float) -> bool:
    """Wait for the agent to exit without reaping it, so its pid cannot be reused meanwhile."""
    while time.monotonic() < deadline:
        if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
            return True
        time.sleep(POLL_S)
    return False


def _stop_session(agent: subprocess.Popen) -> None:
    """SIGTERM the agent's session, give it GRACE_S to stop its ranks, SIGKILL what is left, reap."""
    pgid = agent.pid  # session leader, so its pid is the process group id
    try:
        if os.waitid(os.P_PID, pgid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
            _signal_group(pgid, signal.SIGTERM)
            _wait_exit(pgid, time.monotonic() + GRACE_S)
        _signal_group(pgid, signal.SIGKILL)
    finally:
        agent.wait()


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:  # the group has already gone
        pass


def _read_outcome(path: Path, returncode: int, log_dir: Path) -> list[dict]:
    try:
        outcome = json.loads(path.read_text())
    except (OSError, ValueError):
        tail = (log_dir / "launcher.log").read_text(errors="replace")[-2000:]
        raise RankFailure(
            f"launcher exited with code {returncode} before the ranks reported\n{tail}\n"
            f"(rank logs under {log_dir})"
        ) from None
    if "error" in outcome:
        raise RankFailure(outcome["error"])
    return outcome["ranks"]
