"""The software stack in compare: the stack is part of a point, like math against like math, an interval on
every figure, compare by=KEY, and the hardware/software split, on runs made in a temp store."""

from __future__ import annotations

import math

import pytest
from test_compare import read_csv, row
from test_compare import run as compare

from src.compare.runs import CompareError
from src.errors import ConfigError
from src.results.stats import t95
from tests.conftest import store_copy

OLD = {"torch_version": "2.13.0", "cuda_version": "12.8"}
NEW = {"torch_version": "2.14.1", "cuda_version": "12.8"}


def make(
    client, experiment_id, gpu, model, precision, throughput, tags=None, ci=0.01, steps=100, category="vision"
):
    point = dict(gpu=gpu, gpu_count="1", model=model, category=category, precision=precision, unit="images/s")
    tags = point | (tags or {})
    run = client.create_run(experiment_id, run_name=f"{gpu}-{model}-{precision}", tags=tags)
    client.log_metric(run.info.run_id, "throughput", throughput)
    if tags.get("source") is None:  # a measured run logs its step-time CI
        client.log_metric(run.info.run_id, "step_time_ci95_rel", ci)
        client.log_metric(run.info.run_id, "measured_steps", steps)
    client.set_terminated(run.info.run_id, "FINISHED")
    return run.info.run_id


@pytest.fixture(scope="module")
def store(tmp_path_factory, empty_store) -> str:
    from mlflow.tracking import MlflowClient

    uri = store_copy(empty_store, tmp_path_factory.mktemp("stacks"))
    client = MlflowClient(tracking_uri=uri)
    e = client.create_experiment("gpubench")
    # rtx3090 on the old torch only; a6000 on both: one old run, three repeats on the new torch
    make(client, e, "rtx3090", "resnet50", "tf32", 500.0, OLD)
    make(client, e, "a6000", "resnet50", "tf32", 450.0, OLD)
    for throughput in (540.0, 550.0, 560.0):
        make(client, e, "a6000", "resnet50", "tf32", throughput, NEW)
    # ssd300: a6000 only on the new torch, no bridge run: the split must name the missing runs
    make(client, e, "rtx3090", "ssd300", "tf32", 100.0, OLD)
    make(client, e, "a6000", "ssd300", "tf32", 110.0, NEW, ci=0.2, steps=20)
    # strict fp32 on the a6000 against the published 3090 "fp32", which ran TF32
    make(client, e, "a6000", "txl_base", "fp32", 700.0, OLD, category="language")
    published = {"source": "lambda", "math_matmul_tf32": "True"}
    make(client, e, "rtx3090", "txl_base", "fp32", 1000.0, published, category="language")
    make(client, e, "rtx3090", "txl_large", "fp32", 400.0, published, category="language")
    make(client, e, "a6000", "txl_large", "tf32", 420.0, OLD, category="language")
    # another program on the GPU during a run
    make(
        client,
        e,
        "a6000",
        "maskrcnn",
        "tf32",
        30.0,
        OLD | {"gpu_foreign_processes": "pid 7 python (gpu0, 0.50 GB) in the window"},
    )
    make(client, e, "rtx3090", "maskrcnn", "tf32", 30.0, OLD)
    return uri


@pytest.fixture(scope="module")
def result(store, tmp_path_factory):
    return compare(store, tmp_path_factory.mktemp("out"), "baseline=rtx3090")


def test_runs_of_two_stacks_are_two_points_labelled_by_what_differs(result):
    rel = read_csv(result.out / "relative_throughput.csv")
    old = row(rel, gpu="a6000", model="resnet50", variant="torch=2.13.0")
    new = row(rel, gpu="a6000", model="resnet50", variant="torch=2.14.1")
    assert (old["n_runs"], float(old["throughput"])) == ("1", 450.0)  # not pooled into a median of four
    assert (new["n_runs"], float(new["throughput"])) == ("3", 550.0)


def test_a_ratio_takes_the_same_stack_else_it_is_flagged_with_what_differs(result):
    rel = read_csv(result.out / "relative_throughput.csv")
    old = row(rel, gpu="a6000", model="resnet50", variant="torch=2.13.0")
    assert float(old["relative"]) == pytest.approx(0.9) and old["flags"] == ""
    new = row(rel, gpu="a6000", model="resnet50", variant="torch=2.14.1")
    assert float(new["relative"]) == pytest.approx(1.1)
    assert new["flags"] == "stack_differs" and new["stack_differs"] == "torch 2.14.1 vs 2.13.0"
    ssd = row(rel, gpu="a6000", model="ssd300")
    assert ssd["flags"] == "stack_differs"
    report = (result.out / "report.md").read_text()
    assert "stack_differs" in report and "torch 2.14.1 vs 2.13.0" in report


def test_strict_fp32_against_published_tf32_is_flagged_and_left_out_of_the_means(result):
    rel = read_csv(result.out / "relative_throughput.csv")
    strict = row(rel, gpu="a6000", model="txl_base", precision="fp32")
    assert strict["flags"] == "math_differs" and strict["baseline_source"] == "lambda"
    like = row(rel, gpu="a6000", model="txl_large", precision="tf32")
    assert like["flags"] == "" and like["baseline_precision"] == "fp32"  # lambda's fp32 is TF32: alike
    summary = read_csv(result.out / "summary.csv")
    language = [s for s in summary if s["category"] == "language" and s["gpu"] == "a6000"]
    assert [(s["precision"], s["models"]) for s in language] == [("tf32", "txl_large")]
    assert "math_differs" in (result.out / "report.md").read_text()


