"""The real command line, end to end on the CPU: the one sweep the tests share, bad input, --help.
(Two ranks: the two-rank sweep of test_ceilings.py.)

Each job is a real job: a job process, torch's elastic agent and fresh rank processes. Starting
them is what costs time, so what needs the command line itself is checked on one sweep
(conftest's cli_sweep); a job called from the test process is conftest's run_job_here, and one
rank's loop is tested in-process in test_worker.py.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from src.hardware.telemetry import SERIES_POINTS
from src.paths import PROJECT_ROOT
from tests.conftest import cpu_hardware, run_cli

CPUX1 = cpu_hardware(1, threads=1)  # how this host names the sweep's jobs: 1 rank of 1 thread

NAMES = [f"{CPUX1}-resnet50-bf16-smoke", f"{CPUX1}-txl_base-bf16-smoke"]
NO_NVML = "NVML is not available (hidden by the test)"


def test_sweep_logs_parent_and_tagged_children(cli_sweep):
    parent, children = cli_sweep["parent"], cli_sweep["children"]
    assert parent.info.status == "FINISHED"
    assert [r.info.run_name for r in children] == NAMES
    for run in children:
        tags, metrics = run.data.tags, run.data.metrics
        assert run.info.status == "FINISHED"
        assert tags["mlflow.parentRunId"] == parent.info.run_id
        assert tags["gpu"] == "cpu" and tags["gpu_name"] == "cpu" and tags["gpu_count"] == "1"
        assert tags["category"] == {"resnet50": "vision", "txl_base": "language"}[tags["model"]]
        assert tags["unit"] == {"resnet50": "images/s", "txl_base": "tokens/s"}[tags["model"]]
        assert tags["precision"] == "bf16" and tags["host"] and tags["torch_version"]
        assert tags["cudnn_version"] and tags["nccl_version"]  # reported by the rank, not the job
        assert tags["cudnn_benchmark"] == "True" and tags["cudnn_benchmark_limit"] == "3"
        assert tags["math_autocast_dtype"] == "bfloat16"  # the math that ran, from the rank
        # the ranks' stopping rule reaches the run: smoke measures 2 steps, target_ci 0.5; a busy
        # host may take longer than time_limit_s over them, and the tag then says so
        assert tags["stop_reason"] == expected_stop_reason(run)
        assert run.data.params["model.name"] == tags["model"] and run.data.params["batch_size"] == "2"
        assert metrics["throughput"] > 0 and metrics["measured_steps"] == 2 and metrics["batch_size"] == 2
        # the UI's per-workload chart: one model, precision and GPU count per key
        assert metrics[f"throughput/{tags['model']}/bf16/x1"] == metrics["throughput"]
        # batch 2 x 1 image, or x 32 target tokens per segment (smoke tgt_len)
        assert metrics["items_per_step"] == {"resnet50": 2, "txl_base": 2 * 32}[tags["model"]]
        assert metrics["flops_per_item"] > 0
        assert metrics["step_time_p10_ms"] <= metrics["step_time_ms"] <= metrics["step_time_p90_ms"]
        assert metrics["loss_first"] > 0
    assert "Sweep summary" in cli_sweep["proc"].stdout


def expected_stop_reason(run) -> str:
    """The rule's first reason that holds for what the run logged (src/rank/worker.py): the CI
    met its target, else the window outlasted time_limit_s, else the steps ran out."""
    metrics, params = run.data.metrics, run.data.params
    if metrics["step_time_ci95_rel"] <= float(params["benchmark.target_ci"]):
        return "ci"
    if metrics["measured_window_s"] >= float(params["benchmark.time_limit_s"]):
        return "time_limit"
    return "max_steps"


def test_mlflow_creating_the_store_says_nothing(cli_sweep):
    """The sweep made its store from nothing: MLflow's INFO lines on creating and migrating it
    ("Creating initial MLflow database tables...") stay out of the console."""
    assert "INFO" not in cli_sweep["proc"].stdout + cli_sweep["proc"].stderr


def test_the_job_process_never_imports_torch(cli_sweep):
    """The ranks train with torch; the job process (sweep, jobs, MLflow, telemetry) never loads it."""
    assert "torch loaded in the job process: False" in cli_sweep["proc"].stdout


def test_a_host_without_nvml_gets_one_notice_and_cpu_figures(cli_sweep):
    output = cli_sweep["proc"].stdout + cli_sweep["proc"].stderr
    assert output.count(NO_NVML) == 1  # once for the whole sweep, not per job or per sample
    client = MlflowClient(cli_sweep["uri"])
    for run in cli_sweep["children"]:
        metrics = run.data.metrics
        # the host's series over the whole job; its window figures need a sample inside a window of a
        # fraction of a second, which a starved host may not take (telemetry.summarize's own tests)
        assert client.get_metric_history(run.info.run_id, "telemetry/host/cpu_util_pct")
        assert metrics.get("cpu_util_mean_pct", 0) >= 0 and metrics.get("host_mem_used_max_gb", 1) > 0
        assert "power_mean_w" not in metrics and "energy_per_item_j" not in metrics
    run = cli_sweep["children"][0]
    path = client.download_artifacts(run.info.run_id, "telemetry.csv", str(cli_sweep["tmp"]))
    rows = list(csv.DictReader(io.StringIO(Path(path).read_text())))
    assert rows and {r["device"] for r in rows} == {"host"}
    history = client.get_metric_history(run.info.run_id, "telemetry/host/host_mem_used_gb")
    assert 0 < len(history) <= min(len(rows), SERIES_POINTS)  # every sample, or averaged down


def test_the_ranks_run_with_the_users_nccl_settings_and_the_run_records_them(cli_sweep):
    """gpubench adds no NCCL, NVSHMEM or symmetric-memory variable: what the rank saw is the user's."""
    from src.hardware.environment import communication_settings

    client = MlflowClient(cli_sweep["uri"])
    run = cli_sweep["children"][0]
    recorded = json.loads(
        Path(client.download_artifacts(run.info.run_id, "environment.json", str(cli_sweep["tmp"]))).read_text()
    )
    assert recorded["communication"] == communication_settings(cli_sweep["env"])
    assert recorded["communication"]["NCCL_ALGO"] == "Ring"


