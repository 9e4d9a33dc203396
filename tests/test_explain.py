"""Compare explains: each point against its card's ceilings run, its step-time breakdown and a sentence
per model pair, from runs made in a temp MLflow store."""

from __future__ import annotations

import csv

import pytest

from tests.conftest import store_copy
from tests.test_compare import run

EXPERIMENT = "gpubench"
VERSIONS = {"torch": "2.11.0", "cuda": "13.0", "cudnn": "91000", "nccl": "2.27.3", "driver": "580.1"}
STACK = {f"{name}_version": version for name, version in VERSIONS.items()}  # the tags a job logs
NAMES = {"a6000": "NVIDIA RTX A6000", "rtx3090": "NVIDIA GeForce RTX 3090", "h100": "NVIDIA H100 80GB HBM3"}
# gpu -> (fp16 ceiling, tf32, fp32, memory copy GB/s)
CEILINGS = {"a6000": (120.0, 62.0, 30.0, 690.0), "rtx3090": (68.0, 34.0, 31.0, 850.0)}
# (gpu, model, category, precision, throughput, achieved TFLOP/s per GPU, mfu, breakdown shares)
WORKLOADS = [
    ("rtx3090", "resnet50", "vision", "amp", 1000.0, 24.0, 0.34, (0.55, 0.35, 0.0, 0.02, 0.08)),
    ("a6000", "resnet50", "vision", "amp", 1200.0, 28.8, 0.19, (0.45, 0.45, 0.0, 0.02, 0.08)),
    ("rtx3090", "txl_large", "language", "amp", 10000.0, 34.0, 0.48, (0.62, 0.30, 0.0, 0.01, 0.07)),
    ("a6000", "txl_large", "language", "amp", 15000.0, 51.0, 0.33, (0.70, 0.25, 0.0, 0.01, 0.04)),
    ("h100", "resnet50", "vision", "amp", 3000.0, 72.0, 0.09, (0.40, 0.50, 0.0, 0.02, 0.08)),
]
# telemetry: (gpu, model) -> share of the window at the power limit, mean power W, mean SM clock MHz
POWER = {
    ("rtx3090", "resnet50"): (0.9, 340.0, 1695.0),
    ("a6000", "resnet50"): (1.0, 298.0, 1455.0),
    ("rtx3090", "txl_large"): (0.0, 250.0, 1860.0),
    ("a6000", "txl_large"): (0.6, 296.0, 1500.0),
}
LIMITS = {"rtx3090": "350", "a6000": "300"}  # power_limit_w
# Lambda-like published category means at x1, mixed: vision 1.1x, language 1.3x
PUBLISHED = [
    ("rtx3090", "resnet50", "vision", 1000.0),
    ("a6000", "resnet50", "vision", 1100.0),
    ("rtx3090", "txl_large", "language", 10000.0),
    ("a6000", "txl_large", "language", 13000.0),
]


def _run(client, experiment_id, gpu, model, category, precision, tags=None, start=None):
    point = dict(
        gpu=gpu, gpu_name=NAMES[gpu], gpu_count="1", model=model, category=category, precision=precision
    )
    tags = point | STACK | (tags or {})
    run = client.create_run(
        experiment_id, run_name=f"{gpu}x1-{model}-{precision}", tags=tags, start_time=start
    )
    return run.info.run_id


def _ceilings(client, experiment_id, gpu, figures, start, tags=None):
    fp16, tf32, fp32, copy = figures
    run_id = _run(client, experiment_id, gpu, "ceilings", "ceilings", "fp32", tags, start)
    metrics = {
        "ceiling_matmul_fp16_tflops": fp16,
        "ceiling_matmul_tf32_tflops": tf32,
        "ceiling_matmul_fp32_tflops": fp32,
        "ceiling_memory_copy_gbs": copy,
    }
    for key, value in metrics.items():
        client.log_metric(run_id, key, value)
    client.set_terminated(run_id, "FINISHED")
    return run_id


