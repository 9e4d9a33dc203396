"""The real command line, end to end on the CPU: sweeps, two ranks, a failing job, bad input."""

import pytest

from tests.conftest import read_runs, run_cli


def _children(runs):
    return [r for r in runs if r.data.tags.get("sweep") != "true"]


def test_sweep_logs_parent_and_tagged_children(tmp_path, tracking_uri):
    proc = run_cli(
        ["-m", "gpu=cpu", "model=resnet50,gpt2", "precision=fp32,bf16", "benchmark=smoke"],
        tmp_path,
        tracking_uri,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = read_runs(tracking_uri)
    parents = [r for r in runs if r.data.tags.get("sweep") == "true"]
    children = _children(runs)
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert sorted(r.info.run_name for r in children) == [
        "cpux1-gpt2-bf16",
        "cpux1-gpt2-fp32",
        "cpux1-resnet50-bf16",
        "cpux1-resnet50-fp32",
    ]
    for run in children:
        tags, metrics = run.data.tags, run.data.metrics
        assert run.info.status == "FINISHED"
        assert tags["mlflow.parentRunId"] == parents[0].info.run_id
        assert tags["gpu"] == "cpu" and tags["gpu_name"] == "cpu" and tags["gpu_count"] == "1"
        assert tags["category"] == {"resnet50": "vision", "gpt2": "language"}[tags["model"]]
        assert tags["precision"] in ("fp32", "bf16") and tags["host"] and tags["torch_version"]
        assert tags["cudnn_version"] and tags["nccl_version"]  # reported by the rank, not the job
        assert tags["cudnn_benchmark"] == "True"
        assert tags["stop_reason"] in ("ci", "max_steps")  # smoke: 2 steps, target_ci 0.5
        assert tags["math_autocast_dtype"] == {"fp32": "none", "bf16": "bfloat16"}[tags["precision"]]
        assert run.data.params["model.name"] == tags["model"]
        assert metrics["throughput"] > 0 and metrics["measured_steps"] == 2
        assert metrics["step_time_p10_ms"] <= metrics["step_time_ms"] <= metrics["step_time_p90_ms"]
        assert metrics["loss_first"] > 0
    assert "Sweep summary" in proc.stdout


def test_two_cpu_ranks_report_global_throughput(tmp_path, tracking_uri):
    proc = run_cli(["gpu=cpu", "gpu.count=2", "model=gpt2", "benchmark=smoke"], tmp_path, tracking_uri)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = read_runs(tracking_uri)
    m = run.data.metrics
    assert run.info.run_name == "cpux2-gpt2-fp32" and run.data.tags["gpu_count"] == "2"
    assert run.data.tags["stop_reason"] in ("ci", "max_steps")  # both ranks agreed on one reason
    assert m["items_per_step"] == 2 * 2 * 32  # two ranks x smoke batch 2 x seq_len 32
    assert m["throughput"] == pytest.approx(2 * m["throughput_per_gpu"])


@pytest.mark.parametrize(
    "args,message",
    [
        (["gpu=cpu", "model.batch_size=0"], "model.batch_size=0: must be a positive integer"),
        (["gpu=a6000"], "gpu=a6000 needs 1 x RTX A6000; this host has"),
        (["gpu=cpu", "precision=amp"], "must be one of fp32, bf16 on gpu=cpu"),
    ],
)
def test_bad_input_exits_before_any_run(tmp_path, tracking_uri, args, message):
    proc = run_cli(args, tmp_path, tracking_uri, timeout=60)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert read_runs(tracking_uri) == []


def test_unknown_option_lists_the_options(tmp_path, tracking_uri):
    proc = run_cli(["model=nope"], tmp_path, tracking_uri, timeout=60)
    assert proc.returncode != 0
    assert "model/nope" in proc.stderr and "resnet50" in proc.stderr


def test_time_limit_stops_a_job_before_min_steps(tmp_path, tracking_uri):
    args = [
        "gpu=cpu",
        "model=gpt2",
        "benchmark=smoke",
        "benchmark.min_steps=100000",
        "benchmark.max_steps=100000",
    ]
    proc = run_cli([*args, "benchmark.time_limit_s=2", "benchmark.target_ci=1e-9"], tmp_path, tracking_uri)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = read_runs(tracking_uri)
    steps = run.data.metrics["measured_steps"]
    assert 2 <= steps < 100000
    assert run.data.metrics["measured_window_s"] < 30  # the limit, not the step count, ended it
    # a figure that missed its stopping rule says so, in the run and on its result line
    assert run.data.tags["stop_reason"] == "time_limit"
    assert "stopped at time_limit before target_ci: CI +/-" in " ".join(proc.stdout.split())


def test_help_says_what_the_tool_is_and_shows_the_study(tmp_path, tracking_uri):
    proc = run_cli(["--help"], tmp_path, tracking_uri, timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("gpubench: GPU training throughput")
    assert "python -m src.train -m gpu=a6000,rtx3090 precision=fp32,amp" in proc.stdout
    assert "model: bert_large, gpt2, llama" in proc.stdout  # Hydra's group listing stays
    assert "powered by Hydra" not in proc.stdout
