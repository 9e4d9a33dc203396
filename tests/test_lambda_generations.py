"""Lambda's shipped generations: each its own source with its software, dates and batch sizes,
and the 2021 figures carrying the spread of the logged runs behind them."""

from __future__ import annotations

import csv
import math
import statistics

import pytest

from tests.conftest import compose_cfg, read_runs

PUBLISHED = "gpubench-published"


def study_pair_ssd(result) -> bool:
    return result.gpu in {"a6000", "rtx3090"} and result.model == "ssd300" and result.gpu_count in {1, 8}


def test_the_shipped_runs_give_the_compiled_2021_figures():
    """Lambda's compiled cell is the mean of the cell's logged runs, truncated; the runs table the
    project derives from the logs (scripts/lambda_v0_runs.py) must give every such cell back."""
    from src.published.tables import SHIPPED

    compiled = {}
    for precision in ("fp32", "fp16"):
        with open(SHIPPED / f"v0-pytorch-train-throughput-{precision}.csv", newline="") as handle:
            for row in csv.DictReader(handle):
                compiled |= {
                    (row["name_gpu"], k, precision): float(v) for k, v in row.items() if k != "name_gpu"
                }
    runs: dict[tuple, list[float]] = {}
    with open(SHIPPED / "v0-pytorch-train-runs.csv", newline="") as handle:
        for row in csv.DictReader(handle):
            runs.setdefault((row["name_gpu"], row["task"], row["precision"]), []).append(
                float(row["throughput"])
            )
    assert len(runs) == 60  # six systems, five tasks, two precisions
    assert {cell: math.trunc(statistics.fmean(v)) for cell, v in runs.items()} == {
        c: compiled[c] for c in runs
    }
    assert len(runs[("RTX 3090", "ssd", "fp32")]) == 2 and len(runs[("8x RTX A6000", "ssd", "fp32")]) == 1


def test_generations_import_as_separate_sources_with_their_stack_batches_and_spread(tmp_path, tracking_uri):
    from src.compare.pipeline import run_compare
    from src.published.__main__ import import_generation

    cfg = compose_cfg([f"tracking.uri={tracking_uri}"], config_name="import_results")
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
    # the mean of the two logged runs, which the table truncates to 137: the cell kept as a tag
    two = (138.65533447265625, 136.56622314453125)
    assert old.data.metrics["throughput"] == statistics.fmean(two)
    assert old.data.metrics["throughput/ssd300/fp32/x1"] == statistics.fmean(two)
    assert old.data.tags["published_cell"] == "137"
    logs = [math.log(t) for t in two]
    assert old.data.metrics["published_runs"] == 2
    assert old.data.metrics["published_runs_log_se"] == pytest.approx(statistics.stdev(logs) / math.sqrt(2))
    lone = runs[("lambda-2021", "a6000", "1", "fp32")]
    assert lone.data.metrics["published_runs"] == 1 and "published_runs_log_se" not in lone.data.metrics
    assert "PyTorch 1.13" in runs[("lambda-2022", "rtx3090", "1", "fp32")].data.tags["published_software"]

    overrides = [f"tracking.uri={tracking_uri}", f"out={tmp_path}/cmp", "charts=false"]  # figures only
    compare = compose_cfg(overrides, config_name="compare")
    result = run_compare(compare, tmp_path / "cmp")
    ratios = {
        (r.measurement.source, r.measurement.gpu_count, r.measurement.precision): r
        for r in result.rows
        if r.measurement.gpu == "a6000"
    }
    one = ratios[("lambda-2021", 1, "fp32")]
    assert lone.data.metrics["throughput"] == 135.40879821777344  # its one logged run, in the table as 135
    assert one.value == pytest.approx(135.40879821777344 / statistics.fmean(two))
    assert one.baseline.source == "lambda-2021"
    assert one.spread.basis == "published runs+published" and one.interval  # the 3090's two runs
    assert ratios[("lambda-2022", 1, "fp32")].baseline.source == "lambda-2022"  # never pooled


def test_a_store_holding_the_tables_whole_numbers_is_corrected_by_the_next_import(tracking_uri):
    """Figures imported as the 2021 tables' truncated cells (before the importer read the runs behind
    them) are a known correction, not a changed figure: the next import writes each again as its runs'
    mean and says so in one line; the one after finds nothing to do."""
    from src.published.__main__ import import_generation, import_table
    from src.published.tables import SHIPPED, generation

    cfg = compose_cfg([f"tracking.uri={tracking_uri}"], config_name="import_results")
    for table in generation("lambda-2021").tables:  # the cells alone, as an import of the table read them
        path = SHIPPED / table["throughput"]
        import_table(cfg, path, table["precision"], "lambda-2021", only=study_pair_ssd)
    truncated = {r.info.run_id: r.data.metrics["throughput"] for r in read_runs(tracking_uri, PUBLISHED)}
    assert 137 in truncated.values() and all(t == int(t) for t in truncated.values())

    done = import_generation(cfg, "lambda-2021", only=study_pair_ssd)
    lines = [line for _, _, s in done for line in s.repairs.lines("lambda-2021")]
    said = (
        "corrected 4 figure(s) of source=lambda-2021 imported as the table's whole number: each is written "
        "again as the mean of the runs logged behind it (the cell kept as the tag published_cell)"
    )
    assert lines == [said] * 2  # a table per precision: the pair's ssd300 at 1 and 8 GPUs
    runs = read_runs(tracking_uri, PUBLISHED)
    assert len(runs) == 8 and not {r.info.run_id for r in runs} & set(truncated)
    point = ("rtx3090", "1", "fp32")
    rtx3090 = next(
        r for r in runs if tuple(r.data.tags[k] for k in ("gpu", "gpu_count", "precision")) == point
    )
    assert rtx3090.data.metrics["throughput"] == statistics.fmean((138.65533447265625, 136.56622314453125))
    assert rtx3090.data.tags["published_cell"] == "137"
    again = import_generation(cfg, "lambda-2021", only=study_pair_ssd)
    found = [(s.created, s.already_there, s.repairs.lines("lambda-2021")) for _, _, s in again]
    assert found == [(0, 4, [])] * 2


def test_a_generation_imports_only_the_precision_named_and_refuses_one_it_lacks(tracking_uri):
    from src.errors import ConfigError
    from src.published.__main__ import import_generation, kept_by_filters, validate_import

    asked = [
        "source=lambda-2021",
        "gpus=[a6000]",
        "models=[resnet50]",
        "gpu_counts=[1]",
        f"tracking.uri={tracking_uri}",
    ]
    amp = compose_cfg([*asked, "precision=amp"], config_name="import_results")
    tf32 = compose_cfg([*asked, "precision=tf32"], config_name="import_results")

    assert validate_import(amp) is None  # the generation's own tables
    done = import_generation(amp, amp.source, kept_by_filters(amp))
    assert [(precision, summary.created) for _, precision, summary in done] == [("amp", 1)]
    assert {r.data.tags["precision"] for r in read_runs(tracking_uri, PUBLISHED)} == {"amp"}
    with pytest.raises(ConfigError, match=r"precision=tf32: must be one of fp32, amp"):
        validate_import(tf32)