@pytest.fixture(scope="module")
def store(tmp_path_factory, empty_store):
    from mlflow.tracking import MlflowClient

    uri = store_copy(empty_store, tmp_path_factory.mktemp("explain"))
    client = MlflowClient(tracking_uri=uri)
    experiment_id = client.create_experiment(EXPERIMENT)
    ids = {}
    for gpu, figures in CEILINGS.items():
        # an older run of the same stack and a newer one of another torch: neither is the match
        _ceilings(client, experiment_id, gpu, tuple(f / 2 for f in figures), start=1_000)
        ids[gpu] = _ceilings(client, experiment_id, gpu, figures, start=2_000)
        _ceilings(
            client, experiment_id, gpu, tuple(f * 3 for f in figures), 3_000, {"torch_version": "2.12.0"}
        )
    for gpu, model, category, precision, throughput, achieved, mfu, shares in WORKLOADS:
        limit = {"power_limit_w": LIMITS[gpu]} if gpu in LIMITS else {}
        run_id = _run(client, experiment_id, gpu, model, category, precision, {"unit": "items/s", **limit})
        client.log_param(run_id, "precision.peak_key", "fp16")
        metrics = {"throughput": throughput, "achieved_tflops_per_gpu": achieved, "mfu": mfu}
        if (gpu, model) in POWER:
            metrics |= dict(
                zip(
                    ("throttled_power_share", "power_mean_w", "sm_clock_mean_mhz"),
                    POWER[gpu, model],
                    strict=True,
                )
            )
        metrics |= {
            f"breakdown_{s}_share": v
            for s, v in zip(("matmul", "other", "comm", "memcpy", "idle"), shares, strict=True)
        }
        for key, value in metrics.items():
            client.log_metric(run_id, key, value)
        client.set_terminated(run_id, "FINISHED")
    published = client.create_experiment("gpubench-published")
    for gpu, model, category, throughput in PUBLISHED:
        run_id = _run(client, published, gpu, model, category, "amp", {"source": "lambda", "unit": "items/s"})
        client.log_metric(run_id, "throughput", throughput)
        client.set_terminated(run_id, "FINISHED")
    return uri, ids


@pytest.fixture(scope="module")
def compared(store, tmp_path_factory):
    uri, ids = store
    out = tmp_path_factory.mktemp("out")
    run(uri, out, "baseline=rtx3090")
    return out, ids


def _rows(out):
    with open(out / "explain.csv") as f:
        return {(r["gpu"], r["model"]): r for r in csv.DictReader(f)}


def test_each_point_is_held_against_the_latest_ceilings_run_of_its_card_and_stack(compared):
    out, ids = compared
    rows = _rows(out)
    a6000 = rows[("a6000", "txl_large")]
    assert a6000["ceilings_run"] == ids["a6000"]
    assert float(a6000["share_of_ceiling"]) == pytest.approx(51.0 / 120.0)
    assert float(a6000["ceiling_tflops"]) == pytest.approx(120.0) and a6000["ceiling_math"] == "fp16"
    assert float(rows[("rtx3090", "resnet50")]["share_of_ceiling"]) == pytest.approx(24.0 / 68.0)
    assert float(a6000["matmul_share"]) == pytest.approx(0.70)
    h100 = rows[("h100", "resnet50")]
    assert not h100["share_of_ceiling"] and "no ceilings run of NVIDIA H100" in h100["note"]
    with open(out / "relative_throughput.csv") as f:
        assert "ceilings" not in {r["model"] for r in csv.DictReader(f)}  # no throughput: not a workload


def test_the_report_says_what_each_ratio_is_made_of(compared):
    out, _ = compared
    text = (out / "report.md").read_text()
    # 1.50x = (120 / 68) x ((51 / 120) / (34 / 68))
    assert "txl_large amp x1, a6000 vs rtx3090 1.50x" in text
    assert "Of the 1.50x, 1.76x is the cards' fp16 ceilings and 0.85x how much of them each run used" in text
    assert (
        "a6000 reaches 42% of its measured fp16 ceiling (120 TFLOP/s), with 70% of its step in matmul/conv"
        in text
    )
    assert "memory copy bandwidths differ 0.81x" in text
    assert "Published means against yours" not in text  # the study's section holds the published figures


