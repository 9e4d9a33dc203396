"""A team's tracking server: started by `python -m src.server`, a sweep logs to it over HTTP."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from conftest import read_runs

from src.paths import PROJECT_ROOT
from src.server import main


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_healthy(url: str, server: subprocess.Popen, timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise AssertionError(f"server exited: {server.stdout.read()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(1)
    raise AssertionError(f"no answer from {url}/health within {timeout_s} s")


@pytest.fixture
def server(tmp_path):
    """The server on a free loopback port (the default address), stopped with its workers after."""
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "src.server",
            f"--port={port}",
            f"--backend-store-uri=sqlite:///{tmp_path}/server/mlflow.db",
            f"--artifacts-destination={tmp_path}/server/artifacts",
            "--",
            "--workers=1",
        ],
        cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: uvicorn's worker goes with it
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, proc)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.mark.slow  # real job processes end to end
def test_sweep_logs_to_the_server_named_by_mlflow_tracking_uri(server, tmp_path):
    env = {**os.environ, "MLFLOW_TRACKING_URI": server, "PYTHONUNBUFFERED": "1"}
    args = ["-m", "gpu=cpu", "model=gpt2", "benchmark=smoke", "precision=fp32,bf16"]
    result = subprocess.run(
        [sys.executable, "-m", "src.train", *args, f"hydra.sweep.dir={tmp_path}/multirun"],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]

    runs = read_runs(server)  # read back over HTTP, as src.compare on any machine would
    children = [r for r in runs if r.data.tags.get("sweep") != "true"]
    assert sorted(r.info.run_name for r in children) == ["cpux1-gpt2-bf16", "cpux1-gpt2-fp32"]
    for run in children:
        assert run.info.status == "FINISHED"
        assert run.data.tags["gpu"] == "cpu" and run.data.tags["host"]
        assert run.info.artifact_uri.startswith("mlflow-artifacts:")  # uploaded through the server
        stored = list((tmp_path / "server" / "artifacts").rglob(f"{run.info.run_id}/artifacts/config.yaml"))
        assert len(stored) == 1


def test_server_warns_when_bound_beyond_loopback(monkeypatch, tmp_path, capsys):
    started = []
    monkeypatch.setattr(os, "execv", lambda path, argv: started.append(argv))
    monkeypatch.delenv("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", raising=False)  # main() sets it
    store = "postgresql://bench:secret@db.example:5432/mlflow"
    main(["--host", "0.0.0.0", "--backend-store-uri", store, "--artifacts-destination", str(tmp_path / "a")])
    argv = started[0]
    assert argv[argv.index("--host") + 1] == "0.0.0.0"
    assert argv[argv.index("--backend-store-uri") + 1] == store  # passed on as given
    assert "warning: bound to 0.0.0.0" in capsys.readouterr().err


def test_server_rejects_a_bad_port(capsys):
    with pytest.raises(SystemExit):
        main(["--port", "70000"])
    assert "--port=70000" in capsys.readouterr().err
