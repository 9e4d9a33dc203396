"""compare on the team set-up: `mlflow server` on a real PostgreSQL, whose columns hold what
MLflow's schema says (a tag value 8,000 characters, where sqlite keeps anything): the study's
compare and a projected one end to end, and values longer than the columns (the study's report
ran past 8,000 characters) written whole."""

from __future__ import annotations

import pytest
from conftest import run_cli

from src.tracking import job_run
from src.tracking.job_run import LONG_VALUES_DIR, TAG_VALUE_MAX
from tests.test_projection_compare import COUNTED, SHARES, STACK

NOTE = "mlflow.note.content"  # the report, as the report run's description in MLflow's UI


def report_run(url: str):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(url)
    experiment = client.get_experiment_by_name("gpubench-reports")
    (run,) = client.search_runs([experiment.experiment_id], filter_string="tags.report = 'true'")
    return client, run


def assert_whole_report_is_kept(url: str, report: str) -> None:
    """The report run's note is the report; one longer than the column holds the report's start and
    names the artifact with all of it."""
    client, run = report_run(url)
    assert run.info.status == "FINISHED"
    note = run.data.tags[NOTE]
    if len(report) <= TAG_VALUE_MAX:
        assert note == report
        return
    artifact = f"{LONG_VALUES_DIR}/tags/{NOTE}.txt"
    assert len(note) <= TAG_VALUE_MAX and note.startswith(report[:2000]) and artifact in note
    assert open(client.download_artifacts(run.info.run_id, artifact)).read() == report


@pytest.mark.slow  # PostgreSQL, the server, and the study's import of Lambda's tables
def test_the_study_compare_is_written_whole_through_a_server_on_postgresql(
    postgres_uri, start_server, tmp_path
):
    server = start_server(postgres_uri)
    out = tmp_path / "study"
    done = run_cli(
        ["experiment=lambda_a6000_vs_3090", f"out={out}"],
        tmp_path,
        server.url,
        module="src.compare",
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert_whole_report_is_kept(server.url, (out / "report.md").read_text())


@pytest.mark.slow  # PostgreSQL and the server
def test_values_longer_than_postgresql_s_columns_are_written_whole_through_a_server(
    postgres_uri, start_server
):
    """A report of 50,000 characters as a run's description, a long param and a long run name: the
    lengths the study's report, a long config value or a long name reach."""
    from mlflow.tracking import MlflowClient
    from omegaconf import OmegaConf

    from src.tracking import store

    server = start_server(postgres_uri)
    tracking = OmegaConf.create({"uri": server.url, "experiment": "gpubench", "retries": 1, "backoff_s": 0})
    report = "# a report\n" + "one line of a long report\n" * 2000
    run = job_run.JobRun(
        tracking,
        store.ensure_experiment(server.url, "gpubench-reports"),
        "r" * 300,
        {"report": "true", NOTE: report},
    )
    run.log_params({"long.setting": "x" * 7000})
    run.end("FINISHED")
    assert_whole_report_is_kept(server.url, report)
    kept = MlflowClient(server.url).get_run(run.run_id)
    assert len(kept.data.params["long.setting"]) == job_run.PARAM_VALUE_MAX
    assert kept.info.run_name == "r" * job_run.RUN_NAME_MAX


def _job_run(client, experiment_id: str, model: str, metrics: dict, kind: str = "training") -> str:
    """A finished h200 run, tagged and logged as a job logs one."""
    tags = {
        "gpu": "h200",
        "gpu_name": "NVIDIA H200",
        "gpu_count": "1",
        "model": model,
        "category": "vision",
        "precision": "amp",
        "unit": "images/s",
        "job_kind": kind,
        **STACK,
    }
    run_id = client.create_run(experiment_id, tags=tags).info.run_id
    client.log_param(run_id, "precision.peak_key", "fp16")
    for key, value in metrics.items():
        client.log_metric(run_id, key, value)
    if kind == "training":  # its step's ops, counted, as a job logs them
        client.log_text(run_id, COUNTED.dumps(), "op_counts.json")
    client.set_terminated(run_id, "FINISHED")
    return run_id


@pytest.mark.slow  # PostgreSQL and the server
def test_a_projected_compare_is_written_whole_through_a_server_on_postgresql(
    postgres_uri, start_server, tmp_path
):
    from mlflow.tracking import MlflowClient

    server = start_server(postgres_uri)
    client = MlflowClient(server.url)
    experiment = client.create_experiment("gpubench")
    _job_run(client, experiment, "ceilings", {"ceiling_matmul_fp16_tflops": 660.0}, kind="ceilings")
    breakdown = {f"breakdown_{share}_share": value for share, value in SHARES.items()}
    measured = {"throughput": 6000.0, "flops_per_item": 2.45e10, "batch_size": 256, "peak_memory_gb": 20.0}
    _job_run(client, experiment, "resnet50", measured | breakdown)
    out = tmp_path / "projected"
    done = run_cli(
        [f"out={out}", "baseline=h200", "project=[a6000]", "tracking.published_experiment="],
        tmp_path,
        server.url,
        module="src.compare",
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    report = (out / "report.md").read_text()
    assert "## Projection: a6000" in report  # the a6000's point, projected from the h200's
    assert_whole_report_is_kept(server.url, report)
