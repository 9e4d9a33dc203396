"""compare on the team set-up: `mlflow server` on a real PostgreSQL, whose columns hold what
MLflow's schema says (a tag value 8,000 characters, where sqlite keeps anything). The study's
report and a projected comparison are longer than that: their runs must still be written whole."""

from __future__ import annotations

import pytest
from conftest import run_cli

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
    report = (out / "report.md").read_text()
    assert len(report) > TAG_VALUE_MAX  # longer than the column: the case PostgreSQL refused
    assert_whole_report_is_kept(server.url, report)


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
    assert_whole_report_is_kept(server.url, (out / "report.md").read_text())
    _, report = report_run(server.url)
    projected = client.search_runs(
        [report.info.experiment_id], filter_string=f"tags.`mlflow.parentRunId` = '{report.info.run_id}'"
    )
    assert [(r.data.tags["gpu"], r.info.status) for r in projected] == [("a6000", "FINISHED")]
