"""model=ceilings: an ordinary job measuring the card (src/rank/ceiling_probes.py measures in each
rank, src/run/ceiling_figures.py combines and logs)."""

from __future__ import annotations

import csv
import json
import math

import pytest
import torch
from omegaconf import OmegaConf

from src.config.finalise import finalize
from src.hardware import environment
from src.projection.counts import OpCounts
from src.rank.ceiling_probes import bus_bandwidth_factor, figure
from src.rank.matmul import best_matmul, grid
from src.rank.worker import train_rank
from src.results import run_result
from src.run.resume import config_hash
from tests.conftest import compose_cfg, cpu_hardware, read_runs, run_cli

CPUX2 = cpu_hardware(2)  # how this host names a CPU job of 2 rank(s)

CEILINGS = ["gpu=cpu", "benchmark=smoke", "model=ceilings"]


def test_bus_bandwidth_is_nccl_tests_factor_of_the_algorithm_bandwidth():
    assert bus_bandwidth_factor(2) == 1.0
    assert bus_bandwidth_factor(8) == 1.75
    # 1 GB in 10 ms on 8 ranks: algbw 100 GB/s, busbw 175 GB/s
    assert figure([0.01, 0.01], 1e9 * bus_bandwidth_factor(8), 1e9)["value"] == pytest.approx(175.0)


def test_one_ceilings_point_per_gpu_and_count_whatever_the_precision_and_breakdown():
    ceilings = {config_hash(finalize(compose_cfg([*CEILINGS, f"precision={p}"]))) for p in ("fp32", "bf16")}
    assert len(ceilings) == 1
    gpt2 = {
        config_hash(finalize(compose_cfg(["gpu=cpu", "model=gpt2", f"precision={p}"])))
        for p in ("fp32", "bf16")
    }
    assert len(gpt2) == 2
    steps = {
        config_hash(finalize(compose_cfg(["gpu=cpu", f"benchmark.breakdown_steps={n}"]))) for n in (0, 5)
    }
    assert len(steps) == 1  # profiled after the window: the same measurement


@pytest.mark.usefixtures("one_thread")
def test_a_ceilings_rank_measures_every_math_of_the_cpu_and_its_memory():
    cfg = OmegaConf.to_container(finalize(compose_cfg(CEILINGS)), resolve=True)
    [report] = train_rank(cfg | {"runtime": {"device": "cpu", "cpu_threads": 1}})
    figures = report.figures
    assert set(figures) == {"matmul_fp32_tflops", "matmul_bf16_tflops", "memory_copy_gbs", "memory_read_gbs"}
    for found in figures.values():
        assert found["value"] > 0 and 3 <= found["samples"] <= 5 and math.isfinite(found["ci95_rel"])
    matmul = figures["matmul_fp32_tflops"]
    assert [tuple(shape[:3]) for shape in matmul["screen"]] == grid([64, 128])
    assert matmul["shape"] in {"x".join(map(str, shape[:3])) for shape in matmul["screen"]}


def test_the_grid_holds_every_shape_non_square_too_fewest_flops_first():
    shapes = grid([128, 64])
    assert len(shapes) == 8 and shapes[0] == (64, 64, 64) and shapes[-1] == (128, 128, 128)
    assert {(64, 64, 128), (64, 128, 64), (128, 64, 64)} == set(shapes[1:4])


def test_shapes_whose_call_would_outlast_max_call_s_are_skipped_and_counted():
    cfg = OmegaConf.to_container(finalize(compose_cfg([*CEILINGS, "model.max_call_s=1e-9"])), resolve=True)
    found = best_matmul("fp32", cfg["model"], torch.device("cpu"))
    assert found["shape"] == "64x64x64" and found["skipped"] == 7 and len(found["screen"]) == 1


@pytest.mark.parametrize(("target", "samples"), [(1e-12, 5), (10.0, 3)])
def test_the_best_shape_is_sampled_until_its_spread_meets_the_target_or_max_samples(target, samples):
    """benchmark=smoke: 3 samples, at most 5."""
    cfg = OmegaConf.to_container(
        finalize(compose_cfg([*CEILINGS, f"model.target_spread={target}"])), resolve=True
    )
    assert best_matmul("bf16", cfg["model"], torch.device("cpu"))["samples"] == samples


