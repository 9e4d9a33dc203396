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


def launch_ranks(
    rank_cfg: dict, nproc: int, launcher: dict, log_dir: Path, progress_path: Path
) -> dict[int, dict]:
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
        run_id=launcher.get("run_id") or str(uuid.uuid4()),
        rdzv_backend="c10d",
        rdzv_endpoint=launcher["rdzv_endpoint"],
        rdzv_configs={"rank": launcher["node_rank"], "timeout": launcher["start_timeout_s"]},
        max_restarts=0,  # a benchmark step that failed once is a result, not something to retry
        monitor_interval=0.5,
        start_method="spawn",
        logs_specs=DefaultLogsSpecs(log_dir=str(log_dir), redirects=Std.ALL, tee=Std.NONE),
    )
    try:
        return elastic_launch(config, train_rank)(rank_cfg, str(progress_path))
    except ChildFailedError as exc:
        rank, failure = exc.get_first_failure()
        raise RankFailure(_describe_failure(rank, failure, log_dir)) from None


def _describe_failure(rank: int, failure, log_dir: Path) -> str:
    message = failure.message
    if isinstance(message, dict):  # the error file written by @record: message plus traceback
        callstack = message.get("extraInfo", {}).get("py_callstack", "")
        message = f"{message.get('message', '')}\n{callstack}"
    if not message or message.startswith("To enable traceback"):
        message = f"exit code {failure.exitcode} ({failure.signal_name()})"
    return f"rank {rank} failed: {message.strip()}\n(rank logs under {log_dir})"
