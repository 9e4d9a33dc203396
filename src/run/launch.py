"""Start the ranks of one job with torch's elastic launcher, the engine behind `torchrun`.

The elastic agent runs in a child process of the job, in a session of its own, exactly as the
`torchrun` command would: fresh worker processes for every job, a c10d rendezvous on a free port
(or the endpoint a multi-node run names), and the ranks' own stdout/stderr captured under the
job's folder. Its own session lets the job stop everything it started in one `killpg`: the agent,
the ranks, and whatever the ranks spawned. The job waits at most `benchmark.timeout_s` for it, so a
rank that hangs outside a collective fails the job too; Ctrl-C or SIGTERM in the job stops it.

    src/rank/agent.py is the agent's side (`python -m src.rank.agent JOB_PID`, started here, not by users).
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from src.errors import RankFailure
from src.run.memory_guard import HostMemoryGuard

GRACE_S = 5.0  # after SIGTERM, how long the ranks get before SIGKILL
POLL_S = 0.05


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
    job_id = rank_cfg["runtime"]["job_id"]
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
        "job_id": job_id,
    }
    spec_path.write_text(json.dumps(spec))
    timeout_s = float(rank_cfg["benchmark"]["timeout_s"])
    agent = _take_agent()
    # the agent leads a session of its own: its ranks, and whatever they start, are in it
    guard = HostMemoryGuard(
        agent.proc.pid, launcher["host_memory_reserve_gb"], rank_cfg["model"]["batch_size"]
    )
    try:
        agent.start_job(spec_path, job_id)
        finished = _wait_exit(agent.proc.pid, time.monotonic() + timeout_s, guard.check)
        if not finished:
            raise RankFailure(
                f"timed out after {timeout_s:g} s (benchmark.timeout_s): ranks stopped\n"
                f"(rank logs under {log_dir})"
            )
    finally:
        _stop_session(agent.proc)  # on success too: nothing the ranks started outlives the job
    return _read_outcome(outcome_path, agent, log_dir, job_id)


class Agent:
    """An elastic agent process (src.rank.agent), started before its job: it imports torch and
    the rank's code, then waits for the job's spec on its stdin. Until then it writes to an
    unnamed temp file; from the spec on, to the job's launcher.log."""

    def __init__(self, model_target: str | None = None) -> None:
        self.early_log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "src.rank.agent",
                str(os.getpid()),
                *([model_target] if model_target else []),
            ],
            env=_agent_env(),
            stdin=subprocess.PIPE,
            stdout=self.early_log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def start_job(self, spec_path: Path, job_id: str) -> None:
        """Hand over the job, with the environment as it is now (the job has chosen its GPUs):
        through the pipe, since it may hold credentials, which never go to a file. The agent runs
        the spec only if it carries `job_id`."""
        request = json.dumps({"spec": str(spec_path), "env": _agent_env(), "job_id": job_id}).encode() + b"\n"
        try:
            os.write(self.proc.stdin.fileno(), request)  # unbuffered: nothing left to flush on close
        except BrokenPipeError:  # it died while waiting: the outcome check reports its output
            pass
        self.proc.stdin.close()

    def output(self) -> str:
        self.early_log.seek(0)
        return self.early_log.read().decode(errors="replace")

    def discard(self) -> None:
        """Stop an agent that never got a job (it has started nothing)."""
        if self.proc.returncode is None:
            _signal_group(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.early_log.close()


def _agent_env() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}  # what the job imports


_ready: list[Agent] = []  # at most one agent waiting for this process's next job


def prestart_agent(model_target: str | None = None) -> None:
    """Start the agent of this process's next job now, so that its interpreter and imports overlap
    the job process's own work (opening the run, or logging the job before) instead of following it.
    It preloads the module of `model_target` too (the builder of the job, or of the job before:
    sweeps repeat models). Never while a job measures: callers start it before the ranks, or after."""
    if _ready and _ready[0].proc.poll() is None:
        return
    _discard_ready()
    _ready.append(Agent(model_target))


def _take_agent() -> Agent:
    if _ready and _ready[0].proc.poll() is None:
        return _ready.pop()
    _discard_ready()
    return Agent()


@atexit.register
def _discard_ready() -> None:
    while _ready:
        _ready.pop().discard()


def _wait_exit(pid: int, deadline: float, watch=None) -> bool:
    """Wait for the agent to exit without reaping it, so its pid cannot be reused meanwhile.

    `watch` is called at every poll; what it raises stops the wait.
    """
    while time.monotonic() < deadline:
        if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
            return True
        if watch:
            watch()
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


def _read_outcome(path: Path, agent: Agent, log_dir: Path, job_id: str) -> list[dict]:
    try:
        outcome = json.loads(path.read_text())
    except (OSError, ValueError):
        log = log_dir / "launcher.log"
        tail = (log.read_text(errors="replace") if log.exists() else agent.output())[-2000:]
        raise RankFailure(
            f"launcher exited with code {agent.proc.returncode} before the ranks reported\n{tail}\n"
            f"(rank logs under {log_dir})"
        ) from None
    finally:
        agent.early_log.close()
    if outcome.get("job_id") != job_id:
        raise RankFailure(f"{path} was written by another job (id {outcome.get('job_id')}, not {job_id})")
    if "error" in outcome:
        raise RankFailure(outcome["error"])
    return outcome["ranks"]
