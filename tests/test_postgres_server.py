"""A team's tracking server on a real PostgreSQL: a sweep logs to it, compare reads it back."""

from __future__ import annotations

import csv
import os
import pwd
import subprocess
import sys
import time
from urllib.parse import quote

import pytest
from conftest import read_runs, run_cli

from src.paths import PROJECT_ROOT
from tests.conftest import cpu_hardware

CPUX1 = cpu_hardware(1)  # how this host names a CPU job of 1 rank(s)

OTHER_USER = "gpubench-ps"  # an unprivileged user of the server's host, looking at its process list


@pytest.mark.slow  # a PostgreSQL cluster, the server and real job processes end to end
def test_a_sweep_on_a_postgresql_server_is_read_back_by_compare(postgres_uri, start_server, tmp_path):
    server = start_server(postgres_uri, workers=2)
    sweep = run_cli(
        ["-m", "gpu=cpu", "benchmark=smoke", "model=resnet50,gpt2"], tmp_path, server.url, timeout=900
    )
    assert sweep.returncode == 0, sweep.stdout[-2000:] + sweep.stderr[-3000:]
    # A smoke run's models are tiny; the published figure is of the full-size model: one job at that size.
    full_size = run_cli(
        ["gpu=cpu", "benchmark=smoke", "model=resnet50", "~sizes@model", "model.batch_size=2"],
        tmp_path,
        server.url,
        timeout=900,
    )
    assert full_size.returncode == 0, full_size.stdout[-2000:] + full_size.stderr[-3000:]
    # A published row to compare against, imported through the same server.
    table = tmp_path / "published.csv"
    table.write_text("name_gpu,num_gpu,watt,price,resnet50\nRTX 3090,1.0,350.0,1499.0,100.0\n")
    imported = run_cli(
        [f"file={table}", "precision=fp32", "source=lambda"],
        tmp_path,
        server.url,
        module="src.published",
    )
    assert imported.returncode == 0, imported.stderr[-3000:]

    out = tmp_path / "compare"
    compare = run_cli(
        ["baseline=rtx3090", f"out={out}", "include_smoke=true"], tmp_path, server.url, module="src.compare"
    )
    assert compare.returncode == 0, compare.stdout[-2000:] + compare.stderr[-3000:]

    resnet50, gpt2 = f"{CPUX1}-resnet50-fp32-smoke", f"{CPUX1}-gpt2-fp32-smoke"
    jobs: dict[str, list] = {}
    for run in read_runs(server.url):
        if run.data.tags.get("gpu") == "cpu":
            jobs.setdefault(run.info.run_name, []).append(run)
    assert {name: len(found) for name, found in jobs.items()} == {resnet50: 2, gpt2: 1}
    full = next(r for r in jobs[resnet50] if r.data.params["model.image_size"] == "224")
    tiny = next(r for r in jobs[resnet50] if r is not full)
    with (out / "relative_throughput.csv").open() as handle:
        rows = {r["run_ids"]: r for r in csv.DictReader(handle) if r["gpu"] == "cpu"}
    ours = rows[full.info.run_id]  # the run the server holds, set against the published figure
    assert float(ours["relative"]) == pytest.approx(float(ours["throughput"]) / 100.0, rel=1e-3)
    assert rows[tiny.info.run_id]["relative"] == ""  # a smoke run's tiny model is not the one published
    assert rows[jobs[gpt2][0].info.run_id]["model"] == "gpt2"

    # Everything is in PostgreSQL, artifacts on the server's disk, and the password in no log.
    import sqlalchemy

    with sqlalchemy.create_engine(postgres_uri).connect() as db:
        stored = dict(db.execute(sqlalchemy.text("select name, status from runs")).all())
    assert stored[resnet50] == stored[gpt2] == "FINISHED"
    assert any(name.startswith("compare vs rtx3090") for name in stored)  # the report run
    for run in (full, tiny, *jobs[gpt2]):
        assert list(server.artifacts.rglob(f"{run.info.run_id}/artifacts/config.yaml"))
    password = postgres_uri.split(":")[2].split("@")[0]
    assert password not in server.log.read_text()


def other_users_process_list() -> str:
    """`ps -eo args` as another, unprivileged user of this host (made with useradd when missing)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to create and become another user")
    try:
        pwd.getpwnam(OTHER_USER)
    except KeyError:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", OTHER_USER], check=True)
    return subprocess.run(
        ["runuser", "-u", OTHER_USER, "--", "ps", "-eww", "-o", "args"], capture_output=True, text=True, check=True
    ).stdout


@pytest.mark.slow  # a PostgreSQL cluster and the server
def test_the_database_password_is_in_no_console_log_or_process_list(postgres_uri, start_server, tmp_path):
    import sqlalchemy

    password = 'p@ss/w "x y%z'  # the characters people type: `@`, `/`, a quote, spaces, `%`
    with sqlalchemy.create_engine(postgres_uri).connect() as db:
        db.execute(sqlalchemy.text(f"alter user mlflow password '{password}'"))
        db.commit()
    old = postgres_uri.split(":")[2].split("@")[0]
    encoded = postgres_uri.replace(old, quote(password, safe=""), 1)
    server = start_server(encoded)
    from mlflow.tracking import MlflowClient

    MlflowClient(server.url).create_experiment("through the server")
    with sqlalchemy.create_engine(encoded).connect() as db:  # the server runs on this database
        assert "through the server" in db.execute(sqlalchemy.text("select name from experiments")).scalars().all()
    seen = other_users_process_list() + server.log.read_text()
    assert "mlflow server" in seen or "mlflow.server" in seen  # the list does show the server
    secrets = (password, quote(password, safe=""), quote(password), "p@ss", 'w "x')
    assert not any(secret in seen for secret in secrets)
    server.stop()

    def refused(uri: str) -> str:
        """src.server on a URI the database refuses: one line on stderr, exit 2, well within a minute."""
        started = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-m", "src.server", f"--port={server.port}", f"--artifacts-destination={tmp_path}/a"],
            cwd=PROJECT_ROOT, env={**os.environ, "MLFLOW_BACKEND_STORE_URI": uri},
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert proc.returncode == 2 and time.monotonic() - started < 60, proc.stderr[-3000:]
        (line,) = proc.stderr.strip().splitlines()  # no traceback
        assert line.startswith("error: --backend-store-uri=postgresql://***@127.0.0.1:"), line
        assert not any(secret in line for secret in secrets)
        return line

    assert "password authentication failed" in refused(encoded.replace(quote(password, safe=""), "wrong", 1))
    refused(encoded.replace(quote(password, safe=""), password))  # typed unencoded: `@` ends the password