@pytest.mark.slow  # a real CLI scenario (processes, a store): CI's slow set (README)
def test_two_cpu_ranks_log_all_reduce_bus_bandwidth_and_a_workloads_global_throughput_and_breakdown(
    tmp_path, tracking_uri, monkeypatch
):
    """One two-rank sweep, since each job's processes cost seconds to start: the card's ceilings
    job and a workload's. The user's NCCL settings reach the ranks as they are."""
    for name in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "nccl.conf").write_text("NCCL_PROTO=Simple\n")
    monkeypatch.setenv("NCCL_CONF_FILE", str(tmp_path / "nccl.conf"))
    monkeypatch.setenv("NCCL_ALGO", "Ring")
    args = ["-m", "gpu=cpu", "gpu.count=2", "benchmark=smoke", "model=ceilings,gpt2"]
    result = run_cli(args, tmp_path, tracking_uri)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    runs = {r.info.run_name: r for r in read_runs(tracking_uri) if r.data.tags.get("sweep") != "true"}
    ceilings = runs[f"{CPUX2}-ceilings-fp32-smoke"]
    assert ceilings.info.status == "FINISHED" and "throughput" not in ceilings.data.metrics
    metrics = ceilings.data.metrics
    assert metrics["ceiling_allreduce_busbw_gbs"] == max(
        metrics["ceiling_allreduce_busbw_gbs_0p25mb"], metrics["ceiling_allreduce_busbw_gbs_1mb"]
    )
    assert metrics["ceiling_matmul_fp32_tflops"] > 0 and "ceiling_matmul_fp32_tflops_ci95_rel" in metrics
    assert {metrics[f"ceiling_matmul_fp32_{dim}"] for dim in "mnk"} <= {64, 128}  # the best shape
    figures = run_result.read(ceilings).ceilings.metrics()  # every ceiling_ metric is a typed figure's
    assert {k: metrics[k] for k in figures} == figures == {k: v for k, v in metrics.items() if k.startswith("ceiling_")}
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    table = client.download_artifacts(ceilings.info.run_id, "ceilings.csv", str(tmp_path))
    with open(table) as f:
        rows = list(csv.DictReader(f))
    assert {r["rank"] for r in rows} == {"0", "1"}
    screen = client.download_artifacts(ceilings.info.run_id, "matmul_screen.csv", str(tmp_path))
    with open(screen) as f:
        screened = [r for r in csv.DictReader(f) if r["figure"] == "matmul_fp32_tflops"]
    assert len(screened) == 2 * 8 and all(float(r["tflops"]) > 0 for r in screened)  # 8 shapes, 2 ranks
    assert f"done {CPUX2}-ceilings-fp32-smoke: fp32 " in result.stdout
    for run in runs.values():  # what the ranks saw is the user's: nothing added, nothing lost
        recorded = client.download_artifacts(
            run.info.run_id, "environment.json", str(tmp_path / run.info.run_id)
        )
        communication = json.loads(open(recorded).read())["communication"]
        assert communication == environment.communication_settings()
        assert {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple"}.items() <= communication.items()
        assert "nccl_settings" not in run.data.tags  # CPU ranks talk through gloo, not NCCL

    gpt2 = runs[f"{CPUX2}-gpt2-fp32-smoke"].data.metrics
    assert runs[f"{CPUX2}-gpt2-fp32-smoke"].data.tags["gpu_count"] == "2"
    assert runs[f"{CPUX2}-gpt2-fp32-smoke"].data.tags["math_autocast_dtype"] == "none"  # fp32: no autocast
    assert gpt2["items_per_step"] == 2 * 2 * 32  # two ranks x smoke batch 2 x seq_len 32
    assert gpt2["throughput"] == pytest.approx(2 * gpt2["throughput_per_gpu"])
    shares = [gpt2[f"breakdown_{c}_share"] for c in ("matmul", "other", "comm", "memcpy", "idle")]
    assert sum(shares) == pytest.approx(1.0) and gpt2["breakdown_comm_share"] > 0  # gloo's all-reduce
    assert gpt2["breakdown_steps"] == 1 and gpt2["breakdown_s"] > 0
    assert {"breakdown_start_s", "breakdown_stop_s", "breakdown_parse_s"} <= set(gpt2)
    assert 0 < gpt2["breakdown_steps_s"] <= gpt2["breakdown_s"]  # the profiled step, within the cost
    kernels = client.download_artifacts(
        runs[f"{CPUX2}-gpt2-fp32-smoke"].info.run_id, "top_kernels.csv", str(tmp_path)
    )
    assert open(kernels).readline().strip() == "kernel,category,calls,total_ms,share_of_span"
    counted = client.download_artifacts(runs[f"{CPUX2}-gpt2-fp32-smoke"].info.run_id, "op_counts.json", str(tmp_path))
    assert OpCounts.from_json(json.loads(open(counted).read())).batches == (2, 4)  # its step's ops, counted

    # bf16's ceilings point is the run fp32's measured (one point whatever the precision): the
    # summary names its row bf16, and says which run did it
    again = run_cli([*args[:-1], "model=ceilings", "precision=bf16"], tmp_path / "again", tracking_uri)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    summary = " ".join(again.stdout[again.stdout.index("Sweep summary") :].split())
    assert f"{CPUX2}-ceilings-bf16-smoke SKIPPED" in summary and f"{CPUX2}-ceilings-fp32-smoke" not in summary
