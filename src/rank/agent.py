"""The elastic agent: started by src.run.launch in a session of its own, it runs torch's elastic
launch (torchrun's engine) for one job and writes the ranks' reports, or the failure, to the
outcome file the job process reads.

    python -m src.rank.agent JOB_PID [BUILDER]   (then on stdin one line: {"spec": SPEC.json, "env": {...}, "job_id": ID})

It is started ahead of its job (src.run.launch.prestart_agent): it imports torch and the rank's
code first, then waits for the job's spec, and starts the ranks by fork, so they begin with all of
that loaded. Each job still gets an agent and ranks of its own; an agent serves one job.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import sys
import time
from pathlib import Path

from src.errors import RankFailure

# Multicast over NVLink (NVLS) can take the shared host's GPUs out of service: keep it off.
SAFE_NCCL_ENV = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
# What every rank imports, loaded once in the agent before its job arrives. torch._dynamo is
# loaded by the first optimizer a rank builds (torch.optim's decorators): seconds of model build.
PRELOAD = ("torch", "torch._dynamo", "torch.distributed.launcher.api", "src.rank.worker")
# A failed or timed-out NCCL collective aborts its communicator and ends the rank, so the agent
# sees a dead rank instead of one blocked forever.
FAIL_FAST_ENV = {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"}


def _die_with_job(job_pid: int) -> None:
    """Ask Linux to SIGTERM the agent when the job process dies, even by SIGKILL."""
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
    if os.getppid() != job_pid:  # the job died before the request took effect
        sys.exit(1)


def _elastic_launch(spec: dict) -> list[dict]:
    import torch
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, Std
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    from src.rank.worker import train_rank

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
    return [report | {"agent_ready": ready} for reports in per_rank.values() for report in reports]


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
    """Import what the ranks run (torch, the elastic launcher, the rank's code, the model's module)
    into the agent, so forked ranks start with it loaded instead of importing it again."""
    for module in PRELOAD:
        importlib.import_module(module)
    if model_target:
        try:
            importlib.import_module(model_target.rpartition(".")[0])
        except Exception:  # the rank imports it again and fails with the reason, as the job's failure
            pass


def _log_to(path: Path) -> None:
    """From here on the agent and its ranks write to the job's launcher.log, after what the agent
    printed while it waited (into the early log, a temp file the job opened as its stdout)."""
    sys.stdout.flush()
    sys.stderr.flush()
    with open(path, "ab") as log:
        os.lseek(1, 0, os.SEEK_SET)
        while chunk := os.read(1, 1 << 16):
            log.write(chunk)
        log.flush()
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)


def main(job_pid: int, model_target: str | None = None) -> None:
    started = time.time()
    _die_with_job(job_pid)
    _keep_cuda_untouched()
    _preload(model_target)  # while the job process opens its run, or logs the job before
    request = sys.stdin.readline()
    if not request:  # the job process ended without a job for this agent
        return
    job = json.loads(request)
    os.environ.update(job["env"])  # the job process's environment at launch, e.g. its GPUs
    _keep_cuda_untouched()
    spec = json.loads(Path(job["spec"]).read_text())
    if spec.get("job_id") != job.get("job_id"):  # another job wrote this file: run nothing, write nothing
        sys.exit(f"{job['spec']} belongs to another job (id {spec.get('job_id')}, not {job.get('job_id')})")
    _log_to(Path(spec["log_dir"]) / "launcher.log")
    try:
        _preload(spec["rank_cfg"]["model"]["_target_"])
        outcome = {"job_id": spec["job_id"], "ranks": _elastic_launch(spec)}
    except RankFailure as exc:
        outcome = {"job_id": spec["job_id"], "error": str(exc)}
    outcome["agent_started"] = started  # before its job's spec came: see tests/test_robust.py
    tmp = Path(spec["outcome_path"] + ".tmp")
    tmp.write_text(json.dumps(outcome))
    os.replace(tmp, spec["outcome_path"])
    sys.stdout.flush()
    sys.stderr.flush()
    # The ranks have ended: skip the interpreter's teardown of torch, which the job would wait for
    os._exit(0)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else None)
