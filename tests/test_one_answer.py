"""One question, one answer: a gpu's figures against the baseline depend only on the runs of the
two (and the filters), never on which other gpus the store holds; a model left out of a mean is
named, with why."""

from __future__ import annotations

import pytest

from tests.conftest import store_copy
from tests.test_compare import make_run, run

PAIR = {  # (model, category): (a6000, rtx3090) images/s or tokens/s, 1 GPU fp32
    ("ssd300", "vision"): (135.0, 137.0),
    ("resnet50", "vision"): (437.0, 471.0),
    ("maskrcnn", "vision"): (12.0, 14.0),
    ("txl_base", "language"): (13880.0, 11772.0),
    ("txl_large", "language"): (6114.0, 4062.0),
}
SOURCE = {"source": "lambda-2021"}


@pytest.fixture
def client_and_store(tmp_path, empty_store):
    from mlflow.tracking import MlflowClient

    uri = store_copy(empty_store, tmp_path / "mlruns")
    client = MlflowClient(tracking_uri=uri)
    return client, client.create_experiment("gpubench"), uri


def means(result) -> dict[tuple, tuple]:
    return {
        (s["gpu"], s["category"]): (
            s["relative_mean"].value,
            s["relative_mean"].interval,
            s["models"],
            s["models_left_out"],
        )
        for s in result.summary
        if s["gpu"] == "a6000"
    }


def test_an_unrelated_gpus_runs_move_nothing_of_the_pair(client_and_store, tmp_path):
    client, experiment, uri = client_and_store
    for (model, category), (a6000, rtx3090) in PAIR.items():
        make_run(client, experiment, "a6000", 1, model, category, "fp32", a6000, SOURCE)
        make_run(client, experiment, "rtx3090", 1, model, category, "fp32", rtx3090, SOURCE)
    before = means(run(uri, tmp_path / "before"))
    assert before[("a6000", "vision")][0] == pytest.approx((135 / 137 + 437 / 471 + 12 / 14) / 3)
    # an H100 with two of the five models (as Lambda's H100 systems lack Transformer-XL large)
    make_run(client, experiment, "h100", 1, "resnet50", "vision", "fp32", 1750.0, SOURCE)
    make_run(client, experiment, "h100", 1, "txl_base", "language", "fp32", 40000.0, SOURCE)
    after = run(uri, tmp_path / "after", "all=true")  # the h100 in scope too
    assert any(s["gpu"] == "h100" for s in after.summary)
    assert means(after) == before


def test_a_model_the_gpu_lacks_is_named_where_its_mean_is_shown(client_and_store, tmp_path, capsys):
    client, experiment, uri = client_and_store
    for (model, category), (a6000, rtx3090) in PAIR.items():
        if model != "maskrcnn":
            make_run(client, experiment, "a6000", 1, model, category, "fp32", a6000, SOURCE)
        make_run(client, experiment, "rtx3090", 1, model, category, "fp32", rtx3090, SOURCE)
    result = run(uri, tmp_path / "out")
    vision = next(s for s in result.summary if (s["gpu"], s["category"]) == ("a6000", "vision"))
    assert (vision["models"], vision["models_left_out"]) == ("resnet50 ssd300", "maskrcnn (no a6000 run)")
    assert (
        "a6000 [lambda-2021]: left out of vision fp32 x1: maskrcnn (no a6000 run)" in capsys.readouterr().out
    )
    assert "maskrcnn (no a6000 run)" in (result.out / "report.md").read_text()
    language = next(s for s in result.summary if (s["gpu"], s["category"]) == ("a6000", "language"))
    assert language["models_left_out"] == ""
