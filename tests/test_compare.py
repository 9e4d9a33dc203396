"""`src.compare` on runs made directly in a temp MLflow store: ratios, medians, files, anomalies."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.entities import Metric, Param

from src.compare.runs import CompareError
from src.config.points import point_config as measured_config
from src.errors import ConfigError
from src.paths import PROJECT_ROOT
from tests.conftest import compose_cfg, read_back, run_cli, spec_of, store_copy

EXPERIMENT = "gpubench"

# (gpu, count, model, category, precision, throughput, extra tags). Ratios a6000 / rtx3090 at x1:
# fp32 resnet50 450/500 = 0.9 (a6000 repeats 400, 450, 1000: median 450), ssd300 110/100 = 1.1,
# txl_base 1300/1000 = 1.3, txl_large 420/400 = 1.05; amp resnet50 1020/850 = 1.2.
RUNS = [
    ("rtx3090", 1, "resnet50", "vision", "fp32", 500.0, {}),
    ("rtx3090", 1, "ssd300", "vision", "fp32", 100.0, {}),
    ("rtx3090", 1, "txl_base", "language", "fp32", 1000.0, {}),
    ("rtx3090", 1, "txl_large", "language", "fp32", 400.0, {}),
    ("rtx3090", 1, "resnet50", "vision", "amp", 850.0, {}),
    ("a6000", 1, "resnet50", "vision", "fp32", 400.0, {}),
    ("a6000", 1, "resnet50", "vision", "fp32", 1000.0, {}),
    ("a6000", 1, "resnet50", "vision", "fp32", 450.0, {}),
    ("a6000", 1, "ssd300", "vision", "fp32", 110.0, {}),
    ("a6000", 1, "txl_base", "language", "fp32", 1300.0, {}),
    ("a6000", 1, "txl_large", "language", "fp32", 420.0, {}),
    ("a6000", 1, "resnet50", "vision", "bf16", 1020.0, {}),
    # scaling: x2 at 1,000 images/s is 111% of 2 x 450; x4 at 300 is slower than one GPU
    ("a6000", 2, "resnet50", "vision", "fp32", 1000.0, {}),
    ("a6000", 4, "resnet50", "vision", "fp32", 300.0, {}),
    # a published figure for another gpu, against the published baseline only
    ("h100", 1, "resnet50", "vision", "fp32", 1750.0, {"source": "lambda"}),
    ("rtx3090", 1, "resnet50", "vision", "fp32", 513.0, {"source": "lambda"}),
]


def make_run(
    client, experiment_id, gpu, count, model, category, precision, throughput, tags, status="FINISHED"
):
    tags = {
        "gpu": gpu,
        "gpu_count": str(count),
        "model": model,
        "category": category,
        "precision": precision,
        "unit": "images/s" if category == "vision" else "tokens/s",
        **tags,
    }
    run = client.create_run(experiment_id, run_name=f"{gpu}x{count}-{model}-{precision}", tags=tags)
    # spec figures as a measured run logs them from its profile
    spec = {"gpu.tdp_w": "350", "gpu.price_usd": "1500"} if gpu == "rtx3090" else {}
    params = [Param(key, value) for key, value in spec.items()]
    client.log_batch(run.info.run_id, metrics=[Metric("throughput", throughput, 0, 0)], params=params)
    client.set_terminated(run.info.run_id, status)
    return run.info.run_id


def runs_store(folder: Path, empty_store: Path):
    """A store of RUNS: (its URI, its client, its experiment's id)."""
    from mlflow.tracking import MlflowClient

    uri = store_copy(empty_store, folder)
    client = MlflowClient(tracking_uri=uri)
    experiment_id = client.create_experiment(EXPERIMENT)
    for gpu, count, model, category, precision, throughput, tags in RUNS:
        make_run(client, experiment_id, gpu, count, model, category, precision, throughput, tags)
    return uri, client, experiment_id


@pytest.fixture(scope="module")
def store(tmp_path_factory, empty_store) -> str:
    uri, client, experiment_id = runs_store(tmp_path_factory.mktemp("compare"), empty_store)
    # neither a failed run nor a sweep parent may count
    make_run(client, experiment_id, "a6000", 1, "ssd300", "vision", "fp32", 9999.0, {}, status="FAILED")
    client.create_run(experiment_id, tags={"sweep": "true"})
    return uri


def compare_cfg(uri: str, out: Path, *overrides: str):
    """compare's config as `python -m src.compare tracking.uri=URI out=OUT charts=false OVERRIDES`
    composes it: the overrides composed once per test process, the store and folder set on a copy."""
    cfg = compose_cfg(["charts=false", *overrides], config_name="compare")
    cfg.tracking.uri, cfg.out = uri, str(out)
    return cfg


def run(uri: str, out: Path, *overrides: str):
    """compare in this process, without its charts unless `charts=true` is among the overrides."""
    from src.compare.pipeline import run_compare

    return run_compare(compare_cfg(uri, out, *overrides), out)


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def row(rows: list[dict], **match) -> dict:
    found = [r for r in rows if all(r[k] == str(v) for k, v in match.items())]
    assert len(found) == 1, (match, found)
    return found[0]


@pytest.fixture(scope="module")
def result(store, tmp_path_factory):
    return run(store, tmp_path_factory.mktemp("out"), "all=true")  # lambda's h100 too


def test_per_model_ratios_and_category_means_are_exact(store, result, tmp_path):
    rel = read_csv(result.out / "relative_throughput.csv")
    expected = {("resnet50", "fp32"): 0.9, ("ssd300", "fp32"): 1.1, ("txl_base", "fp32"): 1.3}
    expected |= {("txl_large", "fp32"): 1.05, ("resnet50", "bf16"): 1.2}
    for (model, precision), ratio in expected.items():
        r = row(rel, model=model, precision=precision, gpu="a6000", gpu_count=1, source="measured")
        assert float(r["relative"]) == pytest.approx(ratio, rel=1e-5)
    summary = read_csv(result.out / "summary.csv")
    # vision at fp32 x1: the a6000's mean is over the models it and the rtx3090 both have; lambda's
    # h100, with resnet50 alone, moves nothing of it (it once cut the a6000's mean to resnet50)
    vision = row(summary, category="vision", precision="fp32", gpu="a6000", gpu_count=1, source="measured")
    assert float(vision["relative_mean"]) == pytest.approx((0.9 + 1.1) / 2, rel=1e-5)
    assert (vision["n_models"], vision["models"], vision["models_left_out"]) == ("2", "resnet50 ssd300", "")
    h100 = row(summary, category="vision", precision="fp32", gpu="h100", gpu_count=1, source="lambda")
    assert (h100["models"], h100["models_left_out"]) == ("resnet50", "")
    report = (result.out / "report.md").read_text()
    assert "| vision | fp32 | 1 GPU | a6000 | measured | 1.00x |" in report
    measured = run(store, tmp_path, "sources=[measured]").summary
    alone = next(
        s for s in measured if (s["category"], s["precision"], s["gpu"]) == ("vision", "fp32", "a6000")
    )
    assert alone["relative_mean"].value == pytest.approx(float(vision["relative_mean"]))
    assert alone["models"] == "resnet50 ssd300"
    language = row(
        summary, category="language", precision="fp32", gpu="a6000", gpu_count=1, source="measured"
    )
    assert float(language["relative_mean"]) == pytest.approx((1.3 + 1.05) / 2, rel=1e-5)
    baseline = row(
        summary, category="vision", precision="fp32", gpu="rtx3090", gpu_count=1, source="measured"
    )
    assert float(baseline["relative_mean"]) == 1.0


def test_median_of_repeats_with_count_and_failed_runs_ignored(result):
    rel = read_csv(result.out / "relative_throughput.csv")
    resnet = row(rel, model="resnet50", precision="fp32", gpu="a6000", gpu_count=1, source="measured")
    assert (float(resnet["throughput"]), resnet["n_runs"]) == (450.0, "3")
    assert (float(resnet["throughput_min"]), float(resnet["throughput_max"])) == (400.0, 1000.0)
    ssd = row(rel, model="ssd300", precision="fp32", gpu="a6000", gpu_count=1, source="measured")
    assert (float(ssd["throughput"]), ssd["n_runs"]) == (110.0, "1")  # the FAILED 9999 is not in it


def test_by_default_the_question_is_the_pair_and_your_gpus_and_one_line_says_what_is_left_out(
    store, tmp_path, capsys
):
    default = run(store, tmp_path / "default")
    assert {m.gpu for m in default.measurements} == {"a6000", "rtx3090"}
    line = (
        "left out: 1 run(s) outside the question, of h100 (source lambda); all=true or gpus=[...] shows them"
    )
    assert line in capsys.readouterr().out and line in (default.out / "report.md").read_text()
    assert not list(default.out.glob("*h100*"))


def test_mixed_precision_and_sources_are_matched_and_recorded(result):
    rel = read_csv(result.out / "relative_throughput.csv")
    bf16 = row(rel, model="resnet50", precision="bf16", gpu="a6000", gpu_count=1)
    assert (bf16["baseline_precision"], bf16["precision_group"]) == ("amp", "mixed")
    # lambda's h100 is set against lambda's rtx3090 (513), not the measured one (500)
    h100 = row(rel, model="resnet50", gpu="h100", gpu_count=1)
    assert h100["baseline_source"] == "lambda"
    assert float(h100["relative"]) == pytest.approx(1750 / 513, rel=1e-5)
    # no rtx3090 run at x2: no ratio, but the throughput is listed
    x2 = row(rel, model="resnet50", gpu="a6000", gpu_count=2)
    assert x2["relative"] == "" and float(x2["throughput"]) == 1000.0


def test_measured_row_falls_back_to_another_source_when_its_own_lacks_the_baseline(store, tmp_path):
    result = run(store, tmp_path, "models=[resnet50]", "precisions=[fp32]", "baseline=h100")
    rel = read_csv(result.out / "relative_throughput.csv")
    a6000 = row(rel, model="resnet50", precision="fp32", gpu="a6000", gpu_count=1)
    assert a6000["baseline_source"] == "lambda"
    assert float(a6000["relative"]) == pytest.approx(450 / 1750, rel=1e-5)


def test_filters_keep_only_what_they_name(store, tmp_path):
    result = run(store, tmp_path, "models=[txl_base]", "precisions=[fp32]", "sources=[measured]")
    assert {(m.model, m.precision, m.source) for m in result.measurements} == {
        ("txl_base", "fp32", "measured")
    }
    assert [(s["category"], s["gpu"]) for s in result.summary] == [
        ("language", "a6000"),
        ("language", "rtx3090"),
    ]


def test_figures_without_spec_sheets_are_said_and_per_watt_falls_back_to_tdp(result):
    report = (result.out / "report.md").read_text()
    # no run of this store logged peak, bandwidth or peak key, most not TDP or price: said so
    assert (
        "- 16 run(s) of a6000, h100, rtx3090 never logged memory_bandwidth_gbs, peak_key, peak_tflops, "
        "price_usd, tdp_w: the figures that need them (per-watt, per-kUSD, the spec range) are left out"
        in report
    )
    rel = read_csv(result.out / "relative_throughput.csv")
    base = row(rel, model="resnet50", precision="fp32", gpu="rtx3090", gpu_count=1, source="measured")
    assert float(base["per_watt"]) == pytest.approx(500 / 350, rel=1e-5) and base["per_watt_basis"] == "tdp"
    assert float(base["per_kusd"]) == pytest.approx(500 / 1.5, rel=1e-5)
    assert not list(result.out.glob("*.png")) and "![" not in report  # charts=false: none drawn, none linked


def test_report_is_one_mlflow_run_tagged_report(store, result):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=store)
    report_run = client.get_run(result.report_run_id)
    assert report_run.data.tags["report"] == "true" and report_run.info.status == "FINISHED"
    # apart from the job runs, in an experiment of its own
    assert client.get_experiment(report_run.info.experiment_id).name == "gpubench-reports"
    assert report_run.data.tags["baseline"] == "rtx3090"
    assert "Training throughput relative to rtx3090" in report_run.data.tags["mlflow.note.content"]
    logged = {a.path for a in client.list_artifacts(result.report_run_id)}
    assert {"relative_throughput.csv", "summary.csv", "anomalies.csv", "report.md"} <= logged


