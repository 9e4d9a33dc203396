"""Start the ranks of one job with torch's elastic launcher, the engine behind `torchrun`.

Each job's elastic agent runs in a session of its own, as the `torchrun` command would, forked
by the preloader this process starts once (see src/rank/agent.py): fresh worker processes for
every job, a c10d rendezvous on the loopback address (or the endpoint a multi-node run names), and the
ranks' own stdout/stderr captured under the job's folder. Its own process session lets the job stop
everything it started in one `killpg`: the agent, the ranks, and whatever the ranks spawned.
The job waits at most `benchmark.timeout_s` for it, so a rank that hangs outside a collective
fails the job too; Ctrl-C or SIGTERM in the job stops it.

    src/rank/agent.py is the other side (`python -m src.rank.agent JOB_PID`, started here, not by users).
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from src.errors import RankFailure
from src.results import reports
from src.run.memory_guard import HostMemoryGuard

GRACE_S = 5.0  # after SIGTERM, how long the ranks get before SIGKILL
POLL_S = 0.05
LOOPBACK = "127.0.0.1"


def rendezvous(launcher: dict) -> dict:
    """Where the job's nodes meet, as the agent's `rdzv_endpoint` and `local_addr` (this node's address
    for the ranks' store; None: its name, as torch looks it up). One node meets on the loopback
    address at the endpoint's port (0: a free one), as `torchrun --standalone` does, so that a host
    whose name does not resolve (a container's, a renamed VM's) runs its jobs all the same."""
    if launcher["nnodes"] > 1:
        return {"rdzv_endpoint": launcher["rdzv_endpoint"], "local_addr": None}
    port = launcher["rdzv_endpoint"].rpartition(":")[2]
    return {"rdzv_endpoint": f"{LOOPBACK}:{port}", "local_addr": LOOPBACK}


def rendezvous_problem(launcher: dict) -> str | None:
    """Why this node's part of the rendezvous cannot start, in one line, or None. Checked before the
    job: torch's rendezvous waits minutes on a name that does not resolve, and says nothing."""
    meeting = rendezvous(launcher)
    host, _, port = meeting["rdzv_endpoint"].rpartition(":")
    key = f"launcher.rdzv_endpoint={launcher['rdzv_endpoint']!r}"
    if launcher["nnodes"] > 1:  # every node reaches node 0 by the endpoint, and the ranks' store by a name
        for name, what in ((host, f"{key}: its host"), (socket.getfqdn(), "this host's name")):
            try:
                socket.getaddrinfo(name, None)
            except OSError as exc:
                return (
                    f"{what} {name!r} does not resolve ({exc.strerror}): the nodes find each other by it; "
                    "add it to /etc/hosts or DNS"
                )
    if launcher["nnodes"] == 1 or launcher["node_rank"] == 0:  # this node hosts the rendezvous
        try:
            socket.create_server((meeting["local_addr"] or "", int(port))).close()
        except OSError as exc:
            why = os.strerror(exc.errno) if exc.errno else str(exc)
            return f"{key}: port {port} cannot be opened here ({why}); name a free port, or 0 on one node"
    return None


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
) -> list[reports.Report]:
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
        "launcher": launcher | rendezvous(launcher),
        "run_id": run_id,
        "log_dir": str(log_dir),
        "progress_path": str(progress_path),
        "outcome_path": str(outcome_path),
        "job_id": job_id,
    }
    spec_path.write_text(json.dumps(spec))
    timeout_s = float(rank_cfg["benchmark"]["timeout_s"])
    deadline = time.monotonic() + timeout_s
    preloader = _preloader()
    agent = preloader.fork_agent(spec_path, job_id, deadline, log_dir)
    # the agent leads a session of its own: its ranks, and whatever they start, are in it
    guard = HostMemoryGuard(agent, launcher["host_memory_reserve_gb"], rank_cfg["model"]["batch_size"])
    exited = os.pidfd_open(agent)  # the agent is the preloader's child: watched through a pidfd
    try:
        if not _wait_exit(exited, deadline, guard.check):
            raise RankFailure(
                f"timed out after {timeout_s:g} s (benchmark.timeout_s): ranks stopped\n"
                f"(rank logs under {log_dir})"
            )
    finally:
        _stop_session(agent, exited)  # on success too: nothing the ranks started outlives the job
        os.close(exited)
        exit_code = preloader.reap(agent)
    return _read_outcome(outcome_path, exit_code, preloader.output, log_dir, job_id)


