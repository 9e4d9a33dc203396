"""An experiment's question from one command: `python -m src.compare experiment=lambda_a6000_vs_3090`
imports the published figures it needs into an empty store and prints the article's eight figures
beside the ones Lambda's 2021 tables give, saying where they differ."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from src.compare import study
from src.compare.ratio import Ratio
from src.paths import PROJECT_ROOT
from tests.conftest import compose_cfg

EIGHT = [  # (where, stated, the 2021 tables' mean, marked where they differ): A6000 over RTX 3090
    ("vision, fp32, 1 GPU", "0.92x", "0.94x", "*"),  # Mask R-CNN: the logged runs' mean, not the cells' 12/14
    ("vision, amp, 1 GPU", "1.01x", "1.00x", "*"),
    ("language, fp32, 1 GPU", "1.34x", "1.34x", ""),
    ("language, amp, 1 GPU", "1.34x", "1.33x", "*"),
    ("vision, fp32, 8 GPUs", "1.13x", "1.17x", "*"),
    ("vision, amp, 8 GPUs", "1.14x", "1.18x", "*"),
    ("language, fp32, 8 GPUs", "1.36x", "1.36x", ""),
    ("language, amp, 8 GPUs", "1.33x", "1.33x", ""),
]


def study_cfg():
    return compose_cfg(["study=lambda_a6000_vs_3090", "out=/tmp/unused"], config_name="compare").study


def mean(gpu: str, source: str, value: float, category="vision", precision="fp32", count=8) -> dict:
    """A row of summary.csv, as compare's category means are."""
    group = {"fp32": "fp32", "tf32": "fp32"}.get(precision, "mixed")
    return {
        "category": category,
        "precision": precision,
        "precision_group": group,
        "gpu_count": count,
        "gpu": gpu,
        "source": source,
        "relative_mean": Ratio(value, None),
        "models": "resnet50",
    }


def test_a_stated_figure_is_set_beside_the_published_and_your_own_and_a_difference_is_said():
    cfg = study_cfg()
    summary = [
        mean("a6000", "lambda-2021", 1.166),
        mean("h200", "measured", 3.1, precision="tf32"),
        mean("a6000", "lambda-2022", 1.03),
    ]
    found = {(f.category, f.precision, f.gpu_count): f for f in study.figures(summary, cfg)}
    vision8 = found[("vision", "fp32", 8)]
    assert (vision8.stated, vision8.published["relative_mean"].value, vision8.differs) == (1.13, 1.166, True)
    assert vision8.published["source"] == "lambda-2021"  # the 2022 tables never answer for the article
    assert vision8.measured["h200"]["relative_mean"].value == 3.1  # tf32 is like the published fp32
    assert found[("vision", "fp32", 1)].published is None and not found[("vision", "fp32", 1)].differs
    lines = study.differences(list(found.values()), [], cfg)
    assert any(
        line.startswith("vision, fp32, 8 GPUs: the publication states 1.13x") and "1.17x" in line
        for line in lines
    )
    assert any("vision, fp32, 1 GPU: no lambda-2021 figures" in line for line in lines)


@pytest.mark.slow  # imports 40 runs into a new store: a minute on a busy 2-core host
def test_the_study_from_an_empty_store_prints_the_eight_figures(tmp_path):
    uri = f"sqlite:///{tmp_path}/mlruns/mlflow.db"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "src.compare",
            "experiment=lambda_a6000_vs_3090",
            f"tracking.uri={uri}",
            f"out={tmp_path}/out",
        ],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={"COLUMNS": "80", "PATH": ""},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = " ".join(proc.stdout.split())
    assert "imported 40 published figure(s) of a6000, rtx3090 from source lambda-2021" in out
    for where, stated, ours, mark in EIGHT:  # the published mean with its interval, then the mark
        assert re.search(rf"{where} {stated} {ours}( \[[0-9.]+-[0-9.]+\])?( ~1)? {re.escape(mark)}", out), (
            where
        )
    assert (
        "vision, fp32, 8 GPUs: the publication states 1.13x; its lambda-2021 per-model figures give 1.17x"
        in out
    )
    assert (
        "vision, fp32, 1 GPU: the publication states 0.92x; its lambda-2021 per-model figures give 0.94x "
        "(maskrcnn 0.90x, resnet50 0.93x, ssd300 0.98x)" in out
    )
    assert "ssd300 0.98x 1.08x 1.19x 1.16x" in out  # per model: fp32 x1, amp x1, fp32 x8, amp x8
    report = (tmp_path / "out" / "report.md").read_text()
    headings = [line for line in report.splitlines() if line.startswith("## ")]
    assert headings[0].startswith("## RTX A6000 vs RTX 3090 (Lambda, January 2021)")  # the question first
