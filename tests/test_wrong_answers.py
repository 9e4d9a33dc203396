"""Answers that must never come out wrong without a word: compare's outputs (its CSVs, report.md, the
console, the runs' `anomaly` tags) when a question is overridden, a setting or card differs between
the two sides of a ratio, or a check did not run.

Runs are made directly in a temp MLflow store as a job or an import logs them; published baselines
go in through src.published.
"""

from __future__ import annotations

import re

import pytest
from mlflow.entities import Metric, Param
from mlflow.tracking import MlflowClient

from src.compare.runs import CompareError
from src.published.__main__ import import_generation, import_table, profile_spec
from tests.conftest import store_copy
from tests.test_compare import read_csv, run
from tests.test_import_results import import_cfg

EXPERIMENT = "gpubench"
TF32_MATH = {"math_matmul_tf32": "True", "math_cudnn_tf32": "True", "math_autocast_dtype": "none"}


def measured_run(
    client: MlflowClient, gpu: str, model: str, throughput: float, tags=None, params=None
) -> str:
    """A FINISHED tf32 run of one GPU (like math to published fp32), its spec sheet logged from its
    profile as a job logs it."""
    experiment = client.get_experiment_by_name(EXPERIMENT)
    experiment_id = experiment.experiment_id if experiment else client.create_experiment(EXPERIMENT)
    category = "vision" if model in ("resnet50", "ssd300", "maskrcnn") else "language"
    point = {"gpu": gpu, "gpu_count": "1", "model": model, "category": category, "precision": "tf32"}
    tags = point | {"unit": "images/s"} | TF32_MATH | (tags or {})
    run_id = client.create_run(experiment_id, run_name=f"{gpu}x1-{model}-tf32", tags=tags).info.run_id
    params = profile_spec(gpu, "tf32") | {"model.name": model} | (params or {})
    client.log_batch(
        run_id,
        metrics=[Metric("throughput", throughput, 0, 0)],
        params=[Param(k, str(v)) for k, v in params.items()],
    )
    client.set_terminated(run_id, "FINISHED")
    return run_id


def row(rows: list[dict], **match) -> dict:
    found = [r for r in rows if all(r[k] == str(v) for k, v in match.items())]
    assert len(found) == 1, (match, found)
    return found[0]


@pytest.fixture(scope="module")
def study_store(tmp_path_factory, empty_store) -> str:
    """Lambda's 2021 one-GPU figures of the study's pair, imported as the study command imports them."""
    uri = store_copy(empty_store, tmp_path_factory.mktemp("study") / "mlruns")
    cfg = import_cfg("source=lambda-2021", f"tracking.uri={uri}")
    import_generation(cfg, "lambda-2021", lambda r: r.gpu in ("a6000", "rtx3090") and r.gpu_count == 1)
    return uri


@pytest.mark.parametrize("override", ["baseline=a6000", "models=[resnet50]"])
def test_a_study_under_an_override_states_no_finding_of_the_publication(
    study_store, tmp_path, capsys, override
):
    """The study's stated figures are the a6000's mean over rtx3090 of all its models: with another
    baseline or fewer models the comparison is not the publication's, so no line may say that the
    publication's data contradicts it. Refused in one line naming the key is an answer too."""
    try:
        run(study_store, tmp_path, "study=lambda_a6000_vs_3090", override)
    except ValueError as refused:
        (line,) = str(refused).strip().splitlines()
        assert override.split("=")[0] in line
        return
    said = " ".join(capsys.readouterr().out.split()) + " ".join((tmp_path / "report.md").read_text().split())
    assert "publication states" not in said
    if override == "baseline=a6000":
        assert "a6000 over rtx3090" not in said


def test_a_measured_point_at_other_model_sizes_is_not_set_silently_against_a_published_baseline(
    tmp_path, tracking_uri
):
    table = tmp_path / "lambda.csv"
    table.write_text("name_gpu,num_gpu,watt,price,resnet50,ssd\nRTX 3090,1,350,2750,513,137\n")
    import_table(
        import_cfg("precision=fp32", "source=lambda", f"file={table}", f"tracking.uri={tracking_uri}"), table
    )
    sizes = {"model.image_size": 160, "model.batch_size": 64, "batch_size": 64}
    measured_run(MlflowClient(tracking_uri), "a6000", "resnet50", 960.0, params=sizes)
    # a like point beside it: with no ratio to give at all, compare stops, saying there is nothing to compare
    measured_run(MlflowClient(tracking_uri), "a6000", "ssd300", 135.0, params={"model.image_size": 300})
    run(tracking_uri, tmp_path / "out", "baseline=rtx3090")
    a6000 = row(read_csv(tmp_path / "out" / "relative_throughput.csv"), gpu="a6000", model="resnet50")
    assert a6000["relative"] == "" or a6000["flags"], a6000  # no ratio, or one flagged with what differs


