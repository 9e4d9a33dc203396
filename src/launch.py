"""Start the ranks of one job with torch's elastic launcher, the engine behind `torchrun`.

The elastic agent runs in a child process of the job, in a session of its own, exactly as the
`torchrun` command would: fresh worker processes for every job, a c10d rendezvous on a free port
(or the endpoint a multi-node run names), and the ranks' own stdout/stderr captured under the
job's folder. Its own session lets the job stop everything it started in one `killpg`: the agent,
the ranks, and whatever the ranks spawned. The job waits at most `benchmark.timeout_s` for it, so a
rank that hangs outside a collective fails the job too; Ctrl-C or SIGTERM in the job stops it.

    python -m src.launch SPEC.json    # the agent's side (started by `launch_ranks`, not by users)
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


class RankFailure(RuntimeError):
    """A rank raised, died or hung; the message carries its traceback or exit reason."""


# Multicast over NVLink (NVLS) can take the shared host's GPUs out of service: keep it off.
SAFE_NCCL_ENV = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
# A failed or timed-out NCCL collective aborts its communicator and ends the rank, so the agent
# sees a dead rank instead of one blocked forever.
FAIL_FAST_ENV = {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"}

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
            [sys.executable, "-m", "src.launch", str(spec_path)],
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


# --- the agent's side: runs in its own session, started by launch_ranks ---


def _die_with_job(job_pid: int) -> None:
    """Ask Linux to SIGTERM the agent when the job process dies, even by SIGKILL."""
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
    if os.getppid() != job_pid:  # the job died before the request took effect
        sys.exit(1)


def _elastic_launch(spec: dict) -> list[dict]:
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, Std
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    from src.worker import train_rank

    for key, value in {**SAFE_NCCL_ENV, **FAIL_FAST_ENV}.items():
        os.environ.setdefault(key, value)
    # A forked rank would inherit the agent's SIGTERM handler, which Python runs only between
    # bytecodes: restore the default, so a rank stuck in C code stops at once, as a spawned one does.
    os.register_at_fork(after_in_child=lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL))
    launcher, log_dir = spec["launcher"], Path(spec["log_dir"])
    config = LaunchConfig(
        min_nodes=launcher["nnodes"],
        max_nodes=launcher["nnodes"],
        nproc_per_node=spec["nproc"],
        run_id=spec["run_id"],
        rdzv_backend="c10d",  # c10d numbers the ranks itself; node_rank only says which node logs
        rdzv_endpoint=launcher["rdzv_endpoint"],
        # node 0 hosts the rendezvous store at the endpoint, which names one of its addresses
        rdzv_configs={"timeout": launcher["start_timeout_s"], "is_host": launcher["node_rank"] == 0},
        max_restarts=0,  # a benchmark step that failed once is a result, not something to retry
        monitor_interval=0.5,
        # torchrun's default for GPUs; CPU ranks fork from this process, which has torch imported
        # already (no CUDA state to inherit), and start seconds sooner
        start_method="spawn" if spec["rank_cfg"]["runtime"]["device"] == "cuda" else "fork",
        logs_specs=DefaultLogsSpecs(log_dir=str(log_dir), redirects=Std.ALL, tee=Std.NONE),
    )
    try:
        per_rank = elastic_launch(config, train_rank)(spec["rank_cfg"], spec["progress_path"])
    except ChildFailedError as exc:
        rank, failure = _root_failure(exc.failures)
        raise RankFailure(_describe_failure(rank, failure, log_dir)) from None
    return [report for reports in per_rank.values() for report in reports]


def _root_failure(failures: dict) -> tuple[int, object]:
    """The rank whose failure explains the others: one killed by a signal (its peers then fail on a
    reset connection, and their error files carry earlier timestamps than the agent's record of
    the death), else the earliest."""
    killed = {rank: f for rank, f in failures.items() if f.exitcode is not None and f.exitcode < 0}
    return min((killed or failures).items(), key=lambda item: item[1].timestamp)


def _describe_failure(rank: int, failure, log_dir: Path) -> str:
    message = failure.message
    if isinstance(message, dict):  # the error file written by @record: message plus traceback
        callstack = message.get("extraInfo", {}).get("py_callstack", "")
        message = f"{message.get('message', '')}\n{callstack}"
    if not message or message.startswith("To enable traceback"):
        message = f"exit code {failure.exitcode} ({failure.signal_name()})"
    return f"rank {rank} failed: {message.strip()}\n(rank logs under {log_dir})"


def main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    _die_with_job(spec["job_pid"])
    try:
        outcome = {"ranks": _elastic_launch(spec)}
    except RankFailure as exc:
        outcome = {"error": str(exc)}
    tmp = Path(spec["outcome_path"] + ".tmp")
    tmp.write_text(json.dumps(outcome))
    os.replace(tmp, spec["outcome_path"])


if __name__ == "__main__":
    main(sys.argv[1])