@pytest.mark.parametrize(
    "args,messages",
    [
        (  # every bad value at once, found while the config is finalised
            ["gpu=cpu", "model.batch_size=0", "precision=amp"],
            ["model.batch_size=0: must be a positive integer", "must be one of fp32, bf16 on gpu=cpu"],
        ),
        (["gpu=a6000"], ["gpu=a6000 needs 1 x RTX A6000; this host has"]),  # found by the job
    ],
)
def test_bad_input_exits_2_before_touching_the_store(tmp_path, args, messages):
    proc = run_cli(args, tmp_path, f"sqlite:///{tmp_path}/store/mlflow.db", timeout=180)
    assert proc.returncode == 2
    assert all(message in proc.stderr for message in messages), proc.stderr[-3000:]
    assert not (tmp_path / "store").exists()  # no store, no half run


def test_help_says_what_the_tool_is_and_shows_the_study(tmp_path):
    proc = run_cli(["--help"], tmp_path, f"sqlite:///{tmp_path}/mlflow.db", timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("gpubench: GPU training throughput")
    assert "python -m src.train -m gpu=a6000,rtx3090 precision=fp32,amp" in proc.stdout
    assert "model: bert_large, ceilings, gpt2, llama" in proc.stdout  # Hydra's group listing stays
    assert "powered by Hydra" not in proc.stdout
    # the groups of the README's table, and none of the internal ones (no page explains them)
    listed = {line.split(":")[0] for line in proc.stdout.splitlines() if ": " in line}
    assert {"benchmark", "gpu", "launcher", "model", "precision", "telemetry", "tracking"} <= listed
    assert not {"model/family", "sizes/smoke"} & listed
    experiments = sorted(p.stem for p in (PROJECT_ROOT / "conf" / "experiment").glob("*.yaml"))
    assert f"experiment: {', '.join(experiments)}" in proc.stdout  # every experiment, from conf/ itself
