"""compare project=[...]: projected points beside measured ones, never pooled with them, refusals
with the run to make, and a source at its power limit said so by the same threshold as the
explanation's, from runs made in a temp store."""

from __future__ import annotations

import contextlib
import csv
import io

import pytest

from src.projection.counts import MATMUL, OTHER, Counted, OpCounts
from tests.conftest import store_copy
from tests.test_compare import run
from tests.test_explain import STACK

NAMES = {"h200": "NVIDIA H200", "h100": "NVIDIA H100 80GB HBM3", "rtx3090": "NVIDIA GeForce RTX 3090"}
SHARES = {"matmul": 0.3, "other": 0.6, "comm": 0.0, "memcpy": 0.05, "idle": 0.05}
FLOPS, BATCH, THROUGHPUT, CEILING = 2.45e10, 256, 6000.0, 660.0


def _run(client, experiment_id, gpu, model, metrics, params=None, category="vision", counted=False):
    point = dict(gpu=gpu, gpu_name=NAMES[gpu], gpu_count="1", model=model, category=category, precision="amp")
    tags = point | {"unit": "images/s"} | STACK
    run_id = client.create_run(experiment_id, tags=tags).info.run_id
    for key, value in {"precision.peak_key": "fp16", **(params or {})}.items():
        client.log_param(run_id, key, value)
    for key, value in metrics.items():
        client.log_metric(run_id, key, value)
    if counted:
        client.log_text(run_id, COUNTED.dumps(), "op_counts.json")
    client.set_terminated(run_id, "FINISHED")
    return run_id


# per image: one product of FLOPS over 1e7 bytes, one other op over 1e8 bytes (counted at batches 2 and 4)
COUNTED = OpCounts.fit(
    *(
        (
            b,
            [
                Counted("convolution", MATMUL, "fp16", FLOPS * b, 1e7 * b),
                Counted("add", OTHER, "fp16", 0, 1e8 * b),
            ],
        )
        for b in (2, 4)
    ),
    "by hand",
)


def _workload(shares=SHARES, throughput=THROUGHPUT) -> dict:
    found = {"throughput": throughput, "flops_per_item": FLOPS, "batch_size": BATCH, "peak_memory_gb": 20.0}
    return found | {f"breakdown_{s}_share": v for s, v in (shares or {}).items()}


@pytest.fixture(scope="module")
def compared(tmp_path_factory, empty_store):
    from mlflow.tracking import MlflowClient

    folder = tmp_path_factory.mktemp("projection")
    uri = store_copy(empty_store, folder)
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("gpubench")
    ceilings = _run(client, experiment, "h200", "ceilings", {"ceiling_matmul_fp16_tflops": CEILING})
    client.set_tag(ceilings, "job_kind", "ceilings")
    # at its power limit for exactly half of its window: "at its power limit" by one threshold
    at_limit = _workload() | {"throttled_power_share": 0.5}
    ids = {
        "h200": _run(
            client, experiment, "h200", "resnet50", at_limit, {"batch_size": str(BATCH)}, counted=True
        ),
        "no_breakdown": _run(
            client, experiment, "h200", "txl_large", _workload(shares=None), category="language"
        ),
        "no_ceilings": _run(client, experiment, "h100", "resnet50", _workload()),
        "rtx3090": _run(client, experiment, "rtx3090", "resnet50", {"throughput": 900.0, "batch_size": 224}),
    }
    out, said = folder / "out", io.StringIO()
    with contextlib.redirect_stdout(said):
        run(uri, out, "baseline=rtx3090", "project=[a6000,rtx3090]", "tracking.published_experiment=")
    return out, ids, said.getvalue(), client


def _expected(card: str, batch: int) -> float:
    """The h200 point on a card at its profile's batch, by the model's arithmetic (tests/test_projection.py
    checks each factor). The h200 runs fp16 at its published 759.4 TFLOP/s (its ceilings run's 660
    comes after its profile's figures); its memory at its spec 4,800 GB/s (its ceilings run logged
    none); SMs x clock: 132 x 1,980 x 790.29 / 989.5."""
    rate, bandwidth, issue = {
        "a6000": (120.49, 768, 84 * 1800 * 123.34 / 154.8),
        "rtx3090": (75.48, 936, 82 * 1695 * 76.58 / 71),
    }[card]
    step = BATCH / THROUGHPUT
    matmul, other = SHARES["matmul"] * step, (SHARES["other"] + SHARES["memcpy"]) * step
    tensor, memory = FLOPS * BATCH / 759.4e12, 1e8 * BATCH / 4800e9  # both below the measured time
    grown = batch / BATCH
    there = (
        tensor * 759.4 / rate
        + memory * 4800 / bandwidth
        + (matmul - tensor + other - memory) * 132 * 1980 * 790.29 / 989.5 / issue
    ) * grown + SHARES["idle"] * step
    return THROUGHPUT * grown * step / there


