"""A team's tracking server on a real PostgreSQL: a sweep logs to it, compare reads it back."""

from __future__ import annotations

import csv

import pytest
from conftest import read_runs, run_cli


@pytest.mark.slow  # a PostgreSQL cluster, the server and real job processes end to end
def test_a_sweep_on_a_postgresql_server_is_read_back_by_compare(postgres_uri, start_server, tmp_path):
    server = start_server(postgres_uri, workers=2)
    sweep = run_cli(
        ["-m", "gpu=cpu", "benchmark=smoke", "model=resnet50,gpt2"], tmp_path, server.url, timeout=900
    )
    assert sweep.returncode == 0, sweep.stdout[-2000:] + sweep.stderr[-3000:]
    # A published row to compare against, imported through the same server.
    table = tmp_path / "published.csv"
    table.write_text("name_gpu,num_gpu,watt,price,resnet50\nRTX 3090,1.0,350.0,1499.0,100.0\n")
    imported = run_cli(
        [f"file={table}", "precision=fp32", "source=lambda"],
        tmp_path,
        server.url,
        module="src.import_results",
    )
    assert imported.returncode == 0, imported.stderr[-3000:]

    out = tmp_path / "compare"
    compare = run_cli(
        ["baseline=rtx3090", f"out={out}", "include_smoke=true"], tmp_path, server.url, module="src.compare"
    )
    assert compare.returncode == 0, compare.stdout[-2000:] + compare.stderr[-3000:]

    jobs = {r.info.run_name: r for r in read_runs(server.url) if r.data.tags.get("gpu") == "cpu"}
    assert set(jobs) == {"cpux1-resnet50-fp32-smoke", "cpux1-gpt2-fp32-smoke"}
    with (out / "relative_throughput.csv").open() as handle:
        rows = {(r["gpu"], r["model"]): r for r in csv.DictReader(handle)}
    ours = rows[("cpu", "resnet50")]
    assert ours["run_ids"] == jobs["cpux1-resnet50-fp32-smoke"].info.run_id  # the run the server holds
    assert float(ours["relative"]) == pytest.approx(float(ours["throughput"]) / 100.0, rel=1e-3)
    assert rows[("cpu", "gpt2")]["run_ids"] == jobs["cpux1-gpt2-fp32-smoke"].info.run_id

    # Everything is in PostgreSQL, artifacts on the server's disk, and the password in no log.
    import sqlalchemy

    with sqlalchemy.create_engine(postgres_uri).connect() as db:
        stored = dict(db.execute(sqlalchemy.text("select name, status from runs")).all())
    assert stored["cpux1-resnet50-fp32-smoke"] == stored["cpux1-gpt2-fp32-smoke"] == "FINISHED"
    assert any(name.startswith("compare vs rtx3090") for name in stored)  # the report run
    for run in jobs.values():
        assert list(server.artifacts.rglob(f"{run.info.run_id}/artifacts/config.yaml"))
    password = postgres_uri.split(":")[2].split("@")[0]
    assert password not in server.log.read_text()