def test_nothing_to_compare_names_the_settings_that_keep_a_like_point_apart(tmp_path, tracking_uri):
    table = tmp_path / "lambda.csv"
    table.write_text("name_gpu,num_gpu,watt,price,resnet50\nRTX 3090,1,350,2750,513\n")
    import_table(
        import_cfg("precision=fp32", "source=lambda", f"file={table}", f"tracking.uri={tracking_uri}"), table
    )
    measured_run(MlflowClient(tracking_uri), "a6000", "resnet50", 960.0, params={"model.image_size": 32})
    with pytest.raises(CompareError, match=r"a6000 resnet50 x1 tf32 \(image_size 32 vs 224\)$"):
        run(tracking_uri, tmp_path / "out", "baseline=rtx3090")


def test_a_gpu_whose_only_ratios_set_strict_fp32_against_tf32_is_not_said_to_have_none(tmp_path, tracking_uri):
    table = tmp_path / "lambda.csv"
    table.write_text("name_gpu,num_gpu,watt,price,resnet50\nRTX 3090,1,350,2750,513\n")
    import_table(
        import_cfg("precision=fp32", "source=lambda", f"file={table}", f"tracking.uri={tracking_uri}"), table
    )
    strict = {"precision": "fp32", "math_matmul_tf32": "False", "math_cudnn_tf32": "False"}
    measured_run(MlflowClient(tracking_uri), "a6000", "resnet50", 960.0, tags=strict)
    run(tracking_uri, tmp_path / "out", "baseline=rtx3090", "gpus=[rtx3090,a6000]")
    said = (tmp_path / "out" / "report.md").read_text()
    assert "gpus: a6000 has runs, but its ratios to baseline=rtx3090 set strict IEEE fp32 against TF32" in said
    a6000 = row(read_csv(tmp_path / "out" / "relative_throughput.csv"), gpu="a6000", model="resnet50")
    assert a6000["flags"] == "math_differs" and float(a6000["relative"]) == pytest.approx(960 / 513, rel=1e-4)


def test_a_category_mean_counts_each_model_once(tmp_path, tracking_uri):
    client = MlflowClient(tracking_uri)
    for compiled, a6000, rtx3090 in (("False", 450.0, 500.0), ("True", 600.0, 400.0)):
        for gpu, throughput in (("a6000", a6000), ("rtx3090", rtx3090)):
            measured_run(
                client, gpu, "resnet50", throughput, {"compile": compiled}, {"benchmark.compile": compiled}
            )
    measured_run(client, "a6000", "ssd300", 110.0)
    measured_run(client, "rtx3090", "ssd300", 100.0)
    run(tracking_uri, tmp_path / "out", "baseline=rtx3090")
    means = [
        r
        for r in read_csv(tmp_path / "out" / "summary.csv")
        if r["gpu"] == "a6000" and r["category"] == "vision"
    ]
    assert means
    for mean in means:
        assert mean["models"].count("resnet50") <= 1, mean
        assert mean["n_models"] == str(len(set(re.findall(r"resnet50|ssd300", mean["models"])))), mean


@pytest.mark.parametrize(
    "card, differs",
    [
        ({48: {"power_limit_w": "700"}, 24: {"power_limit_w": "450"}}, (r"\b700\b", r"\b450\b")),
        ({48: {"gpu_name": "NVIDIA H200"}, 24: {"gpu_name": "NVIDIA H200 NVL"}}, (r"H200 NVL",)),
    ],
    ids=["power_limit", "card_variant"],
)
def test_the_capacity_split_says_when_its_two_caps_ran_on_unlike_cards(tmp_path, tracking_uri, card, differs):
    client = MlflowClient(tracking_uri)
    for cap, batch, throughput in ((24, 4, 1000.0), (48, 4, 1100.0), (48, 16, 1650.0)):
        params = {"gpu.memory_limit_gb": f"{cap:.1f}", "batch_size": batch, "model.batch_size": batch}
        measured_run(
            client, "h200", "txl_large", throughput, card[cap] | {"memory_limit_gb": str(cap)}, params
        )
    run(tracking_uri, tmp_path / "out", "capacity_split=[h200@48,h200@24]")
    split = row(read_csv(tmp_path / "out" / "capacity_split.csv"), model="txl_large")
    assert any(all(re.search(p, str(cell)) for p in differs) for cell in split.values()), split