def test_anomalies_flagged_in_report_and_as_run_tags(store, result):
    from mlflow.tracking import MlflowClient

    kinds = {(a.kind, a.measurement.gpu_count) for a in result.found}
    assert kinds == {("scaling_above_100", 2), ("slower_than_1gpu", 4)}
    anomalies = read_csv(result.out / "anomalies.csv")
    assert {(a["kind"], a["gpu_count"]) for a in anomalies} == {
        ("scaling_above_100", "2"),
        ("slower_than_1gpu", "4"),
    }
    assert "scaling efficiency 111%" in (result.out / "report.md").read_text()
    client = MlflowClient(tracking_uri=store)
    assert client.get_run(result.report_run_id).data.tags["anomalies"] == "2"
    tagged = {
        (m.gpu_count, "anomaly" in client.get_run(r.run_id).data.tags)
        for m in result.measurements
        if m.gpu == "a6000" and m.model == "resnet50" and m.precision == "fp32"
        for r in m.runs
    }
    assert tagged == {(1, False), (2, True), (4, True)}


def test_a_stale_anomaly_tag_is_cleared(store, tmp_path):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=store)
    result = run(store, tmp_path / "first", "models=[ssd300]")
    run_id = result.measurements[0].runs[0].run_id
    client.set_tag(run_id, "anomaly", "left by an earlier compare")
    run(store, tmp_path / "second", "models=[ssd300]")
    assert "anomaly" not in client.get_run(run_id).data.tags


