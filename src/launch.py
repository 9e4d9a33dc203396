"""Start the ranks of one job with torch's elastic launcher, the engine behind `torchrun`.

Fresh worker processes for every job, a c10d rendezvous on a free port (or the endpoint a
multi-node run names), and the ranks' own stdout/stderr captured under the job's folder.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path


class RankFailure(RuntimeError):
    """A rank raised or died; the message carries its traceback or exit reason."""


# Multicast over NVLink (NVLS) can take the shared host's GPUs out of service: keep it off.
SAFE_NCCL_ENV = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}


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
    """Run this node's ranks; returns the reports of all the job's ranks, on every node."""
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, Std
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    from src.worker import train_rank

    for key, value in SAFE_NCCL_ENV.items():
        os.environ.setdefault(key, value)
    log_dir.mkdir(parents=True, exist_ok=True)
    config = LaunchConfig(
        min_nodes=launcher["nnodes"],
        max_nodes=launcher["nnodes"],
        nproc_per_node=nproc,
        run_id=run_id,
        rdzv_backend="c10d",  # c10d numbers the ranks itself; node_rank only says which node logs
        rdzv_endpoint=launcher["rdzv_endpoint"],
        # node 0 hosts the rendezvous store at the endpoint, which names one of its addresses
        rdzv_configs={"timeout": launcher["start_timeout_s"], "is_host": launcher["node_rank"] == 0},
        max_restarts=0,  # a benchmark step that failed once is a result, not something to retry
        monitor_interval=0.5,
        start_method="spawn",
        logs_specs=DefaultLogsSpecs(log_dir=str(log_dir), redirects=Std.ALL, tee=Std.NONE),
    )
    try:
        per_rank = elastic_launch(config, train_rank)(rank_cfg, str(progress_path))
    except ChildFailedError as exc:
        rank, failure = exc.get_first_failure()
        raise RankFailure(_describe_failure(rank, failure, log_dir)) from None
    return [report for reports in per_rank.values() for report in reports]


def _describe_failure(rank: int, failure, log_dir: Path) -> str:
    message = failure.message
    if isinstance(message, dict):  # the error file written by @record: message plus traceback
        callstack = message.get("extraInfo", {}).get("py_callstack", "")
        message = f"{message.get('message', '')}\n{callstack}"
    if not message or message.startswith("To enable traceback"):
        message = f"exit code {failure.exitcode} ({failure.signal_name()})"
    return f"rank {rank} failed: {message.strip()}\n(rank logs under {log_dir})"
