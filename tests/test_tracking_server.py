"""A team's tracking server: started by `python -m src.server`, a sweep logs to it over HTTP."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import read_runs

from src import server
from src.paths import PROJECT_ROOT
from src.server import main
from tests.conftest import cpu_hardware

CPUX1 = cpu_hardware(1)  # how this host names a CPU job of 1 rank(s)


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
    assert sorted(r.info.run_name for r in children) == [f"{CPUX1}-gpt2-bf16-smoke", f"{CPUX1}-gpt2-fp32-smoke"]
    for run in children:
        assert run.info.status == "FINISHED"
        assert run.data.tags["gpu"] == "cpu" and run.data.tags["host"]
        assert run.info.artifact_uri.startswith("mlflow-artifacts:")  # uploaded through the server
        stored = list((tmp_path / "server" / "artifacts").rglob(f"{run.info.run_id}/artifacts/config.yaml"))
        assert len(stored) == 1


@pytest.mark.parametrize(
    "store",
    [
        "postgresql://bench:secret@db.example:5432/mlflow",
        'postgresql://bench:pa ss"secret@db.example:5432/mlflow',  # spaces and a quote, as typed
        "postgresql://bench:p@ss/secret@db.example:5432/mlflow",  # `@` and `/` unencoded
        "postgresql://bench:p%40ss%2Fsecret@db.example:5432/mlflow",  # percent-encoded
    ],
)
def test_server_keeps_the_password_off_its_console_and_command_line(monkeypatch, tmp_path, capsys, store):
    started = []
    monkeypatch.setattr(os, "execv", lambda *args: pytest.fail("started with the store URI as an argument"))
    monkeypatch.setattr(os, "execve", lambda path, argv, env: started.append((argv, env)))
    monkeypatch.setattr(server, "connect_problem", lambda uri: None)  # no db.example to reach
    monkeypatch.delenv("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", raising=False)  # main() sets it
    main(["--host", "0.0.0.0", "--backend-store-uri", store, "--artifacts-destination", str(tmp_path / "a")])
    argv, env = started[0]
    assert argv[argv.index("--host") + 1] == "0.0.0.0"
    assert env[server.STORE_ENV] == store  # handed over whole, by the environment
    assert not any("secret" in arg for arg in argv)  # the process list shows every argument
    printed = capsys.readouterr()
    assert "warning: bound to 0.0.0.0" in printed.err
    assert "runs in postgresql://***@db.example:5432/mlflow" in printed.out  # the console may be a log
    assert "secret" not in printed.out + printed.err


def test_server_refuses_a_relative_sqlite_path(monkeypatch, capsys):
    monkeypatch.setattr(os, "execve", lambda *args: pytest.fail("started"))
    with pytest.raises(SystemExit):
        main(["--backend-store-uri", "sqlite:///rel.db"])
    assert "--backend-store-uri=sqlite:///rel.db: an sqlite store needs an absolute path" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("store", "says"),
    [
        ("postgresql://bench:secret@db/mlflow", "its database driver is missing"),
        ("nosuchdb://bench:secret@db/mlflow", "not a database URI"),
    ],
)
def test_server_refuses_a_store_it_cannot_open_before_starting(monkeypatch, capsys, store, says):
    started = []
    monkeypatch.setattr(os, "execve", lambda path, argv, env: started.append(argv))
    monkeypatch.setitem(sys.modules, "psycopg", None)  # a server installed without the [server] extra
    with pytest.raises(SystemExit):
        main(["--backend-store-uri", store])
    err = capsys.readouterr().err
    assert f"--backend-store-uri={store.replace('bench:secret', '***')}: {says}" in err
    assert "secret" not in err and not started


def test_server_rejects_a_bad_port(capsys):
    with pytest.raises(SystemExit):
        main(["--port", "70000"])
    assert "--port=70000" in capsys.readouterr().err
