"""A small store that exercises every output of compare: measured runs (repeats, one run with a
within-run interval only, 1 and 2 GPUs, a run that missed its stopping rule, one that shared its GPU,
strict fp32 against published TF32, two software stacks with and without a bridging run), ceilings
runs, published rows imported from two small tables, a torch pair for `by=torch` and a capacity pair
for `capacity_split=[h200@48,h200@24]`. Every run is written as the job and the importer write them;
the figures are fixed, so compare's outputs are too (tests/test_compare_golden.py holds them)."""

from __future__ import annotations

import time
from pathlib import Path

from mlflow.entities import Metric, Param, RunTag

from src.projection.counts import MATMUL, OTHER, Counted, OpCounts

EXPERIMENT = "gpubench"
S1 = {
    "torch_version": "2.11.0",
    "cuda_version": "12.8",
    "cudnn_version": "91000",
    "nccl_version": "2.27.3",
    "driver_version": "580.1",
}
S2 = S1 | {"torch_version": "2.12.0"}
NAMES = {"rtx3090": "NVIDIA GeForce RTX 3090", "a6000": "NVIDIA RTX A6000", "h200": "NVIDIA H200"}
# the spec sheet a measured run logs from its profile: peak TFLOP/s per key, GB/s, W, USD
SPECS = {
    "rtx3090": ({"fp32": 35.6, "tf32": 35.6, "fp16": 71.0, "bf16": 71.0}, 936.0, 350.0, 1500.0),
    "a6000": ({"fp32": 38.7, "tf32": 77.4, "fp16": 154.8, "bf16": 154.8}, 768.0, 300.0, 4650.0),
    "h200": ({"fp32": 67.0, "tf32": 494.0, "fp16": 989.0, "bf16": 989.0}, 4800.0, 700.0, None),
}
MEMORY = {"rtx3090": 24, "a6000": 48, "h200": 141}
PEAK_KEYS = {"fp32": "fp32", "tf32": "tf32", "amp": "fp16", "bf16": "bf16"}
CATEGORIES = {
    "resnet50": "vision",
    "ssd300": "vision",
    "txl_base": "language",
    "txl_large": "language",
    "gpt2": "language",
}
UNITS = {"vision": "images/s", "language": "tokens/s"}
SHARES = ("matmul", "other", "comm", "memcpy", "idle")
# every measured run's step, per sample: a product of 1e11 FLOPs over 1e8 bytes, other ops over 1e9 bytes
COUNTED = OpCounts.fit(
    *((b, [Counted("mm", MATMUL, "fp16", 1e11 * b, 1e8 * b), Counted("add", OTHER, "fp16", 0, 1e9 * b)]) for b in (2, 4)),
    "fixed",
)