def test_a_filter_that_leaves_out_what_a_check_needs_keeps_its_tag(empty_store, tmp_path):
    """gpu_counts=[2] leaves out the 1-GPU run that scaling_above_100 is measured against: the
    tag on the 2-GPU run still holds, and only a comparison that can check it again may clear it."""
    from mlflow.tracking import MlflowClient

    uri = store_copy(empty_store, tmp_path / "store")
    client = MlflowClient(tracking_uri=uri)
    experiment_id = client.create_experiment(EXPERIMENT)
    for gpu, count, throughput in (
        ("rtx3090", 1, 500.0),
        ("rtx3090", 2, 950.0),
        ("a6000", 1, 450.0),
        ("a6000", 2, 1000.0),
    ):
        make_run(client, experiment_id, gpu, count, "resnet50", "vision", "fp32", throughput, {})
    first = run(uri, tmp_path / "all")
    [flagged] = [a for a in first.found if a.kind == "scaling_above_100"]
    [run_id] = flagged.run_ids
    run(uri, tmp_path / "two", "gpu_counts=[2]")
    assert (
        client.get_run(run_id).data.tags["anomaly"].startswith("scaling_above_100: scaling efficiency 111%")
    )


def test_out_holding_an_earlier_comparison_gets_only_the_new_ones_files(store, tmp_path, capsys):
    from mlflow.tracking import MlflowClient

    folder = tmp_path / "report"
    run(store, folder, "all=true")  # scaling charts, anomalies.csv: files the next one does not write
    capsys.readouterr()
    second = run(store, folder, "models=[ssd300]")
    written = sorted(path.name for path in second.files)
    assert sorted(p.name for p in folder.iterdir() if not p.name.startswith(".")) == written
    assert f"out={folder}: removed " in capsys.readouterr().out
    logged = [a.path for a in MlflowClient(tracking_uri=store).list_artifacts(second.report_run_id)]
    assert sorted(logged) == written
    (folder / "notes.txt").write_text("mine")
    with pytest.raises(
        ConfigError, match=r"out='.*/report': holds files compare did not write \(notes.txt\); must be"
    ):
        run(store, folder, "models=[ssd300]")
    assert (folder / "report.md").exists()  # refused before anything was removed