class Preloader:
    """The process that forks each job's elastic agent (src.rank.agent): started ahead of the
    first job, it imports torch and the rank's code once and then waits for requests on its stdin.
    What it and its agents print before a job's launcher.log exists goes to an unnamed temp file."""

    def __init__(self) -> None:
        self.early_log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "src.rank.agent", str(os.getpid())],
            env=_agent_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.early_log,
            start_new_session=True,
        )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def preload(self, model_target: str) -> None:
        self._send({"preload": model_target})

    def fork_agent(self, spec_path: Path, job_id: str, deadline: float, log_dir: Path) -> int:
        """Start the job's agent, with the environment as it is now (the job has chosen its GPUs):
        through the pipe, since it may hold credentials, which never go to a file. The agent runs
        the spec only if it carries `job_id`. Waits (until `deadline`) for the imports to finish."""
        self._send({"spec": str(spec_path), "env": _agent_env(), "job_id": job_id})
        reply = self._reply(deadline)
        if reply is None:
            code = self.proc.poll()
            what = "did not answer in time" if code is None else f"exited with code {code}"
            _signal_group(self.proc.pid, signal.SIGKILL)  # a hung one: the next job starts another
            raise RankFailure(
                f"the elastic agents' preloader {what} (benchmark.timeout_s): the job never started\n"
                f"{self.output()[-2000:]}\n(rank logs under {log_dir})"
            )
        return reply["pid"]

    def reap(self, pid: int) -> int | None:
        """The agent's exit status, once it has exited (None if the preloader is gone)."""
        self._send({"reap": pid})
        reply = self._reply(time.monotonic() + GRACE_S)
        return reply["exit_code"] if reply else None

    def output(self) -> str:
        self.early_log.seek(0)
        return self.early_log.read().decode(errors="replace")

    def discard(self) -> None:
        if self.alive():
            _signal_group(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.proc.stdin.close()
        self.proc.stdout.close()
        self.early_log.close()

    def _send(self, request: dict) -> None:
        try:
            os.write(self.proc.stdin.fileno(), json.dumps(request).encode() + b"\n")  # unbuffered
        except BrokenPipeError:  # it has died: the reply that does not come says so
            pass

    def _reply(self, deadline: float) -> dict | None:
        """One reply line; None if the preloader ended or `deadline` passed first."""
        line, out = b"", self.proc.stdout.fileno()
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([out], [], [], left)[0]:
                return None
            chunk = os.read(out, 1 << 12)
            if not chunk:
                return None
            line += chunk
        return json.loads(line)


def _agent_env() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}  # what the job imports


_started: list[Preloader] = []  # this process's preloader, once started


def prestart(model_target: str | None = None) -> None:
    """Have the preloader running, and importing `model_target`'s module, while the job process
    does its own work (Hydra's compose, opening the run). Called before a job's ranks, never while
    a job measures: the preloader then does nothing."""
    preloader = _preloader()
    if model_target:
        preloader.preload(model_target)


def _preloader() -> Preloader:
    if not (_started and _started[0].alive()):
        _discard()
        _started.append(Preloader())
    return _started[0]


@atexit.register
def _discard() -> None:
    while _started:
        _started.pop().discard()


def _wait_exit(exited: int, deadline: float, watch=None) -> bool:
    """Wait until the pidfd `exited` says its process has ended, or `deadline` passes.

    `watch` is called at every poll; what it raises stops the wait.
    """
    while (left := deadline - time.monotonic()) > 0:
        if select.select([exited], [], [], min(POLL_S, left))[0]:
            return True
        if watch:
            watch()
    return False


def _stop_session(agent: int, exited: int) -> None:
    """SIGTERM the agent's process session, give it GRACE_S to stop its ranks, SIGKILL what is left.
    The agent's pid cannot be reused meanwhile: the preloader reaps it only when asked."""
    if not _wait_exit(exited, time.monotonic()):
        _signal_group(agent, signal.SIGTERM)  # session leader: its pid is the process group id
        _wait_exit(exited, time.monotonic() + GRACE_S)
    _signal_group(agent, signal.SIGKILL)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:  # the group has already gone
        pass


def _read_outcome(
    path: Path, exit_code: int | None, early_output, log_dir: Path, job_id: str
) -> list[reports.Report]:
    try:
        outcome = json.loads(path.read_text())
    except (OSError, ValueError):
        log = log_dir / "launcher.log"
        tail = (log.read_text(errors="replace") if log.exists() else early_output())[-2000:]
        raise RankFailure(
            f"launcher exited with code {exit_code} before the ranks reported\n{tail}\n"
            f"(rank logs under {log_dir})"
        ) from None
    if outcome.get("job_id") != job_id:
        raise RankFailure(f"{path} was written by another job (id {outcome.get('job_id')}, not {job_id})")
    if "error" in outcome:
        raise RankFailure(outcome["error"])
    return [reports.from_json(report) for report in outcome["ranks"]]