def test_an_anomaly_is_cleared_only_by_the_check_that_made_it(tmp_path, tracking_uri):
    client = MlflowClient(tracking_uri)
    # tf32 spec range of h200 over rtx3090: 4.1-17.4x (bandwidth, compute, 25% beyond); over a6000: 5.0-8.0x
    h200 = measured_run(client, "h200", "resnet50", 300.0)  # 3.0x rtx3090: outside; 6.0x a6000: inside
    measured_run(client, "rtx3090", "resnet50", 100.0)
    measured_run(client, "a6000", "resnet50", 50.0)
    run(tracking_uri, tmp_path / "first", "baseline=rtx3090")
    flagged = client.get_run(h200).data.tags.get("anomaly", "")
    assert "outside_spec" in flagged and "rtx3090" in flagged
    run(tracking_uri, tmp_path / "second", "baseline=a6000", "gpu_counts=[1]")  # no check against rtx3090
    assert client.get_run(h200).data.tags.get("anomaly", "") == flagged


def test_published_figures_imported_without_their_sizes_compare_as_before_until_an_import_adds_them(
    tmp_path, tracking_uri, monkeypatch
):
    """A store imported before the importer logged a figure's model sizes: its figures stand for their
    model at any sizes (a ratio, as before); the next import of the source adds the sizes, and from then
    a measured point at other sizes gets no ratio against them."""
    import src.published.__main__

    table = tmp_path / "lambda.csv"
    table.write_text("name_gpu,num_gpu,watt,price,resnet50,ssd\nRTX 3090,1,350,2750,513,137\n")
    cfg = import_cfg("precision=fp32", "source=lambda", f"file={table}", f"tracking.uri={tracking_uri}")
    with monkeypatch.context() as before:
        before.setattr(src.published.__main__, "model_sizes", lambda model: {})
        import_table(cfg, table)
    client = MlflowClient(tracking_uri)
    measured_run(client, "a6000", "resnet50", 960.0, params={"model.image_size": 160})
    measured_run(client, "a6000", "ssd300", 135.0, params={"model.image_size": 300})
    run(tracking_uri, tmp_path / "first", "baseline=rtx3090")
    first = row(read_csv(tmp_path / "first" / "relative_throughput.csv"), gpu="a6000", model="resnet50")
    assert float(first["relative"]) == pytest.approx(960 / 513, rel=1e-5)  # nothing says its sizes differ

    assert import_table(cfg, table).repairs.lines("lambda") == [
        "added the model's sizes to 2 figure(s) of source=lambda imported before they were logged: "
        "compare now sets them only against points of those sizes"
    ]
    run(tracking_uri, tmp_path / "second", "baseline=rtx3090")
    rows = read_csv(tmp_path / "second" / "relative_throughput.csv")
    assert row(rows, gpu="a6000", model="resnet50")["relative"] == ""  # image_size 160 against 224
    assert float(row(rows, gpu="a6000", model="ssd300")["relative"]) == pytest.approx(135 / 137, rel=1e-5)


def test_a_subnormal_figure_imported_before_the_importer_refused_them_is_no_figure(tmp_path, tracking_uri):
    """5e-324 images/s is no throughput: counted, it would pull the a6000's mean to about half."""
    client = MlflowClient(tracking_uri)
    published = {"source": "lambda"}
    for gpu, resnet50, ssd300 in (("rtx3090", 100.0, 100.0), ("a6000", 5e-324, 110.0)):
        resnet50_run = measured_run(client, gpu, "resnet50", resnet50, published)
        measured_run(client, gpu, "ssd300", ssd300, published)
    assert client.get_run(resnet50_run).data.metrics["throughput"] == 5e-324  # the store keeps it as is
    run(tracking_uri, tmp_path / "out", "baseline=rtx3090")
    mean = row(read_csv(tmp_path / "out" / "summary.csv"), gpu="a6000", category="vision")
    assert (mean["models"], float(mean["relative_mean"])) == ("ssd300", pytest.approx(1.1))
    assert mean["models_left_out"] == "resnet50 (no a6000 run)"
