"""What compare's console says of the runs it could not use: a point of another gpu at other settings
than the baseline's (every setting that keeps them apart, one a side's run never recorded included,
as the matcher holds it), and with by=KEY, the measured runs that lack the key's tag."""

from __future__ import annotations

import pytest

from src.compare.analysis import check_comparable, relative_table
from src.compare.runs import CompareError
from tests.test_compare import measurement


def said(baseline, *measurements) -> str:
    with pytest.raises(CompareError) as error:
        check_comparable(list(measurements), relative_table(list(measurements), baseline), baseline, "")
    return str(error.value)


def test_settings_that_differ_at_once_are_each_named_one_a_side_never_recorded_too():
    base = measurement(
        "rtx3090", "resnet50", 500.0, params={"model.image_size": 224, "benchmark.compile": False}
    )
    other = measurement(
        "a6000",
        "resnet50",
        900.0,
        params={"model.image_size": 32, "benchmark.channels_last": True, "benchmark.compile": True},
    )

    line = said("rtx3090", base, other)

    assert line.endswith(
        "but not its settings: a6000 resnet50 x1 fp32 (channels_last True vs unrecorded, compile True vs False, "
        "image_size 32 vs 224)"
    )


def test_by_a_key_says_on_the_console_how_many_measured_runs_lack_its_tag(tracking_uri, tmp_path, capsys):
    from mlflow.tracking import MlflowClient

    from tests.test_compare import run
    from tests.test_compare_stacks import make

    client = MlflowClient(tracking_uri)
    experiment = client.create_experiment("gpubench")
    for torch, throughput in (("2.13.0", 500.0), ("2.14.1", 550.0), ("", 520.0), (None, 530.0)):
        make(
            client,
            experiment,
            "rtx3090",
            "resnet50",
            "amp",
            throughput,
            {"torch_version": torch} if torch else {},
        )
    make(client, experiment, "rtx3090", "resnet50", "fp32", 300.0, {"source": "lambda"})  # logs no stack

    run(tracking_uri, tmp_path / "out", "by=torch")

    assert "by=torch: 2 measured run(s) without a torch_version tag left out" in capsys.readouterr().out
