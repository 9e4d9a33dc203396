"""The elastic agents of one job process, forked from a preloaded parent.

    python -m src.rank.agent JOB_PID   (started by src.run.launch, not by users)

The process started here is the preloader: it imports torch, the elastic launcher and the rank's
code once (CUDA untouched), then waits on stdin. For every job it forks a fresh elastic agent,
which leads a session of its own, runs torch's elastic launch (torchrun's engine) for that job
alone, writes the ranks' reports or the failure to the job's outcome file and exits; its ranks are
forked from it in turn, so they begin with everything loaded. A sweep's jobs pay for the imports
once, and every job still gets a new agent and new ranks. One request per line on stdin, one JSON
reply per line on stdout:

    {"preload": BUILDER}                          import the module of a job's model builder (no reply)
    {"spec": SPEC.json, "env": {...}, "job_id": ID}  fork the job's agent -> {"pid": PID}
    {"reap": PID}                                 wait for that agent  -> {"exit_code": CODE}
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import stat
import sys
import time
import traceback
from dataclasses import replace
from pathlib import Path

from src.errors import RankFailure
from src.rank import stack_check

# What every rank imports, loaded once in the preloader before the first job arrives. torch._dynamo is
# loaded by the first optimizer a rank builds (torch.optim's decorators): seconds of model build.
PRELOAD = ("torch", "torch._dynamo", "torch.distributed.launcher.api", "src.rank.worker")


def _die_with(parent_pid: int) -> None:
    """Ask Linux to SIGTERM this process when its parent dies, even by SIGKILL."""
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
    if os.getppid() != parent_pid:  # the parent died before the request took effect
        os._exit(1)


def _elastic_launch(spec: dict) -> list[dict]:
    import torch
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, Std
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    from src.rank.worker import train_rank

    # NCCL's variables are the user's: none is set here (the run records them). A failed or timed-out
    # collective ends its rank all the same (torch's elastic agent sets TORCH_NCCL_ASYNC_ERROR_HANDLING),
    # so the agent sees a dead rank instead of one blocked forever.
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
        rdzv_endpoint=launcher["rdzv_endpoint"],  # one node: the loopback address (src/run/launch.py)
        local_addr=launcher["local_addr"],
        # node 0 hosts the rendezvous store at the endpoint, which names one of its addresses
        rdzv_configs={"timeout": launcher["start_timeout_s"], "is_host": launcher["node_rank"] == 0},
        max_restarts=0,  # a benchmark step that failed once is a result, not something to retry
        monitor_interval=0.1,  # how soon the agent sees its ranks end (or fail)
        # Forked ranks start with torch and the model's code loaded, seconds sooner than spawned
        # ones (torchrun's default for GPUs). Safe for CUDA as long as the agent never touched it.
        start_method="spawn" if torch.cuda.is_initialized() else "fork",
        logs_specs=DefaultLogsSpecs(log_dir=str(log_dir), redirects=Std.ALL, tee=Std.NONE),
    )
    ready = time.time()  # the phase "agent up" ends here: imports done, spec in hand
    try:
        per_rank = elastic_launch(config, train_rank)(spec["rank_cfg"], spec["progress_path"])
    except ChildFailedError as exc:
        rank, failure = _root_failure(exc.failures)
        raise RankFailure(_describe_failure(rank, failure, log_dir)) from None
    return [
        replace(report, agent_ready=ready).to_json() for reports in per_rank.values() for report in reports
    ]


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


def _keep_cuda_untouched() -> None:
    """torch.cuda.is_available() then asks NVML instead of initialising CUDA (a library may call
    it on import): the ranks forked from the agent could not use a CUDA the agent had initialised."""
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"


def _preload(model_target: str | None = None) -> None:
    """Import what the ranks run (torch, the elastic launcher, the rank's code, the model's module),
    so that agents and ranks forked from here start with it loaded."""
    for module in PRELOAD:
        importlib.import_module(module)
    if model_target:
        try:
            importlib.import_module(model_target.rpartition(".")[0])
        except Exception:  # the rank imports it again and fails with the reason, as the job's failure
            pass


def _log_to(path: Path) -> None:
    """From here on the agent and its ranks write to the job's launcher.log, after what the
    preloader printed so far (its stderr, a temp file the job process keeps)."""
    sys.stdout.flush()
    sys.stderr.flush()
    with open(path, "ab") as log:
        early = os.fstat(2)
        if stat.S_ISREG(early.st_mode):  # the temp file, not a terminal or pipe
            log.write(os.pread(2, early.st_size, 0))  # pread: the preloader's offset stays where it is
        log.flush()
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)


def run_agent(job: dict) -> int:
    """One job's elastic agent (in the forked child): launch its ranks, write the outcome file.
    Returns the agent's exit status."""
    started = time.time()
    os.environ.update(job["env"])  # the job process's environment at launch, e.g. its GPUs
    _keep_cuda_untouched()
    spec = json.loads(Path(job["spec"]).read_text())
    if spec.get("job_id") != job.get("job_id"):  # another job wrote this file: run nothing, write nothing
        print(
            f"{job['spec']} belongs to another job (id {spec.get('job_id')}, not {job.get('job_id')})",
            file=sys.stderr,
        )
        return 1
    _log_to(Path(spec["log_dir"]) / "launcher.log")
    try:
        _preload(spec["rank_cfg"]["model"]["_target_"])
        if broken := stack_check.problem():  # one line naming the fix, before any rank starts
            raise RankFailure(broken)
        outcome = {"job_id": spec["job_id"], "ranks": _elastic_launch(spec)}
    except RankFailure as exc:
        outcome = {"job_id": spec["job_id"], "error": str(exc)}
    outcome |= {"agent_started": started, "agent_pid": os.getpid(), "preloader_pid": os.getppid()}
    tmp = Path(spec["outcome_path"] + ".tmp")
    tmp.write_text(json.dumps(outcome))
    os.replace(tmp, spec["outcome_path"])
    return 0


def _fork_agent(job: dict, replies: int) -> int:
    """Fork the job's agent into a session of its own (what the job kills when it ends)."""
    preloader = os.getpid()
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        os.setsid()
        _die_with(preloader)
        os.close(replies)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)  # the requests are the preloader's
        code = run_agent(job)
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        # The ranks have ended: skip the interpreter's teardown of torch, which the job would wait for
        os._exit(code)


def main(job_pid: int) -> None:
    _die_with(job_pid)
    _keep_cuda_untouched()
    replies = os.dup(1)
    os.dup2(2, 1)  # what imports print goes to the early log, not into the replies
    _preload()  # while Hydra composes and the job process opens its run
    stack_check.report()  # checked once here; every job's agent, forked from here, reads the answer
    while line := sys.stdin.readline():
        request = json.loads(line)
        if "preload" in request:  # at a job's start: nothing measures now
            _preload(request["preload"])
            continue
        if "reap" in request:
            _, status = os.waitpid(request["reap"], 0)
            reply = {"exit_code": os.waitstatus_to_exitcode(status)}
        else:
            reply = {"pid": _fork_agent(request, replies)}
        os.write(replies, (json.dumps(reply) + "\n").encode())


if __name__ == "__main__":
    main(int(sys.argv[1]))