# (gpu, count, model, precision, throughputs (one run each), stack, extra: tags/metrics/params)
MEASURED = [
    ("rtx3090", 1, "resnet50", "tf32", (500.0, 510.0, 490.0), S1, {}),
    ("a6000", 1, "resnet50", "tf32", (470.0, 480.0), S1, {}),
    ("a6000", 2, "resnet50", "tf32", (960.0,), S1, {}),
    ("rtx3090", 1, "txl_large", "amp", (10000.0,), S1, {}),
    ("a6000", 1, "txl_large", "amp", (14000.0,), S1, {}),
    ("rtx3090", 1, "ssd300", "amp", (200.0,), S1, {"stop_reason": "time_limit", "ci": 0.08}),
    ("a6000", 1, "ssd300", "amp", (210.0,), S1, {"gpu_foreign_processes": "pid 4242 python 2.0 GB"}),
    # two stacks: the a6000 on both (a bridge), the 3090 on the first only
    ("rtx3090", 1, "txl_base", "amp", (20000.0,), S1, {}),
    ("a6000", 1, "txl_base", "amp", (25000.0,), S1, {}),
    ("a6000", 1, "txl_base", "amp", (27000.0,), S2, {}),
    # two stacks, no bridge: the split names the runs that would make it
    ("rtx3090", 1, "gpt2", "bf16", (3000.0,), S1, {}),
    ("a6000", 1, "gpt2", "bf16", (3600.0,), S2, {}),
    # strict IEEE fp32 against the published 3090 "fp32" (TF32): math_differs
    ("a6000", 1, "txl_base", "fp32", (7000.0,), S1, {"tf32": False}),
    # by=torch: the 3090 on a newer torch
    ("rtx3090", 1, "resnet50", "tf32", (530.0,), S2, {}),
    # the capacity pair: one card under two memory caps, a batch per run
    ("h200", 1, "txl_large", "amp", (30000.0,), S1, {"cap": 24, "batch": 4}),
    ("h200", 1, "txl_large", "amp", (36000.0,), S1, {"cap": 24, "batch": 8}),
    ("h200", 1, "txl_large", "amp", (30600.0,), S1, {"cap": 48, "batch": 4}),
    ("h200", 1, "txl_large", "amp", (36500.0,), S1, {"cap": 48, "batch": 8}),
    ("h200", 1, "txl_large", "amp", (41000.0,), S1, {"cap": 48, "batch": 16}),
]
# gpu -> matmul ceilings (fp16, tf32, fp32) TFLOP/s and memory copy GB/s
CEILINGS = {
    "rtx3090": (68.0, 34.0, 31.0, 850.0),
    "a6000": (120.0, 62.0, 30.0, 690.0),
    "h200": (700.0, 350.0, 50.0, 4000.0),
}
# Lambda-format tables (name_gpu,num_gpu,watt,price,<task>...), imported as source=lambda
PUBLISHED = {
    "fp32": "name_gpu,num_gpu,watt,price,resnet50,ssd,transformerxlbase,transformerxllarge\n"
    "RTX 3090,1,350,1500,520,110,9000,3000\n"
    "RTX A6000,1,300,4650,480,105,12000,4100\n"
    "2x RTX 3090,2,700,3000,1000,0,17000,5800\n"
    "2x RTX A6000,2,600,9300,930,200,23000,8000\n",
    "amp": "name_gpu,num_gpu,watt,price,resnet50,ssd,transformerxlbase,transformerxllarge\n"
    "RTX 3090,1,350,1500,900,190,21000,9000\n"
    "RTX A6000,1,300,4650,930,200,26000,12500\n",
}
PUBLISHED_BATCHES = {"a6000": "32", "rtx3090": "8"}  # txl_large amp, 1 GPU


def _spec_params(gpu: str, precision: str, count: int) -> dict:
    peaks, bandwidth, tdp, price = SPECS[gpu]
    params = {f"gpu.peak_tflops.{key}": value for key, value in peaks.items()}
    return params | {
        "gpu.memory_bandwidth_gbs": bandwidth,
        "gpu.tdp_w": tdp,
        "gpu.price_usd": price,
        "gpu.count": count,
        "gpu.memory_gb": MEMORY[gpu],
        "precision.name": precision,
        "precision.peak_key": PEAK_KEYS[precision],
        "benchmark.min_steps": 50,
        "benchmark.target_ci": 0.01,
        "benchmark.compile": False,
        "benchmark.channels_last": False,
    }


def _log(client, run_id: str, metrics: dict, params: dict, tags: dict) -> None:
    now = int(time.time() * 1000)
    client.log_batch(
        run_id,
        metrics=[Metric(k, float(v), now, 0) for k, v in metrics.items()],
        params=[Param(k, str(v)) for k, v in params.items()],
        tags=[RunTag(k, str(v)) for k, v in tags.items()],
    )
    client.set_terminated(run_id, "FINISHED")


