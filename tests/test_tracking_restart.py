"""Many jobs at once lose nothing when the team's server dies under them: they spool, sync delivers."""

from __future__ import annotations

import pytest
from conftest import read_runs, run_cli

from benchmarks import load_client, tracking_load


@pytest.mark.slow  # a real job, PostgreSQL, the server killed and restarted, src.sync
def test_jobs_spool_through_a_server_restart_and_sync_delivers_each_run_once(
    postgres_uri, start_server, tracking_uri, tmp_path
):
    template = run_cli(["gpu=cpu", "benchmark=smoke", "model=gpt2"], tmp_path, tracking_uri, timeout=600)
    assert template.returncode == 0, template.stderr[-3000:]
    job = load_client.JobTemplate.from_run(tracking_uri, read_runs(tracking_uri)[0].info.run_id, 1, 20)
    server = start_server(postgres_uri)
    # one attempt at the end of each job: what the outage holds back is left for src.sync
    args = tracking_load.parse_args(["--restart", "--outage-s", "5", "--retries", "1", "--timeout-s", "600"])

    clients = 8
    row = tracking_load.one_round(tracking_load.client_context(), job, server, clients, tmp_path, args)

    assert row["spooled"] > 0 and row["left"] > 0  # the outage hit jobs that were logging
    assert row["syncs"] == 1  # one src.sync delivered everything that was left
    assert (row["landed"], row["duplicates"]) == (clients, 0)  # every run complete, each once
