"""Multi-node jobs: node index from the scheduler, endpoint checks, two "nodes" on 127.0.0.1."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
from conftest import compose_cfg, cpu_hardware, read_runs

from src.config.finalise import finalize
from src.errors import ConfigError
from src.paths import PROJECT_ROOT

SCHEDULER_VARS = ("SLURM_NODEID", "NODE_RANK", "GROUP_RANK", "PET_RDZV_ENDPOINT")


@pytest.fixture
def no_scheduler(monkeypatch):
    for var in SCHEDULER_VARS:
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


@pytest.mark.parametrize(
    "env, expected",
    [
        ({}, 0),
        ({"GROUP_RANK": "1"}, 1),
        ({"NODE_RANK": "2", "GROUP_RANK": "1"}, 2),
        ({"SLURM_NODEID": "3", "NODE_RANK": "2"}, 3),  # Slurm's own figure wins
    ],
)
def test_node_rank_comes_from_the_scheduler(no_scheduler, env, expected):
    for var, value in env.items():
        no_scheduler.setenv(var, value)
    cfg = compose_cfg(["gpu=cpu", "launcher.nnodes=4"])
    assert cfg.launcher.node_rank == expected


def test_command_line_node_rank_beats_the_environment(no_scheduler):
    no_scheduler.setenv("SLURM_NODEID", "1")
    assert compose_cfg(["gpu=cpu", "launcher.nnodes=2", "launcher.node_rank=0"]).launcher.node_rank == 0


@pytest.mark.parametrize(
    "overrides, key, hint",
    [
        (["launcher.nnodes=2"], "launcher.rdzv_endpoint='localhost:0'", "fixed port"),
        (
            ["launcher.nnodes=2", "launcher.node_rank=2", "launcher.rdzv_endpoint=h:1"],
            "launcher.node_rank=2",
            "0 to 1",
        ),
        (["launcher.rdzv_endpoint=nohost"], "launcher.rdzv_endpoint='nohost'", "host:port"),
        (["launcher.nnodes=0"], "launcher.nnodes=0", "positive integer"),
    ],
)
def test_bad_launcher_values_are_named(no_scheduler, overrides, key, hint):
    cfg = compose_cfg(["gpu=cpu", "model=gpt2", "benchmark=smoke", *overrides])
    with pytest.raises(ConfigError) as err:
        finalize(cfg)
    assert key in str(err.value) and hint in str(err.value)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start_node(node_rank: int, port: int, tmp_path, tracking_uri: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in SCHEDULER_VARS}
    args = [
        "gpu=cpu",
        "model=gpt2",
        "benchmark=smoke",
        "launcher.nnodes=2",
        f"launcher.node_rank={node_rank}",
        f"launcher.rdzv_endpoint=127.0.0.1:{port}",
        f"tracking.uri={tracking_uri}",
        f"hydra.run.dir={tmp_path}/node{node_rank}",
    ]
    return subprocess.Popen(
        [sys.executable, "-m", "src.train", *args],
        cwd=PROJECT_ROOT,
        env={**env, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


@pytest.mark.slow  # real job processes end to end
def test_two_nodes_train_one_job_and_node_0_logs_one_run(tmp_path, tracking_uri):
    port = _free_port()
    nodes = [_start_node(rank, port, tmp_path, tracking_uri) for rank in (0, 1)]
    outputs = [node.communicate(timeout=300)[0] for node in nodes]
    for node, output in zip(nodes, outputs, strict=True):
        assert node.returncode == 0, output[-3000:]
    assert "node 0 logs the run" in outputs[1]

    runs = read_runs(tracking_uri)
    assert len(runs) == 1  # node 1 opened none
    run = runs[0]
    assert run.info.status == "FINISHED"
    assert run.info.run_name == f"{cpu_hardware(1, nodes=2)}-gpt2-fp32-smoke"  # cpux2x1t...: 2 nodes x 1 rank
    assert run.data.tags["gpu_count"] == "2"
    assert run.data.tags["nnodes"] == "2"
    assert run.data.tags["gpus_per_node"] == "1"
    metrics = run.data.metrics
    # node 0 saw node 1's rank too: both ranks' items (2 sequences x 32 tokens each) per step
    assert metrics["items_per_step"] == 2 * 2 * 32
    assert metrics["throughput_per_gpu"] == pytest.approx(metrics["throughput"] / 2)