def _measured(client, experiment_id: str, n: int, gpu, count, model, precision, throughput, stack, extra):
    category = CATEGORIES[model]
    peak = SPECS[gpu][0][PEAK_KEYS[precision]]
    batch = extra.get("batch", 32)
    tags = {
        "gpu": gpu,
        "gpu_name": NAMES[gpu],
        "gpu_count": count,
        "nnodes": 1,
        "gpus_per_node": count,
        "model": model,
        "category": category,
        "precision": precision,
        "benchmark": "default",
        "host": "node1",
        "unit": UNITS[category],
        "stop_reason": extra.get("stop_reason", "ci"),
        "compile": False,
        "channels_last": False,
        "cudnn_benchmark": True,
        "power_limit_w": SPECS[gpu][2],
        "math_matmul_tf32": extra.get("tf32", precision == "tf32"),
        **stack,
    }
    if "gpu_foreign_processes" in extra:
        tags["gpu_foreign_processes"] = extra["gpu_foreign_processes"]
    achieved = throughput * 1e9 / count / 1e12 * (4 if category == "vision" else 0.5)
    metrics = {
        "throughput": throughput,
        "throughput_per_gpu": throughput / count,
        "step_time_ms": 1000.0 * batch * count / throughput,
        "step_time_ci95_rel": extra.get("ci", 0.004 + n / 1000),
        "measured_steps": 120,
        "batch_size": batch,
        "achieved_tflops_per_gpu": achieved,
        "mfu": achieved / peak,
        "power_mean_w": SPECS[gpu][2] * 0.9,
        "throughput_per_watt": throughput / (SPECS[gpu][2] * 0.9 * count),
    }
    shares = (0.6, 0.25, 0.05 if count > 1 else 0.0, 0.02, 0.08 if count == 1 else 0.03)
    metrics |= {f"breakdown_{s}_share": v for s, v in zip(SHARES, shares, strict=True)}
    params = _spec_params(gpu, precision, count) | {
        "model.name": model,
        "model.batch_size": batch,
        "batch_size": batch,
    }
    if "cap" in extra:
        params["gpu.memory_limit_gb"] = float(extra["cap"])
        tags["memory_limit_gb"] = float(extra["cap"])
    run = client.create_run(
        experiment_id, run_name=f"{gpu}x{count}-{model}-{precision}-{n}", tags={}, start_time=1_000_000 + n
    )
    client.log_text(run.info.run_id, COUNTED.dumps(), "op_counts.json")  # its step's ops, as a job counts them
    _log(client, run.info.run_id, metrics, params, tags)


def _ceilings(client, experiment_id: str, gpu: str, figures: tuple) -> None:
    fp16, tf32, fp32, copy = figures
    tags = {
        "gpu": gpu,
        "gpu_name": NAMES[gpu],
        "gpu_count": 1,
        "model": "ceilings",
        "category": "ceilings",
        "precision": "fp32",
        "benchmark": "default",
        "unit": "TFLOP/s",
        "stop_reason": "complete",
        "power_limit_w": SPECS[gpu][2],
        **S1,
    }
    metrics = {
        "ceiling_matmul_fp16_tflops": fp16,
        "ceiling_matmul_tf32_tflops": tf32,
        "ceiling_matmul_fp32_tflops": fp32,
        "ceiling_memory_copy_gbs": copy,
    }
    run = client.create_run(experiment_id, run_name=f"{gpu}x1-ceilings", tags={}, start_time=2_000_000)
    _log(client, run.info.run_id, metrics, {"model.name": "ceilings", "gpu.count": 1}, tags)


def build(uri: str, folder: Path) -> None:
    """Fill the store at `uri` (its tables made); the published tables are written into `folder`."""
    from mlflow.tracking import MlflowClient

    from src.published.__main__ import import_table
    from tests.conftest import compose_cfg

    client = MlflowClient(tracking_uri=uri)
    experiment_id = client.create_experiment(EXPERIMENT)
    for n, (gpu, count, model, precision, throughputs, stack, extra) in enumerate(MEASURED):
        for k, throughput in enumerate(throughputs):
            _measured(
                client, experiment_id, 10 * n + k, gpu, count, model, precision, throughput, stack, extra
            )
    for gpu, figures in CEILINGS.items():
        _ceilings(client, experiment_id, gpu, figures)
    for precision, table in PUBLISHED.items():
        path = folder / f"published-{precision}.csv"
        path.write_text(table)
        overrides = [f"file={path}", f"precision={precision}", "source=lambda", f"tracking.uri={uri}"]
        import_table(compose_cfg(overrides, config_name="import_results"), path)
    # the per-GPU batches a shipped generation's import tags its figures with
    for run in client.search_runs([client.get_experiment_by_name("gpubench-published").experiment_id]):
        tags = run.data.tags
        if (tags["model"], tags["precision"], tags["gpu_count"]) == ("txl_large", "amp", "1"):
            client.set_tag(run.info.run_id, "published_batch_size", PUBLISHED_BATCHES[tags["gpu"]])