def test_a_folder_another_compare_is_writing_into_is_refused(store, tmp_path):
    from src.compare.folder import OutFolder

    with (
        OutFolder(tmp_path / "busy"),
        pytest.raises(ConfigError, match="another compare is writing there now"),
    ):
        run(store, tmp_path / "busy", "models=[ssd300]")


def test_an_out_that_cannot_be_a_folder_is_one_line_before_any_work(store, tmp_path, capsys):
    from src.config import cli

    def hydra_makes_its_folder(out: Path):  # what Hydra does before compare's task runs
        return compose_cfg([f"out={out}"], hydra=True, config_name="compare").hydra.run.dir

    (tmp_path / "a_file").write_text("")
    for out, said in (
        ("a_file", "is a file; must be a folder (made when missing)"),
        ("a_file/sub", "cannot be made (Not a directory); must be a folder you can write"),
    ):
        with pytest.raises(SystemExit) as done:
            cli.run_app(lambda: hydra_makes_its_folder(tmp_path / out))  # noqa: B023
        assert done.value.code == 2
        assert capsys.readouterr().err == f"error: out='{tmp_path / out}': {said}\n"


def test_an_out_folder_that_cannot_be_written_is_refused_before_any_work(store, tmp_path, monkeypatch):
    import os

    folder, access = tmp_path / "theirs", os.access
    folder.mkdir()  # another user's folder (root writes anywhere, so its access is what says so)
    monkeypatch.setattr(os, "access", lambda path, mode: Path(path) != folder and access(path, mode))
    with pytest.raises(
        ConfigError, match=r"^out='.*/theirs': cannot be written; must be a folder you can write$"
    ):
        run(store, folder)


def test_missing_baseline_names_it_and_the_gpus_there(store, tmp_path):
    with pytest.raises(
        CompareError, match=r"baseline=h200: no FINISHED run of gpu 'h200'.*gpus found: a6000, h100"
    ):
        run(store, tmp_path, "baseline=h200")


def test_nothing_to_compare_says_what_the_baseline_has(store, tmp_path):
    with pytest.raises(
        CompareError, match=r"nothing to compare.*Baseline has: resnet50 x1 fp32.*Others have: no runs"
    ):
        run(store, tmp_path, "gpus=[rtx3090]", "models=[resnet50]", "precisions=[fp32]")
    with pytest.raises(CompareError, match="no FINISHED run with a throughput matches the filters"):
        run(store, tmp_path, "models=[llama]")


def test_bad_filters_are_refused_before_any_work(store, tmp_path):
    with pytest.raises(ConfigError) as error:
        run(store, tmp_path / "never", "precisions=[fp16]", "gpu_counts=[0]", "anomalies.spec_tolerance=-1")
    message = str(error.value)
    assert "precisions=['fp16']: each must be one of fp32, tf32, amp, bf16" in message
    assert "gpu_counts=[0]" in message and "anomalies.spec_tolerance=-1" in message
    assert not (tmp_path / "never").exists()