def test_a_run_at_its_cards_power_limit_says_so_and_a_ratio_between_two_such_runs_too(compared):
    out, _ = compared
    text = " ".join((out / "report.md").read_text().split())
    resnet = next(line for line in text.split("- ") if line.startswith("resnet50 amp x1, a6000 vs rtx3090"))
    assert "rtx3090 reaches" in resnet and (
        "at its 350 W power limit for 90% of the window (340 W mean, SM clock 1,695 MHz)" in resnet
    )
    assert "at its 300 W power limit for 100% of the window" in resnet
    assert "Both ran at their power limits: a ratio between power-limited cards." in resnet
    txl = next(line for line in text.split("- ") if line.startswith("txl_large amp x1, a6000 vs rtx3090"))
    assert "Only a6000 ran at its power limit." in txl and "350 W" not in txl
    h100 = next(line for line in text.split("- ") if line.startswith("resnet50 amp x1, h100 vs rtx3090"))
    assert "rtx3090 ran at its power limit; h100's runs logged no power telemetry." in h100
    rows = _rows(out)
    assert rows[("rtx3090", "txl_large")]["power_limited"] == "False"
    assert rows[("a6000", "txl_large")]["power_limited"] == "True"
    assert float(rows[("a6000", "txl_large")]["throttled_power_share"]) == pytest.approx(0.6)
    assert rows[("h100", "resnet50")]["power_limited"] == ""  # no telemetry: nothing said


def test_a_power_limited_run_against_a_published_figure_says_the_other_sides_power_is_not_known(
    store, tmp_path
):
    """Against Lambda's rows (baseline_source=lambda) no pair has two placed sides; the ratio of a
    run held at its power limit to a figure without telemetry is still said to be one."""
    uri, _ = store
    run(uri, tmp_path / "out", "baseline=rtx3090", "baseline_source=lambda")
    text = " ".join((tmp_path / "out" / "report.md").read_text().split())
    assert (
        "resnet50 amp x1, a6000 vs rtx3090 1.20x: a6000 at its 300 W power limit for 100% of the window "
        "(298 W mean, SM clock 1,455 MHz); rtx3090's figure is published (lambda) and carries no power "
        "telemetry: a power-limited run set against a figure whose power is not known." in text
    )
    assert "txl_large amp x1, a6000 vs rtx3090 1.50x: a6000 at its 300 W power limit for 60%" in text
    assert "h100 vs rtx3090" not in text.split("Points against their ceilings")[0]  # no telemetry: nothing


def test_the_chart_shows_each_points_step_time_and_its_share_of_its_ceiling_inside_the_panel(
    store, tmp_path, drawn
):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.container import BarContainer

    uri, _ = store
    run(uri, tmp_path / "out", "baseline=rtx3090", "charts=true", "tag_runs=false")
    [fig] = [f for f in drawn if f.texts[0].get_text().startswith("Where each point's step time goes")]
    (ax,) = fig.axes
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == [
        "a6000 x1 resnet50 amp",
        "h100 x1 resnet50 amp",
        "rtx3090 x1 resnet50 amp",
        "a6000 x1 txl_large amp",
        "rtx3090 x1 txl_large amp",
    ]
    shares = {c.get_label(): [p.get_width() for p in c] for c in ax.containers if isinstance(c, BarContainer)}
    assert shares["matmul"] == pytest.approx([0.45, 0.40, 0.55, 0.70, 0.62])
    said = [t.get_text() for t in ax.texts]
    assert said[0] == "28.8 TFLOP/s, 24% of its fp16 ceiling" and said[1] == "72 TFLOP/s, no measured ceiling"
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw_without_rendering()
    panel = ax.get_window_extent(renderer)
    assert all(
        panel.x0 <= t.get_window_extent(renderer).x0 and t.get_window_extent(renderer).x1 <= panel.x1
        for t in ax.texts
    )
    assert (tmp_path / "out" / "ceilings_and_step_time.png").read_bytes()[:4] == b"\x89PNG"
