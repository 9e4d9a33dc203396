"""The launcher group: how a job's ranks start, on one node or several (c10d rendezvous)."""

from __future__ import annotations

from dataclasses import dataclass

from omegaconf import MISSING, DictConfig

from src.config.checks import Errors, positive_int


@dataclass
class LauncherConfig:
    nnodes: int = 1
    node_rank: int = MISSING  # this machine's node; node 0's job process logs the run (from the scheduler)
    rdzv_endpoint: str = MISSING  # host:port of the c10d rendezvous; port 0: a free port (one node)
    start_timeout_s: int = 120  # the rendezvous and the ranks' start
    # stop the ranks (FAILED: host memory exhausted) once the host has less than this many GB
    # available, before the kernel's OOM killer picks a process to end; 0: no guard
    host_memory_reserve_gb: float = 1.0


def check(cfg: DictConfig, errors: Errors) -> None:
    """Node count, this node's index and the rendezvous endpoint of a (multi-node) job."""
    la = cfg.launcher
    errors.need(positive_int(la.nnodes), "launcher.nnodes", la.nnodes, "a positive integer")
    if not positive_int(la.nnodes):
        return  # node_rank and the endpoint are checked against a node count
    errors.need(
        isinstance(la.node_rank, int) and 0 <= la.node_rank < la.nnodes,
        "launcher.node_rank",
        la.node_rank,
        f"an integer from 0 to {la.nnodes - 1} (launcher.nnodes={la.nnodes}); "
        "it is read from SLURM_NODEID, NODE_RANK or GROUP_RANK when set",
    )
    host, _, port = str(la.rdzv_endpoint).rpartition(":")
    if not host or not port.isdigit() or int(port) > 65535:
        errors.need(
            False, "launcher.rdzv_endpoint", la.rdzv_endpoint, "host:port with a port from 0 to 65535"
        )
    elif la.nnodes > 1:
        errors.need(
            int(port) != 0,
            "launcher.rdzv_endpoint",
            la.rdzv_endpoint,
            f"a fixed port, on an address of node 0 that every node reaches, when launcher.nnodes={la.nnodes}",
        )
    errors.need(
        positive_int(la.start_timeout_s),
        "launcher.start_timeout_s",
        la.start_timeout_s,
        "a positive integer",
    )
    errors.need(
        la.host_memory_reserve_gb >= 0,
        "launcher.host_memory_reserve_gb",
        la.host_memory_reserve_gb,
        ">= 0 GB (0: no guard)",
    )