def test_the_documented_filter_string_works_as_written_and_a_wrong_one_gets_a_working_hint(store, tmp_path):
    """The docs write the override as the shell passes it to Hydra, its value quoted; written the way
    the docs once did (unquoted), Hydra cannot read it and one line says how to quote it."""
    import re
    import shlex

    from hydra.errors import OverrideParseException

    from src.compare.runs import search_finished
    from src.config.cli import composition_error

    [written] = re.findall(
        r"`python -m src.compare (\"filter_string=[^`]+)`", (PROJECT_ROOT / "docs" / "compare.md").read_text()
    )
    [override] = shlex.split(written)  # what the shell hands over
    cfg = compare_cfg(store, tmp_path, override)
    assert cfg.filter_string == "tags.compile = 'False'"
    search_finished(store, [EXPERIMENT], cfg.filter_string, "")  # MLflow takes it
    with pytest.raises(OverrideParseException) as unquoted:
        compare_cfg(store, tmp_path, "filter_string=tags.compile = 'False'")
    said = composition_error(unquoted.value)
    assert "\n" not in said and said.endswith(f"is quoted whole, as {written}")
    with pytest.raises(CompareError, match=r"MLflow rejects it: .*; clauses are joined with `and`") as error:
        run(store, tmp_path, 'filter_string="tags.gpu == a6000"')
    hint = re.search(r"e.g. (.*)$", str(error.value)).group(1)
    search_finished(store, [EXPERIMENT], compare_cfg(store, tmp_path, *shlex.split(hint)).filter_string, "")


def test_compare_on_a_store_that_does_not_exist_creates_none(tmp_path):
    uri = f"sqlite:///{tmp_path}/new/mlflow.db"
    with pytest.raises(CompareError, match=r"no store there \(.*/new/mlflow.db does not exist\)") as error:
        run(uri, tmp_path / "out")
    assert not (tmp_path / "new").exists()
    assert "`python -m src.compare experiment=lambda_a6000_vs_3090` imports Lambda's" in str(error.value)


def test_a_list_of_lists_is_refused_naming_the_key(store, tmp_path):
    with pytest.raises(ConfigError, match=r"gpus=\[\['cpu'\]\]: must be one flat list"):
        run(store, tmp_path / "never", "gpus=[[cpu]]")


@pytest.mark.slow  # a real CLI scenario (processes, a store): CI's slow set (README)
def test_cli_prints_the_summary_and_writes_the_folder(store, tmp_path):
    proc = run_cli(["models=[txl_base]", f"out={tmp_path}/cli"], tmp_path, store, module="src.compare")
    assert proc.returncode == 0, proc.stderr
    assert "Throughput relative to rtx3090" in proc.stdout and "1.30x" in proc.stdout
    words = " ".join(proc.stdout.split())  # the note wraps at 80 columns
    assert "2 run(s) of a6000, rtx3090 never logged memory_bandwidth_gbs, peak_key, peak_tflops" in words
    assert "left out for those runs" in words
    assert (tmp_path / "cli" / "summary.csv").exists()
    missing = run_cli(["baseline=nosuchgpu", f"out={tmp_path}/x"], tmp_path, store, module="src.compare")
    assert missing.returncode == 2 and "error: baseline=nosuchgpu" in missing.stderr
    # another process's compare holds the folder: this one is refused before it writes a file
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from src.compare.folder import OutFolder; f = OutFolder(sys.argv[1]); "
            "print('held', flush=True); sys.stdin.read()",
            str(tmp_path / "cli"),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=PROJECT_ROOT,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        before = sorted(p.stat().st_mtime_ns for p in (tmp_path / "cli").iterdir())
        busy = run_cli(["models=[txl_base]", f"out={tmp_path}/cli"], tmp_path, store, module="src.compare")
    finally:
        holder.communicate("")
    assert busy.returncode == 2 and "another compare is writing there now" in busy.stderr
    assert sorted(p.stat().st_mtime_ns for p in (tmp_path / "cli").iterdir()) == before


def measurement(gpu: str, model: str, throughput: float, tf32_math: bool = False, params=None):
    """One run's measurement; its spec figures are the `params` it logged."""
    from src.compare.runs import aggregate, to_record

    tags = {
        "gpu": gpu,
        "gpu_count": "1",
        "model": model,
        "category": "vision",
        "precision": "fp32",
        "unit": "images/s",
        "math_matmul_tf32": str(tf32_math),
    }
    params = {k: str(v) for k, v in (params or {}).items()}
    record = to_record(read_back(tags, params, {"throughput": throughput}, run_id=f"{gpu}-{model}"))
    return aggregate([record])[0]


def logged_spec(peaks: dict, bandwidth: float) -> dict:
    return {f"gpu.peak_tflops.{k}": str(v) for k, v in peaks.items()} | {
        "gpu.memory_bandwidth_gbs": str(bandwidth),
        "precision.peak_key": "fp32",
    }


