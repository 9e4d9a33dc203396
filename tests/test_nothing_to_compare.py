"""compare's "nothing to compare" when another gpu ran the baseline's model, count and precision
group but at other settings: the line names every setting that keeps them apart, one that a side's
run never recorded (logged before the key existed) included, as the matcher holds it."""

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