def test_projected_points_stand_beside_measured_ones_and_never_pool(compared):
    out, ids, _, _ = compared
    with open(out / "relative_throughput.csv") as f:
        rows = {(r["gpu"], r["model"], r["source"]): r for r in csv.DictReader(f)}
    measured, projected = (
        rows[("rtx3090", "resnet50", "measured")],
        rows[("rtx3090", "resnet50", "projected")],
    )
    assert (measured["n_runs"], float(measured["throughput"])) == ("1", 900.0)
    assert float(projected["throughput"]) == pytest.approx(_expected("rtx3090", 448), rel=1e-4)
    a6000 = rows[("a6000", "resnet50", "projected")]
    assert float(a6000["throughput"]) == pytest.approx(_expected("a6000", 928), rel=1e-4)
    # the projected a6000 is divided by the projected 3090: its own source's baseline
    assert float(a6000["relative"]) == pytest.approx(
        _expected("a6000", 928) / _expected("rtx3090", 448), rel=1e-3
    )
    assert ids["h200"] in a6000["run_ids"]  # the runs it was made from
    with open(out / "projection.csv") as f:
        made = {(r["gpu"], r["model"]): r for r in csv.DictReader(f)}
    assert set(made) == {("a6000", "resnet50"), ("rtx3090", "resnet50")}
    assert made[("a6000", "resnet50")]["from_runs"] == ids["h200"]


def test_a_point_without_its_breakdown_or_ceilings_is_refused_with_the_run_to_make(compared):
    out, _, said, client = compared
    text = (out / "report.md").read_text()
    for line in (
        "h200 x1 txl_large amp [batch 256]: no step-time breakdown; measure it with one: "
        "python -m src.train gpu=h200 model=txl_large precision=amp gpu.count=1 model.batch_size=256",
        "h100 x1 resnet50 amp [batch 256]: no ceilings run of its card, count and software; run: "
        "python -m src.train model=ceilings gpu=h100 gpu.count=1",
    ):
        assert f"- {line}" in text and line not in said
    assert "a6000 over rtx3090, resnet50 amp x1 (projected from h200):" in text
    # on the console, one line for them all, and where each is said
    assert " ".join(said.split()).count("projection: 2 point(s) not projected") == 1
    reports = client.get_experiment_by_name("gpubench-reports").experiment_id
    assert not client.search_runs([reports], "tags.job_kind = 'projection'")  # projection.csv holds them


def test_a_point_at_its_power_limit_for_half_its_window_is_said_so_by_the_explanation_and_the_projection(
    compared,
):
    """One threshold: at exactly half of the window, both call the point power-limited."""
    out, _, _, _ = compared
    with open(out / "explain.csv") as f:
        [h200] = [r for r in csv.DictReader(f) if (r["gpu"], r["model"]) == ("h200", "resnet50")]
    assert (float(h200["throttled_power_share"]), h200["power_limited"]) == (0.5, "True")
    text = " ".join((out / "report.md").read_text().split())
    assert "h200 ran at its power limit in 50% of the window" in text  # the projection's sentence


def test_a_card_without_a_profile_is_refused_before_anything_is_read(tmp_path, tracking_uri):
    from src.errors import ConfigError

    with pytest.raises(
        ConfigError, match=r"project=\['a6000', 'rtx9999'\]: 'rtx9999' is not a gpu profile; one of"
    ):
        run(tracking_uri, tmp_path / "out", "project=[a6000,rtx9999]")
    assert not (tmp_path / "out").exists()