def test_a_ratio_beyond_the_spec_sheets_is_flagged():
    from src.compare import anomalies
    from src.compare.analysis import relative_table

    base = logged_spec({"fp32": 35.6, "tf32": 35.6}, 936)
    fast = logged_spec({"fp32": 40.0, "tf32": 80.0}, 800)
    measurements = [measurement("base", m, 100.0, params=base) for m in ("a", "b")] + [
        measurement("base", "c", 100.0, tf32_math=True, params=base),
        measurement("fast", "a", 200.0, params=fast),  # 2.0x: strict fp32 allows 0.85-1.12x (+25%)
        measurement("fast", "b", 50.0, params=fast),  # 0.5x: below 0.85x / 1.25
        measurement(
            "tf32", "c", 200.0, tf32_math=True, params=fast
        ),  # TF32 math: up to 2.25x, so 2.0x is fine
        measurement("bare", "a", 1000.0, params={"gpu.peak_tflops": "None"}),  # nothing to check against
    ]
    found = anomalies.spec_anomalies(relative_table(measurements, "base"), tolerance=0.25)
    assert sorted((a.measurement.gpu, a.measurement.model) for a in found) == [("fast", "a"), ("fast", "b")]
    assert "spec range 0.85-1.12x" in found[0].detail


LOGGED_SPEC = {
    "gpu.peak_tflops.fp32": "10",
    "gpu.peak_tflops.tf32": "20",
    "gpu.memory_bandwidth_gbs": "100",
    "gpu.tdp_w": "50",
    "gpu.price_usd": "1000",
    "gpu.memory_gb": "48",
    "precision.peak_key": "fp32",
}


def test_a_run_is_judged_by_the_spec_figures_it_logged_and_only_by_them():
    from src.results.logged_spec import Spec

    assert spec_of("a6000", "fp32", False, LOGGED_SPEC) == Spec("fp32", 10.0, 100.0, 50.0, 1000.0, 48.0)
    assert spec_of("a6000", "fp32", True, LOGGED_SPEC).peak_tflops == 20.0  # fp32 that ran as TF32
    assert spec_of("a6000", "fp32", False, {"gpu.tdp_w": "None"}).tdp_w is None  # its profile had none then
    never_logged = spec_of("a6000", "fp32", False, {})  # today's profile does not stand in
    assert never_logged == Spec(
        None,
        None,
        None,
        None,
        None,
        None,
        unlogged=("peak_key", "peak_tflops", "memory_bandwidth_gbs", "tdp_w", "price_usd", "memory_gb"),
    )
    from src.compare import anomalies
    from src.compare.analysis import relative_table

    unlogged = [measurement("base", "a", 100.0), measurement("fast", "a", 900.0)]
    assert anomalies.spec_anomalies(relative_table(unlogged, "base"), 0.25) == []  # nothing to judge by


def make_measured_run(client, experiment_id, gpu, model, throughput, params, tags=None, metrics=None):
    """A run as a measured job logs it: tags, the flattened config as params, its metrics."""
    category = "vision" if model == "resnet50" else "language"
    run_id = make_run(client, experiment_id, gpu, 1, model, category, "fp32", throughput, tags or {})
    client.log_batch(run_id, params=[Param(k, str(v)) for k, v in params.items()])
    for key, value in (metrics or {}).items():
        client.log_metric(run_id, key, value)
    return run_id


@pytest.fixture(scope="module")
def variants_store(tmp_path_factory, empty_store) -> str:
    """gpt2 at d_model 64 and 128 on two gpus, a smoke run, and a resnet50 that missed target_ci."""
    from mlflow.tracking import MlflowClient

    uri = store_copy(empty_store, tmp_path_factory.mktemp("variants"))
    client = MlflowClient(tracking_uri=uri)
    experiment_id = client.create_experiment(EXPERIMENT)
    full = {"benchmark.compile": False, "model.seq_len": 1024, "batch_size": 8}
    runs = [
        ("cpu", "gpt2", 100.0, {"model.d_model": 64}),
        (
            "cpu",
            "gpt2",
            110.0,
            {"model.d_model": 64, "telemetry.interval_ms": 50, "benchmark.target_ci": 0.02},
        ),
        ("cpu", "gpt2", 50.0, {"model.d_model": 128}),
        ("a6000", "gpt2", 600.0, {"model.d_model": 64, "batch_size": 16}),  # the profile's larger batch
        ("a6000", "gpt2", 300.0, {"model.d_model": 128, "batch_size": 16}),
        ("cpu", "gpt2", 5000.0, {"model.d_model": 64, "model.seq_len": 32}),  # a benchmark=smoke run
    ]
    for gpu, model, throughput, params in runs:
        tags = {"benchmark": "smoke"} if throughput == 5000.0 else {}
        make_measured_run(client, experiment_id, gpu, model, throughput, full | params, tags)
    resnet = full | {"model.image_size": 224, "benchmark.target_ci": 0.01}
    make_measured_run(client, experiment_id, "cpu", "resnet50", 20.0, resnet, {"stop_reason": "ci"})
    missed = {"stop_reason": "max_steps"}
    ci = {"step_time_ci95_rel": 0.27}
    make_measured_run(client, experiment_id, "a6000", "resnet50", 900.0, resnet, missed, ci)
    return uri


