"""The tracking server at fault while compare writes: gone while compare tags runs, and compare
killed while its report run is open. Real processes, a real `mlflow server` and a real SIGKILL;
a proxy (tests/fault_proxy.py) puts each fault at one exact MLflow call."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from fault_proxy import FaultProxy

from src.paths import PROJECT_ROOT

STACK = {
    "torch_version": "2.11.0",
    "cuda_version": "13.0",
    "cudnn_version": "91000",
    "driver_version": "580.1",
}
POINT = {"gpu_count": "1", "model": "resnet50", "category": "vision", "precision": "tf32", "unit": "images/s"}
PARAMS = {"benchmark.min_steps": 50, "benchmark.target_ci": 0.01, "precision.name": "tf32"}


def measured_runs(url: str) -> None:
    """Two cards' finished ResNet-50 runs, as jobs log them; the a6000's stopped on its time limit
    with a wide interval, which compare flags (ci_not_met) and tags on that run."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(url)
    experiment = client.create_experiment("gpubench")
    for gpu, name, throughput, stop, ci in [
        ("rtx3090", "NVIDIA GeForce RTX 3090", 500.0, "ci", 0.004),
        ("a6000", "NVIDIA RTX A6000", 480.0, "time_limit", 0.08),
    ]:
        tags = {
            "gpu": gpu,
            "gpu_name": name,
            "stop_reason": stop,
            "math_matmul_tf32": "True",
            **POINT,
            **STACK,
        }
        run_id = client.create_run(experiment, tags=tags).info.run_id
        for key, value in PARAMS.items():
            client.log_param(run_id, key, value)
        for key, value in {"throughput": throughput, "step_time_ci95_rel": ci, "measured_steps": 120}.items():
            client.log_metric(run_id, key, value)
        client.set_terminated(run_id, "FINISHED")


def start_compare(url: str, out) -> subprocess.Popen:
    command = ["-m", "src.compare", "baseline=rtx3090", f"out={out}", f"tracking.uri={url}"]
    return subprocess.Popen(
        [sys.executable, *command, "tracking.published_experiment="],
        cwd=PROJECT_ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def report_runs(url: str) -> list:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(url)
    experiment = client.get_experiment_by_name("gpubench-reports")
    return client.search_runs([experiment.experiment_id], order_by=["attributes.start_time"])


@pytest.mark.slow  # the server, a proxy, compare processes and a SIGKILL
def test_a_killed_compare_s_report_run_is_ended_killed_by_the_next_command(start_server, tmp_path):
    server = start_server()
    measured_runs(server.url)
    proxy = FaultProxy(server.port, b"/runs/update")  # the report run's end: held, never answered
    compare = start_compare(proxy.url, tmp_path / "first")
    assert proxy.reached.wait(300), compare.communicate()
    compare.send_signal(signal.SIGKILL)
    compare.wait()
    (killed,) = report_runs(server.url)
    assert killed.info.status == "RUNNING"  # a process killed outright ends nothing
    assert killed.data.tags["owner.pid"] == str(compare.pid)

    again = start_compare(server.url, tmp_path / "second")
    stdout, stderr = again.communicate(timeout=300)
    assert again.returncode == 0, stdout + stderr
    assert "ended 1 run(s) KILLED whose process had vanished: compare vs rtx3090" in stdout + stderr
    killed, second = report_runs(server.url)
    assert (killed.info.status, killed.data.tags["error"]) == ("KILLED", "owner process vanished")
    assert second.info.status == "FINISHED"


@pytest.mark.slow  # the server, a proxy and a compare process
def test_the_server_going_away_while_compare_tags_runs_is_one_line_and_exit_2(start_server, tmp_path):
    server = start_server()
    measured_runs(server.url)
    proxy = FaultProxy(server.port, b"/runs/set-tag")  # the anomaly tag on the a6000's run
    compare = start_compare(proxy.url, tmp_path / "out")
    assert proxy.reached.wait(300), compare.communicate()
    server.stop(signal.SIGKILL)
    proxy.cut()
    gone = time.monotonic()
    stdout, stderr = compare.communicate(timeout=300)
    assert compare.returncode == 2, stdout + stderr
    (line,) = stderr.strip().splitlines()  # no traceback
    assert line.startswith(f"error: tracking.uri='{proxy.url}': the tracking store cannot be reached ("), line
    assert time.monotonic() - gone < 30  # MLflow's own retries, not a minute of ours


def test_a_store_call_that_finds_the_server_gone_raises_one_line_naming_the_cause(monkeypatch, tracking_uri):
    import socket

    from mlflow.exceptions import MlflowException

    from src.errors import TrackingUnavailable
    from src.tracking import store

    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    with socket.socket() as closed:  # a port nothing listens on: the server has gone
        closed.bind(("127.0.0.1", 0))
        uri = f"http://127.0.0.1:{closed.getsockname()[1]}"
    client = store.client(uri)
    with pytest.raises(TrackingUnavailable) as gone:
        client.set_tag("0" * 32, "anomaly", "ci_not_met")
    assert (
        str(gone.value) == f"tracking.uri='{uri}': the tracking store cannot be reached (Connection refused)"
    )
    with pytest.raises(MlflowException, match="not found"):  # a call the store refuses: no outage
        store.client(tracking_uri).set_tag("0" * 32, "anomaly", "ci_not_met")