def test_a_store_without_a_point_to_project_projects_the_points_shipped_with_gpubench(tmp_path, empty_store):
    """A store whose only point was never counted (a run from before runs counted their ops): it is
    refused with the run to make, and the study's H200 points shipped under reference/measured/ stand in."""
    from mlflow.tracking import MlflowClient

    uri = store_copy(empty_store, tmp_path)
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("gpubench")
    client.set_tag(
        _run(client, experiment, "h200", "ceilings", {"ceiling_matmul_fp16_tflops": CEILING}),
        "job_kind",
        "ceilings",
    )
    _run(client, experiment, "h200", "resnet50", _workload(), {"batch_size": str(BATCH)})
    said = io.StringIO()
    with contextlib.redirect_stdout(said), contextlib.redirect_stderr(said):
        run(
            uri,
            tmp_path / "out",
            "baseline=rtx3090",
            "project=[a6000,rtx3090]",
            "tracking.published_experiment=",
        )
    with open(tmp_path / "out" / "projection.csv") as f:
        made = {(r["gpu"], r["model"], r["precision"]): r for r in csv.DictReader(f)}
    report = " ".join((tmp_path / "out" / "report.md").read_text().split())
    models = ("ssd300", "resnet50", "maskrcnn", "txl_base", "txl_large")
    assert set(made) == {(g, m, p) for g in ("a6000", "rtx3090") for m in models for p in ("tf32", "amp")}
    # each card from the shipped point measured at its profile's batch: the H100's at 16 and at 4
    assert (
        made[("a6000", "txl_large", "tf32")]["from_runs"],
        made[("rtx3090", "txl_large", "tf32")]["from_runs"],
    ) == (
        "h100-profile-batches-2026-12-05/h100x1-txl_large-tf32-b16",
        "h100-profile-batches-2026-12-05/h100x1-txl_large-tf32-b4",
    )
    assert (
        made[("a6000", "txl_large", "tf32")]["batch"],
        made[("rtx3090", "txl_large", "tf32")]["batch"],
    ) == ("16", "4")
    # the A6000's Mask R-CNN amp is the H200's point (the H100 ran 16 only), the 3090's the H100's: one pair
    assert "- a6000 over rtx3090, maskrcnn amp x1 (projected from h100):" in report
    assert "x from a6000's own point (h200's, at batch 32) = " in report
    assert "a6000 over h200" not in report
    # each projected at a batch its source ran, the H200's point set aside: said as that, not as counted ops
    console = " ".join(said.getvalue().split())
    several = [key for key, row in made.items() if "the nearer card" in row["note"]]
    assert {model for _, model, _ in several} == {"ssd300", "resnet50", "maskrcnn"}  # both cards ran them
    assert f"{len(several)} from the nearest of several cards' points" in console
    assert "at a batch their source did not run" not in console
    text = " ".join((tmp_path / "out" / "report.md").read_text().split())
    assert (
        "- h200 x1 resnet50 amp [batch 256]: its step's ops were not counted (runs count them from now on); "
        "measure it again: python -m src.train gpu=h200 model=resnet50 precision=amp gpu.count=1 "
        "model.batch_size=256"
    ) in text
    assert "From the points shipped with gpubench (reference/measured)" in text
    assert (
        " ".join(said.getvalue().split()).count(
            "projection: from the points shipped with gpubench (reference/measured)"
        )
        == 1
    )


def test_a_projection_that_projects_nothing_says_why_with_the_run_to_make(tmp_path, empty_store):
    """An empty store, and the cards asked for are those the shipped points ran on: nothing to show."""
    from src.compare.runs import CompareError

    with pytest.raises(CompareError) as said:
        run(
            store_copy(empty_store, tmp_path),
            tmp_path / "out",
            "project=[h100,h200]",
            "tracking.published_experiment=",
        )
    assert str(said.value) == (
        "project=['h100', 'h200']: nothing projected: no measured point of a card other than h100, h200 that the "
        "filters keep; "
        "measure one: python -m src.train gpu=<a card you have> model=<model> precision=<precision>, and its "
        "ceilings: python -m src.train gpu=<that card> model=ceilings"
    )


def test_a_projection_that_projects_nothing_names_every_refused_point_in_its_one_line(tmp_path, empty_store):
    """A compare that fails writes no report.md: the error line itself names each point not projected."""
    from mlflow.tracking import MlflowClient

    from src.compare.runs import CompareError

    uri = store_copy(empty_store, tmp_path)
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("gpubench")
    _run(client, experiment, "rtx3090", "resnet50", _workload())  # no ceilings run of its card
    _run(client, experiment, "rtx3090", "txl_large", _workload(), category="language")

    with pytest.raises(CompareError) as said:
        run(
            uri,
            tmp_path / "out",
            "project=[h100,h200]",  # the shipped points' cards: none of them stands in
            "gpus=[h200]",
            "baseline=h200",
            "tracking.published_experiment=",
        )

    line = str(said.value)
    assert "\n" not in line and "report.md" not in line and not (tmp_path / "out").exists()
    assert "rtx3090 x1 resnet50" in line and "rtx3090 x1 txl_large" in line


def test_reading_a_runs_counted_ops_draws_no_progress_bar(tmp_path, empty_store, capfd):
    """MLflow draws a bar on stderr for every artifact it downloads: one per projected point, in the
    console and in a piped log, between compare's own lines."""
    from mlflow.tracking import MlflowClient

    from src.compare.projection import stored_counts

    uri = store_copy(empty_store, tmp_path)
    client = MlflowClient(tracking_uri=uri)
    run_id = _run(client, client.create_experiment("gpubench"), "h200", "resnet50", _workload(), counted=True)

    assert stored_counts(uri)(run_id) == COUNTED
    assert capfd.readouterr().err == ""