def test_runs_that_differ_in_what_is_measured_are_separate_points(variants_store, tmp_path):
    result = run(variants_store, tmp_path, "baseline=cpu")
    rel = read_csv(result.out / "relative_throughput.csv")
    gpt2 = {(r["gpu"], r["variant"]): r for r in rel if r["model"] == "gpt2"}
    assert set(gpt2) == {(gpu, f"d_model={d}") for gpu in ("cpu", "a6000") for d in (64, 128)}
    small = gpt2[("cpu", "d_model=64")]  # telemetry and target_ci do not split repeats
    assert (float(small["throughput"]), small["n_runs"]) == (105.0, "2")
    assert (float(gpt2[("cpu", "d_model=128")]["throughput"]), gpt2[("cpu", "d_model=128")]["n_runs"]) == (
        50.0,
        "1",
    )
    # each variant is divided by the baseline's same variant; the per-GPU batch may differ
    assert float(gpt2[("a6000", "d_model=64")]["relative"]) == pytest.approx(600 / 105)
    assert float(gpt2[("a6000", "d_model=128")]["relative"]) == pytest.approx(300 / 50)
    assert "5000" not in (result.out / "relative_throughput.csv").read_text()  # smoke left out
    report = (result.out / "report.md").read_text()
    assert "gpt2 [d_model=128]" in report and "1 benchmark=smoke run(s) left out" in report
    summary = read_csv(result.out / "summary.csv")
    language = row(summary, category="language", gpu="a6000")
    # a mean counts each model once: one of its sizes, the other said beside it
    assert (language["models"], language["n_models"]) == ("gpt2 [d_model=128]", "1")
    counted = "gpt2 [d_model=64] (other settings; the mean counts gpt2 [d_model=128])"
    assert language["models_left_out"] == counted
    assert float(language["relative_mean"]) == pytest.approx(300 / 50)


def test_a_shorter_autotuning_search_is_its_own_point():
    """A limited cuDNN search may pick slower algorithms (-2.2% on SSD300 fp32): never a repeat of
    the full search. A null limit and a run logged before the key existed are the same search."""
    base = {"model.d_model": "64", "benchmark.cudnn_benchmark": "True"}
    null = base | {"benchmark.cudnn_benchmark_limit": "None"}
    limited = base | {"benchmark.cudnn_benchmark_limit": "6"}
    assert measured_config(null) == measured_config(base)
    assert measured_config(limited) != measured_config(base)


def test_smoke_runs_count_only_when_asked_for(variants_store, tmp_path):
    result = run(variants_store, tmp_path, "baseline=cpu", "include_smoke=true", "models=[gpt2]")
    smoke = [m for m in result.measurements if m.throughput == 5000.0]
    assert len(smoke) == 1 and smoke[0].workload == "gpt2 [d_model=64, seq_len=32]"
    assert smoke[0].n_runs == 1  # never pooled with the full-size d_model=64 runs


def test_the_console_says_smoke_runs_were_left_out(variants_store, tmp_path, capsys):
    result = run(variants_store, tmp_path, "baseline=cpu", "models=[gpt2]")
    assert all(m.throughput != 5000.0 for m in result.measurements)
    assert "1 benchmark=smoke run(s) left out; include_smoke=true counts them" in capsys.readouterr().out


def test_a_figure_that_missed_its_stopping_rule_is_flagged(variants_store, tmp_path):
    result = run(variants_store, tmp_path, "baseline=cpu", "models=[resnet50]")
    (flagged,) = [a for a in result.found if a.kind == "ci_not_met"]
    assert flagged.measurement.gpu == "a6000"
    assert "max_steps before target_ci: CI +/-27.0% > 1.0%" in flagged.detail
    rel = read_csv(result.out / "relative_throughput.csv")
    assert row(rel, gpu="a6000", model="resnet50")["anomalies"] == "ci_not_met"
    assert row(rel, gpu="cpu", model="resnet50")["anomalies"] == ""


def test_a_window_shorter_than_min_steps_is_flagged_whatever_its_tag():
    from tests.conftest import read_back

    def ci_missed(tags, metrics, params):
        return read_back(tags, params, metrics).missed

    params = {"benchmark.target_ci": "0.01", "benchmark.min_steps": "100000"}
    short = {"step_time_ci95_rel": 0.004, "measured_steps": 9.0}
    for reason in ("ci", "time_limit"):  # `ci`: as runs cut short by the time limit were tagged
        assert ci_missed({"stop_reason": reason}, short, params) is not None
    assert "after 9 of min_steps 100,000 steps" in ci_missed({"stop_reason": "time_limit"}, short, params)
    assert ci_missed({"stop_reason": "ci"}, short | {"measured_steps": 100000.0}, params) is None