def test_every_ratio_and_mean_carries_its_interval(result):
    rel = read_csv(result.out / "relative_throughput.csv")
    new = row(rel, gpu="a6000", model="resnet50", variant="torch=2.14.1")
    # repeats 540, 550, 560 (n=3) against one run whose step-time CI is +-1% over 100 steps
    logs = [math.log(t) for t in (540, 550, 560)]
    se_a = (sum((x - sum(logs) / 3) ** 2 for x in logs) / 2) ** 0.5 / 3**0.5
    se_b = 0.01 / t95(99)
    se = math.hypot(se_a, se_b)
    dof = se**4 / (se_a**4 / 2 + se_b**4 / 99)
    half = t95(math.floor(dof)) * se
    assert float(new["relative_low"]) == pytest.approx(1.1 * math.exp(-half), rel=1e-4)
    assert float(new["relative_high"]) == pytest.approx(1.1 * math.exp(half), rel=1e-4)
    assert new["interval"] == "repeats+within-run only"
    published = row(rel, gpu="a6000", model="txl_large")
    assert published["interval"] == "within-run only (published side: no spread)"
    assert row(rel, gpu="rtx3090", model="txl_large")["interval"] == "none: published figures have no spread"
    for s in read_csv(result.out / "summary.csv"):
        if s["gpu"] == "a6000":
            assert float(s["relative_mean_low"]) < float(s["relative_mean"]) < float(s["relative_mean_high"])


def test_a_ratio_whose_interval_holds_one_is_no_measurable_difference(result):
    rel = read_csv(result.out / "relative_throughput.csv")
    ssd = row(rel, gpu="a6000", model="ssd300")  # 1.1x, but the a6000 run's CI is +-20%
    assert float(ssd["relative_low"]) < 1 < float(ssd["relative_high"])
    assert ssd["difference"] == "no measurable difference"
    old = row(rel, gpu="a6000", model="resnet50", variant="torch=2.13.0")  # 0.9x with +-1% on each side
    assert old["difference"] == ""


def test_another_program_on_the_gpu_is_flagged_gpu_shared(result):
    flagged = [a for a in read_csv(result.out / "anomalies.csv") if a["kind"] == "gpu_shared"]
    assert [(a["gpu"], a["model"]) for a in flagged] == [("a6000", "maskrcnn")]
    assert "pid 7 python" in flagged[0]["detail"]


def test_compare_by_torch_sets_one_version_against_the_oldest_on_the_same_gpu(store, tmp_path):
    result = compare(store, tmp_path, "by=torch")
    rel = read_csv(result.out / "relative_throughput.csv")
    new = row(rel, gpu="torch=2.14.1", model="resnet50", variant="gpu=a6000")
    assert (
        float(new["relative"]) == pytest.approx(550 / 450, rel=1e-5) and new["baseline_gpu"] == "torch=2.13.0"
    )
    assert new["flags"] == ""  # only torch differs
    assert not [r for r in rel if r["source"] == "lambda"]  # published rows log no stack
    report = (result.out / "report.md").read_text()
    assert report.startswith("# Training throughput relative to torch=2.13.0")
    with pytest.raises(
        CompareError, match=r"baseline=2.12: not one value of by=torch; values found: 2.13.0, 2.14.1"
    ):
        compare(store, tmp_path / "x", "by=torch", "baseline=2.12")


def test_by_a_key_with_one_value_says_so(store, tmp_path):
    with pytest.raises(
        CompareError, match=r"^by=cuda: only one value \(12.8\) among the runs the filters keep"
    ):
        compare(store, tmp_path, "by=cuda")


def test_an_unknown_baseline_source_is_named_with_the_known_ones(store, tmp_path):
    with pytest.raises(
        ConfigError, match=r"^baseline_source=lambda2: unknown source; .* have lambda, measured$"
    ):
        compare(store, tmp_path, "baseline_source=lambda2")


def test_a_cross_stack_gpu_ratio_is_split_into_hardware_and_software(result):
    split = read_csv(result.out / "hardware_software.csv")
    resnet = row(split, model="resnet50 [torch=2.14.1]")
    assert float(resnet["hardware"]) == pytest.approx(0.9, rel=1e-5)  # a6000 on the 3090's stack / the 3090
    assert float(resnet["software"]) == pytest.approx(550 / 450, rel=1e-5)  # a6000 new torch / old torch
    assert float(resnet["hardware"]) * float(resnet["software"]) == pytest.approx(
        float(resnet["relative"]), rel=1e-5
    )
    ssd = row(split, model="ssd300")
    assert ssd["hardware"] == "" and "run a6000 ssd300 tf32 x1 on" in ssd["missing"]
    assert "torch=2.13.0" in ssd["missing"] and "or rtx3090 on" in ssd["missing"]
