"""Where a job's ranks meet: one node on the loopback address, whatever the host's name; a
rendezvous that cannot start stops the job before it starts, in one line, exit 2. The host whose
name does not resolve is real: a UTS namespace of the test's own (`unshare --uts`, root only)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest
from conftest import compose_cfg, read_runs

from src.errors import ConfigError
from src.paths import PROJECT_ROOT
from src.run import launch
from src.run.prepare import prepare

UNRESOLVED = "gpubench-nowhere-17"  # in no /etc/hosts and no DNS
needs_uts = pytest.mark.skipif(
    os.geteuid() != 0 or subprocess.run(["unshare", "--uts", "true"], capture_output=True).returncode != 0,
    reason="needs root and unshare for a hostname of its own",
)


def train_named(hostname: str, args: list[str], tmp_path, tracking_uri: str, timeout: float):
    """`python -m src.train ARGS` on this host under another name (a UTS namespace)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PET_RDZV_ENDPOINT", "SLURM_NODEID", "NODE_RANK")}
    command = [
        sys.executable,
        "-m",
        "src.train",
        *args,
        f"tracking.uri={tracking_uri}",
        f"hydra.run.dir={tmp_path}/job",
    ]
    script = f'hostname {hostname} && exec "$@"'
    return subprocess.run(
        ["unshare", "--uts", "sh", "-c", script, "sh", *command],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.slow  # a real job in a namespace of its own
@needs_uts
def test_a_one_node_job_runs_on_a_host_whose_name_does_not_resolve(tmp_path, tracking_uri):
    with pytest.raises(OSError):
        socket.getaddrinfo(UNRESOLVED, None)
    done = train_named(UNRESOLVED, ["gpu=cpu", "model=gpt2", "benchmark=smoke"], tmp_path, tracking_uri, 300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    (run,) = read_runs(tracking_uri)
    assert run.info.status == "FINISHED" and run.data.tags["owner.host"] == UNRESOLVED


@pytest.mark.slow  # a real job process in a namespace of its own
@needs_uts
def test_a_node_of_several_whose_name_does_not_resolve_stops_at_once_in_one_line(tmp_path, tracking_uri):
    args = [
        "gpu=cpu",
        "model=gpt2",
        "benchmark=smoke",
        "launcher.nnodes=2",
        "launcher.node_rank=0",
        "launcher.rdzv_endpoint=127.0.0.1:29400",
    ]
    started = time.monotonic()
    done = train_named(UNRESOLVED, args, tmp_path, tracking_uri, 120)
    assert done.returncode == 2 and time.monotonic() - started < 60
    assert done.stderr.strip().splitlines() == [
        f"error: this host's name '{UNRESOLVED}' does not resolve (Name or service not known): the nodes "
        "find each other by it; add it to /etc/hosts or DNS"
    ]
    assert read_runs(tracking_uri) == []  # nothing was opened


def test_one_node_meets_on_the_loopback_address_and_several_at_their_endpoint():
    one = {"nnodes": 1, "node_rank": 0, "rdzv_endpoint": "node7.example:0"}
    assert launch.rendezvous(one) == {"rdzv_endpoint": "127.0.0.1:0", "local_addr": "127.0.0.1"}
    two = {"nnodes": 2, "node_rank": 1, "rdzv_endpoint": "10.0.0.1:29400"}
    assert launch.rendezvous(two) == {"rdzv_endpoint": "10.0.0.1:29400", "local_addr": None}


def test_a_rendezvous_port_another_program_holds_is_refused_before_the_job():
    with socket.create_server(("127.0.0.1", 0)) as held:
        port = held.getsockname()[1]
        cfg = compose_cfg(
            ["gpu=cpu", "model=gpt2", "benchmark=smoke", f"launcher.rdzv_endpoint=localhost:{port}"]
        )
        with pytest.raises(ConfigError) as refused:
            prepare(cfg)
    assert str(refused.value) == (
        f"launcher.rdzv_endpoint='localhost:{port}': port {port} cannot be opened here "
        "(Address already in use); name a free port, or 0 on one node"
    )


def test_an_endpoint_whose_host_does_not_resolve_is_refused_before_the_job():
    cfg = compose_cfg(
        [
            "gpu=cpu",
            "model=gpt2",
            "benchmark=smoke",
            "launcher.nnodes=2",
            "launcher.node_rank=1",
            "launcher.rdzv_endpoint=node0.invalid:29400",
        ]
    )
    with pytest.raises(
        ConfigError,
        match=r"^launcher.rdzv_endpoint='node0.invalid:29400': its host 'node0.invalid' "
        r"does not resolve \(",
    ):
        prepare(cfg)