@pytest.fixture
def terminal(monkeypatch):
    """The console as an 80-column terminal; what it was shown."""
    import io

    from rich.console import Console

    from src import console

    shown = io.StringIO()
    monkeypatch.setattr(console, "console", Console(file=shown, width=80, highlight=False))
    return shown


def test_the_category_means_fit_80_columns_with_names_whole(empty_store, tmp_path, terminal):
    """A long published gpu name stays on one line, its figures beside it, the means grouped under
    their category, precision and GPU count; the baseline's own rows (1.0) are in summary.csv only."""
    from mlflow.tracking import MlflowClient

    uri = store_copy(empty_store, tmp_path / "store")
    client = MlflowClient(tracking_uri=uri)
    experiment_id = client.create_experiment(EXPERIMENT)
    long_name = "lambdacloud_h100_80gb_pcie_gen5"
    for gpu, count, model, category, precision, throughput, tags in (
        ("rtx3090", 1, "txl_base", "language", "amp", 1000.0, {"source": "lambda"}),
        (long_name, 1, "txl_base", "language", "amp", 3523.4, {"source": "lambda"}),
        ("rtx3090", 8, "resnet50", "vision", "fp32", 100.0, {}),
        ("h200", 8, "resnet50", "vision", "fp32", 200.0, {}),
    ):
        make_run(client, experiment_id, gpu, count, model, category, precision, throughput, tags)
    run(uri, tmp_path / "out", "all=true", "tag_runs=false")
    lines = terminal.getvalue().splitlines()
    assert max(map(len, lines)) <= 80
    assert [line.strip() for line in lines if "GPU" in line and "x" not in line] == [
        "language, amp, 1 GPU",
        "vision, fp32, 8 GPUs",
    ]
    assert [long_name, "lambda", "3.52x", "1"] in [line.split() for line in lines]  # whole, on one line
    assert ["h200", "measured", "2.00x", "1"] in [line.split() for line in lines]
    assert not [line for line in lines if line.split()[:1] == ["rtx3090"]]


def test_an_interval_too_wide_to_state_says_so_within_80_columns(terminal):
    """Two repeats that disagree: t(1 dof) = 12.7 makes an interval of 2.3e-10 to 3.1e12."""
    from src.compare.ratio import Ratio, Spread
    from src.compare.report import Table, show

    wide = Ratio(0.85, Spread(2.28, 1, "repeats"))
    assert wide.interval[0] < 1e-9 and wide.interval[1] > 1e12
    show(
        Table(
            [{"gpu": "a6000", "relative_mean": wide}],
            ("gpu", "relative_mean"),
            printed=("gpu", "relative_mean"),
        )
    )
    lines = terminal.getvalue().splitlines()
    assert max(map(len, lines)) <= 80
    assert ["a6000", "0.85x", "[too", "wide]", "~1"] in [line.split() for line in lines]
    said = " ".join(terminal.getvalue().split())
    assert "too wide: the interval's ends are over 100-fold apart" in said
    assert "~1: its 95% interval holds 1.0 (no measurable difference)" in said


def test_no_category_mean_is_said_in_a_line_not_an_empty_table(empty_store, tmp_path, terminal):
    """A store of capped runs only (the capacity split) has no plain point another gpu shares."""
    from mlflow.tracking import MlflowClient

    uri = store_copy(empty_store, tmp_path / "store")
    client = MlflowClient(tracking_uri=uri)
    experiment_id = client.create_experiment(EXPERIMENT)
    for cap in (24.0, 48.0):
        make_measured_run(
            client, experiment_id, "h200", "txl_large", 100.0, {"gpu.memory_limit_gb": cap, "batch_size": 4}
        )
    run(uri, tmp_path / "out", "baseline=h200", "capacity_split=[h200@48,h200@24]", "tag_runs=false")
    said = " ".join(terminal.getvalue().split())
    assert (
        "Throughput relative to h200: no category mean; no other gpu shares a model, GPU count, "
        "precision and settings with h200's runs" in said
    )
    assert "mean [95% CI]" not in said


def test_a_gpu_asked_for_with_no_runs_is_said(store, tmp_path, capsys):
    result = run(store, tmp_path / "asked", "gpus=[rtx3090,a6000,h200]")
    said = "gpus: h200 has no FINISHED run with a throughput that matches the filters (gpus with runs: a6000, h100"
    assert said in (result.out / "report.md").read_text()
    assert said in " ".join(capsys.readouterr().out.split())
