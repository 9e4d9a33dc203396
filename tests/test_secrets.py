"""No password leaves the process: train, import and compare against a real tracking server (its
credentials in the URI, or in MLFLOW_TRACKING_URI) and against a real PostgreSQL (its password in
the URI) print, write, log and upload only the bare URI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import read_runs
from mlflow.tracking import MlflowClient

from src.paths import PROJECT_ROOT

TINY = ["gpu=cpu", "benchmark=smoke", "model=resnet50", "model._target_=tests.workloads.by_name", "model.name=tiny"]
SERVER_PASSWORD = "srv-pw-8d3k1q"
DB_EXPERIMENTS = [
    "tracking.experiment=direct",
    "tracking.published_experiment=direct-published",
    "tracking.report_experiment=direct-reports",
]
TABLE = "name_gpu,num_gpu,watt,price,tiny\nRTX 3090,1,350,1499,100.0\n"


def gpubench(module: str, args: list[str], tmp_path, uri: str | None, env: dict | None = None):
    """`python -m module args`, tracking.uri= given unless `uri` is None (MLFLOW_TRACKING_URI then)."""
    extra = [f"tracking.uri={uri}"] if uri else []
    if module == "src.train":
        extra += [f"hydra.sweep.dir={tmp_path}/multirun", f"hydra.run.dir={tmp_path}/run"]
    done = subprocess.run(
        [sys.executable, "-m", module, *args, *extra],
        cwd=PROJECT_ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done.stdout + done.stderr


def every_file_holding(folder, secret: str) -> list[str]:
    return [str(p) for p in folder.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


@pytest.mark.slow  # a PostgreSQL cluster, a tracking server and real jobs end to end
def test_no_password_is_printed_written_logged_or_uploaded(postgres_uri, start_server, tmp_path):
    db_password = postgres_uri.split(":")[2].split("@")[0]
    server = start_server(postgres_uri)
    with_password = server.url.replace("://", f"://alice:{SERVER_PASSWORD}@")
    table = tmp_path / "published.csv"
    table.write_text(TABLE)
    import_args = [f"file={table}", "precision=fp32", "source=lambda"]
    compare_args = ["baseline=rtx3090", "include_smoke=true"]

    printed = [
        # through the server: credentials in tracking.uri, then in MLFLOW_TRACKING_URI
        gpubench("src.train", ["-m", *TINY], tmp_path / "via-server", with_password),
        gpubench("src.published", import_args, tmp_path, with_password),
        gpubench("src.compare", [*compare_args, f"out={tmp_path}/cmp-server"], tmp_path, with_password),
        gpubench(
            "src.compare",
            [*compare_args, f"out={tmp_path}/cmp-env"],
            tmp_path,
            None,
            {"MLFLOW_TRACKING_URI": with_password},
        ),
        # straight into PostgreSQL (experiments of its own: the server's keep their artifacts behind
        # it): SQLAlchemy reads the password from the URI only
        gpubench("src.train", [*TINY, *DB_EXPERIMENTS], tmp_path / "via-db", postgres_uri),
        gpubench("src.published", [*import_args, *DB_EXPERIMENTS], tmp_path, postgres_uri),
        gpubench("src.compare", [*compare_args, *DB_EXPERIMENTS, f"out={tmp_path}/cmp-db"], tmp_path, postgres_uri),
    ]
    assert "View run" in printed[0]  # MLflow's own line, with the bare address
    assert f"at: {server.url}/#/experiments/" in printed[0]
    assert "View run" not in printed[1]  # an import ends a run per figure: no link lines for each
    assert "Runs: experiments `direct`, `direct-published` at `postgresql://127.0.0.1:" in (
        tmp_path / "cmp-db" / "report.md"
    ).read_text()
    (direct,) = read_runs(postgres_uri, "direct")  # the job into PostgreSQL ran and was logged there
    assert direct.info.status == "FINISHED" and "throughput" in direct.data.metrics

    client = MlflowClient(postgres_uri)
    experiments = client.search_experiments()
    runs = [r for e in experiments for r in client.search_runs([e.experiment_id])]
    assert len(runs) == 8  # two jobs, the sweep's parent, two imported rows, three reports
    artifact_stores = [tmp_path] + [
        Path(e.artifact_location.removeprefix("file://")) for e in experiments if e.name.startswith("direct")
    ]
    for secret in (SERVER_PASSWORD, db_password):
        assert not any(secret in text for text in printed), secret
        for run in runs:
            assert not any(secret in v for v in [*run.data.params.values(), *run.data.tags.values()])
        # Hydra's folders, compare's reports, the server's artifact store and its log, the artifacts
        # written straight from this host
        for folder in artifact_stores:
            assert every_file_holding(folder, secret) == [], secret
