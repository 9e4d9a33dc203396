"""Lambda's shipped generations: each its own source with its software, dates and batch sizes,
and the 2021 figures carrying the spread of the logged runs behind them."""

from __future__ import annotations

import csv
import math
import statistics

import pytest
from hydra import compose, initialize_config_dir

from src.config.schema import register_configs
from tests.conftest import CONF_DIR, read_runs

PUBLISHED = "gpubench-published"


def study_pair_ssd(result) -> bool:
    return result.gpu in {"a6000", "rtx3090"} and result.model == "ssd300" and result.gpu_count in {1, 8}


def test_the_shipped_runs_give_the_compiled_2021_figures():
    """Lambda's compiled cell is the mean of the cell's logged runs, truncated; the runs table the
    project derives from the logs (scripts/lambda_v0_runs.py) must give every such cell back."""
    from src.published import SHIPPED

    compiled = {}
    for precision in ("fp32", "fp16"):
        with open(SHIPPED / f"v0-pytorch-train-throughput-{precision}.csv", newline="") as handle:
            for row in csv.DictReader(handle):
                compiled |= {(row["name_gpu"], k, precision): float(v) for k, v in row.items() if k != "name_gpu"}
    runs: dict[tuple, list[float]] = {}
    with open(SHIPPED / "v0-pytorch-train-runs.csv", newline="") as handle:
        for row in csv.DictReader(handle):
            runs.setdefault((row["name_gpu"], row["task"], row["precision"]), []).append(float(row["throughput"]))
    assert len(runs) == 60  # six systems, five tasks, two precisions
    assert {cell: math.trunc(statistics.fmean(v)) for cell, v in runs.items()} == {c: compiled[c] for c in runs}
    assert len(runs[("RTX 3090", "ssd", "fp32")]) == 2 and len(runs[("8x RTX A6000", "ssd", "fp32")]) == 1


def test_generations_import_as_separate_sources_with_their_stack_batches_and_spread(tmp_path, tracking_uri):
    from src.compare.pipeline import run_compare
    from src.import_results import import_generation

    register_configs()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose("import_results", overrides=[f"tracking.uri={tracking_uri}"])
    for source in ("lambda-2021", "lambda-2022"):
        import_generation(cfg, source, only=study_pair_ssd)
    again = import_generation(cfg, "lambda-2021", only=study_pair_ssd)
    assert sum(s.created for _, _, s in again) == 0  # importing twice adds nothing

    runs = {
        (r.data.tags["source"], r.data.tags["gpu"], r.data.tags["gpu_count"], r.data.tags["precision"]): r
        for r in read_runs(tracking_uri, PUBLISHED)
    }
    old = runs[("lambda-2021", "rtx3090", "1", "fp32")]
    assert "PyTorch 1.7" in old.data.tags["published_software"] and old.data.tags["published_dates"]
    assert old.data.tags["published_batch_size"] == "80"  # per GPU
    assert runs[("lambda-2021", "rtx3090", "8", "fp32")].data.tags["published_batch_size"] == "80"  # 640 / 8
    assert old.data.metrics["throughput"] == 137  # the compiled figure, not a mean made here
    assert old.data.metrics["throughput/ssd300/fp32/x1"] == 137
    logs = [math.log(138.65533447265625), math.log(136.56622314453125)]  # the two logged runs
    assert old.data.metrics["published_runs"] == 2
    assert old.data.metrics["published_runs_log_se"] == pytest.approx(statistics.stdev(logs) / math.sqrt(2))
    lone = runs[("lambda-2021", "a6000", "1", "fp32")]
    assert lone.data.metrics["published_runs"] == 1 and "published_runs_log_se" not in lone.data.metrics
    assert "PyTorch 1.13" in runs[("lambda-2022", "rtx3090", "1", "fp32")].data.tags["published_software"]

    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        overrides = [f"tracking.uri={tracking_uri}", f"out={tmp_path}/cmp", "charts=false"]  # figures only
        compare = compose("compare", overrides=overrides)
    result = run_compare(compare, tmp_path / "cmp")
    ratios = {
        (r.measurement.source, r.measurement.gpu_count, r.measurement.precision): r
        for r in result.rows
        if r.measurement.gpu == "a6000"
    }
    one = ratios[("lambda-2021", 1, "fp32")]
    assert one.relative == pytest.approx(135 / 137) and one.baseline.source == "lambda-2021"
    assert one.spread.basis == "published runs+published" and one.interval  # the 3090's two runs
    assert ratios[("lambda-2022", 1, "fp32")].baseline.source == "lambda-2022"  # never pooled
