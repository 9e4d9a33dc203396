"""Published results in Lambda's format: the table, the runs it becomes, and compare reading them back."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from src.errors import ConfigError
from src.paths import PROJECT_ROOT
from tests.conftest import compose_cfg, read_runs, run_cli

# Cells from reference/lambda/pytorch-train-throughput-fp32.csv (Lambda Labs,
# lambdal/deeplearning-benchmark), with a made-up task column and a failed (-1) and a not-run (0) cell.
TABLE = """\
name_gpu,num_gpu,watt,price,ssd,resnet50,transformerxlbase,mytask
RTX 3090,1.0,350.0,2750.0,144.0,513.0,12101.0,0
RTX A6000,1.0,300.0,4437.5,153.0,514.0,14495.0,7.0
2x RTX A6000,2.0,600.0,8875.0,297.0,995.0,28738.0,-1
LambdaCloud 4xV100 16GB,4.0,1200.0,39750.0,403.0,1422.0,27493.0,0.0
"""
POSITIVE_CELLS = 13
PUBLISHED = "gpubench-published"


@pytest.fixture
def table(tmp_path: Path) -> Path:
    path = tmp_path / "lambda-fp32.csv"
    path.write_text(TABLE)
    return path


def import_cfg(*overrides: str):
    return compose_cfg(list(overrides), config_name="import_results")


def test_table_maps_tasks_and_gpus_and_skips_cells_not_run(table):
    from src.published.tables import read_table

    cfg = import_cfg("precision=fp32", "source=lambda", f"file={table}")
    parsed = read_table(table, cfg.tasks, cfg.gpu_profiles)
    assert parsed.not_run == 3 and len(parsed.results) == POSITIVE_CELLS
    points = {(r.gpu, r.gpu_count, r.model, r.category, r.unit): r.throughput for r in parsed.results}
    assert points[("rtx3090", 1, "ssd300", "vision", "images/s")] == 144.0
    assert points[("a6000", 2, "txl_base", "language", "tokens/s")] == 28738.0
    assert points[("lambdacloud_v100_16gb", 4, "resnet50", "vision", "images/s")] == 1422.0
    assert points[("a6000", 1, "mytask", "other", "items/s")] == 7.0
    assert {r.gpu_name for r in parsed.results if r.gpu == "lambdacloud_v100_16gb"} == {
        "LambdaCloud V100 16GB"
    }


def test_a_table_in_another_format_is_refused(tmp_path):
    from src.published.tables import TableError, read_table

    path = tmp_path / "other.csv"
    path.write_text("gpu,count,resnet50\nRTX 3090,1,513\n")
    with pytest.raises(TableError, match="missing column.s. name_gpu, num_gpu, watt, price"):
        read_table(path, {}, {})
    path.write_text("name_gpu,num_gpu,watt,price,resnet50\nRTX 3090,1,350,2750,fast\n")
    with pytest.raises(TableError, match=r"other.csv:2: resnet50='fast': must be a number"):
        read_table(path, {}, {})


def test_bad_arguments_name_key_value_and_what_is_allowed(table):
    from src.published.__main__ import validate_import

    cfg = import_cfg("precision=bf16", "source=measured", "file=/no/such.csv", "tracking.uri=nope")
    with pytest.raises(ConfigError) as error:
        validate_import(cfg)
    message = str(error.value)
    assert "precision=bf16: must be one of fp32, amp" in message
    assert "source='measured': is reserved" in message
    assert "file='/no/such.csv'" in message and "tracking.uri='nope'" in message


@pytest.mark.slow  # a real CLI scenario (processes, a store): CI's slow set (README)
def test_import_into_mlflow_and_back_without_duplicates(table, tmp_path, tracking_uri):
    args = [str(table), "precision=fp32", "source=lambda"]
    first = run_cli(args, tmp_path, tracking_uri, module="src.published")
    assert first.returncode == 0, first.stderr
    assert f"imported {POSITIVE_CELLS} run(s)" in first.stdout and "3 cell(s) not run" in first.stdout
    assert read_runs(tracking_uri) == []  # the measured experiment stays the user's own
    runs = read_runs(tracking_uri, PUBLISHED)
    assert len(runs) == POSITIVE_CELLS and {r.info.status for r in runs} == {"FINISHED"}
    a6000 = next(
        r
        for r in runs
        if r.data.tags["gpu"] == "a6000"
        and r.data.tags["gpu_count"] == "2"
        and r.data.tags["model"] == "resnet50"
    )
    tags = a6000.data.tags
    assert (tags["category"], tags["precision"], tags["unit"], tags["source"]) == (
        "vision",
        "fp32",
        "images/s",
        "lambda",
    )
    assert tags["math_matmul_tf32"] == "True" and "TF32" in tags["math_note"]  # Lambda's fp32 is TF32 math
    assert a6000.data.metrics["throughput"] == 995.0 and a6000.data.metrics["throughput_per_gpu"] == 497.5
    assert (
        float(a6000.data.params["gpu.tdp_w"]) == 300.0
        and a6000.info.run_name == "a6000x2-resnet50-fp32 [lambda]"
    )

    from src.published.__main__ import import_table

    again = import_table(import_cfg(*args[1:], f"file={table}", f"tracking.uri={tracking_uri}"), table)
    assert (again.created, again.already_there) == (0, POSITIVE_CELLS)
    assert len(read_runs(tracking_uri, PUBLISHED)) == POSITIVE_CELLS

    # and back: compare reads them like measured runs
    from src.compare.pipeline import run_compare

    overrides = [f"tracking.uri={tracking_uri}", f"out={tmp_path}/cmp", "gpu_counts=[1]"]
    cfg = compose_cfg([*overrides, "models=[ssd300,resnet50]"], config_name="compare")
    result = run_compare(cfg, tmp_path / "cmp")
    vision = next(s for s in result.summary if s["gpu"] == "a6000" and s["category"] == "vision")
    assert vision["relative_mean"].value == pytest.approx((153 / 144 + 514 / 513) / 2)
    assert (vision["source"], vision["n_models"]) == ("lambda", 2)


def test_one_system_at_several_gpu_counts_imports_every_row(tmp_path, tracking_uri):
    """Lambda's A6000-vs-3090 article lists `RTX 3090` at num_gpu 1 and 8 under one name."""
    from src.published.__main__ import import_table

    path = tmp_path / "article.csv"
    path.write_text(
        "name_gpu,num_gpu,watt,price,resnet50,ssd\n"
        "RTX 3090,1,350,2750,513,144\n"
        "RTX 3090,8,2800,22000,3842,1041\n"
    )
    cfg = import_cfg("precision=fp32", "source=lambda", f"file={path}", f"tracking.uri={tracking_uri}")
    assert (import_table(cfg, path).created, import_table(cfg, path).created) == (4, 0)
    runs = read_runs(tracking_uri, PUBLISHED)
    points = {(r.data.tags["gpu_count"], r.data.tags["model"]): r.data.metrics["throughput"] for r in runs}
    assert points == {
        ("1", "resnet50"): 513,
        ("1", "ssd300"): 144,
        ("8", "resnet50"): 3842,
        ("8", "ssd300"): 1041,
    }


HEADER = "name_gpu,num_gpu,watt,price,resnet50,ssd\n"


@pytest.mark.parametrize(
    "rows,message",
    [
        ("RTX 3090,1,350,2750,nan,144\n", ":2: resnet50='nan': must be a normal finite number"),
        ("RTX 3090,1,350,2750,513,inf\n", ":2: ssd='inf': must be a normal finite number"),
        ("RTX 3090,1,350,2750,1e400,144\n", ":2: resnet50='1e400': must be a normal finite number"),
        ("RTX 3090,1,inf,2750,513,144\n", ":2: watt='inf': must be a normal finite number"),
        (
            "RTX 3090,1,350,2750,513,144\nRTX A6000,1,300,4437,514,153\nRTX 3090,1,350,2750,520,144\n",
            ":4: resnet50='520' for 'RTX 3090' x1 conflicts with 513 on line 2",
        ),
        ("RTX 3090,1,350,2750,513\n", ":2: 5 cells, the header has 6 (missing ssd)"),
        ("RTX 3090,1,350,2750,513,144,99\n", ":2: 7 cells, the header has 6 (extra ['99'])"),
        ("RTX 3090,1,350,2750,1_000,144\n", ":2: resnet50='1_000': must be a number"),
        (" ,1,350,2750,513,144\n", ":2: name_gpu='': names no GPU once its count and vendor are taken out"),
        ("—,1,350,2750,513,144\n", ":2: name_gpu='—': names no GPU once its count and vendor are taken out"),
        ("8x,8,350,2750,513,144\n", ":2: name_gpu='8x': names no GPU once its count and vendor are taken out"),
        ('RTX 3090,1,350,2750,513,144\n"RTX A6000,1,300,4437,514,153\nRTX A100,1,300,4437,514,153\n',
         ":3: not a CSV row: unexpected end of data (a quote opened on this row is never closed)"),
    ],
)
def test_a_table_with_bad_cells_is_refused_with_file_line_and_cell(tmp_path, rows, message):
    from src.published.tables import TableError, read_table

    path = tmp_path / "bad.csv"
    path.write_text(HEADER + rows)
    with pytest.raises(TableError) as error:
        read_table(path, {}, {})
    assert str(error.value).startswith(str(path)) and message in str(error.value)


def test_a_header_naming_a_column_twice_is_refused_naming_it(tmp_path):
    from src.published.tables import TableError, read_table

    path = tmp_path / "twice.csv"
    path.write_text(HEADER.replace(",ssd", ",resnet50") + "RTX 3090,1,350,2750,513,144\n")
    with pytest.raises(TableError, match=r"twice.csv:1: column\(s\) 'resnet50' appear more than once"):
        read_table(path, {}, {})


def test_reimporting_a_changed_figure_is_refused_with_file_line_before_anything_is_imported(
    tmp_path, tracking_uri
):
    from src.published.__main__ import import_table
    from src.published.tables import TableError

    path = tmp_path / "table.csv"
    path.write_text(HEADER + "RTX 3090,1,350,2750,513,144\n")
    cfg = import_cfg("precision=fp32", "source=lambda", f"file={path}", f"tracking.uri={tracking_uri}")
    assert import_table(cfg, path).created == 2
    path.write_text(HEADER + "RTX A6000,1,300,4437,514,153\nRTX 3090,1,350,2750,513,150\n")
    with pytest.raises(TableError) as error:
        import_table(cfg, path)
    assert str(error.value).startswith(f"{path}:3: ssd for 'RTX 3090' x1: throughput=150 (imported before: 144)")
    runs = read_runs(tracking_uri, PUBLISHED)
    assert sorted(r.data.metrics["throughput"] for r in runs) == [144, 513]  # neither changed nor added


def test_the_same_row_published_twice_imports_once_and_a_binary_file_is_refused(tmp_path):
    from src.published.tables import TableError, read_table

    path = tmp_path / "twice.csv"
    path.write_text(HEADER + "RTX 3090,1,350,2750,513,144\n" * 2)
    assert len(read_table(path, {}, {}).results) == 2
    path.write_bytes(HEADER.encode() + b"RTX 3090,1,350,2750,513,144\n\x89PNG\r\n\x1a\n\x00\xff")
    with pytest.raises(TableError, match=r"twice.csv:3: byte 0x89 is not UTF-8 text"):
        read_table(path, {}, {})


def test_a_changed_watt_or_price_is_refused_like_a_changed_figure(tmp_path, tracking_uri):
    from src.published.__main__ import import_table
    from src.published.tables import TableError

    path = tmp_path / "table.csv"
    path.write_text(HEADER + "RTX 3090,1,350,2750,513,144\n")
    cfg = import_cfg("precision=fp32", "source=lambda", f"file={path}", f"tracking.uri={tracking_uri}")
    import_table(cfg, path)
    for changed, says in [
        ("RTX 3090,1,400,2750,513,144\n", "watt per GPU=400.0 (imported before: 350.0)"),
        ("RTX 3090,1,350,1999,513,144\n", "price per GPU=1999.0 (imported before: 2750.0)"),
    ]:
        path.write_text(HEADER + changed)
        with pytest.raises(TableError) as error:
            import_table(cfg, path)
        assert str(error.value).startswith(f"{path}:2: resnet50 for 'RTX 3090' x1: {says}")
    runs = read_runs(tracking_uri, PUBLISHED)
    assert {r.data.params["gpu.tdp_w"] for r in runs} == {"350.0"} and len(runs) == 2


def test_a_large_table_says_its_size_and_its_progress_and_an_unknown_column_is_named(
    tmp_path, tracking_uri, monkeypatch, capsys
):
    from src.published import __main__ as import_results

    monkeypatch.setattr(import_results, "PROGRESS_FROM", 3)  # what counts as large, and how often it says
    monkeypatch.setattr(import_results, "PROGRESS_EVERY_S", 0.0)
    path = tmp_path / "table.csv"
    path.write_text(HEADER.replace("resnet50", "Resnet50") + "RTX 3090,1,350,2750,513,144\nRTX A6000,1,300,4437,514,153\n")
    cfg = import_cfg("precision=fp32", "source=lambda", f"file={path}", f"tracking.uri={tracking_uri}")
    assert import_results.import_table(cfg, path).created == 4
    said = " ".join(capsys.readouterr().out.split())
    assert (
        "column 'Resnet50' is no task gpubench knows: imported as model 'Resnet50', category other "
        "(did you mean resnet50?)" in said
    )
    assert "table.csv (0.0 MiB): 4 run(s) to write" in said
    assert "table.csv: 1 of 4 run(s) written, about" in said and "table.csv: 3 of 4 run(s) written" in said


def finished_and_half_written(tracking_uri: str) -> tuple[list, list]:
    """(FINISHED runs, other runs) of the published experiment."""
    runs = read_runs(tracking_uri, PUBLISHED)
    return [r for r in runs if r.info.status == "FINISHED"], [r for r in runs if r.info.status != "FINISHED"]


def stop_while_a_run_is_half_written(proc: subprocess.Popen, tracking_uri: str) -> None:
    """SIGSTOP the import at a moment a run of its is open (created, not yet FINISHED)."""
    for attempt in range(200):
        proc.send_signal(signal.SIGSTOP)
        try:
            if finished_and_half_written(tracking_uri)[1]:
                return
        except Exception:  # stopped while it held the sqlite write lock
            pass
        proc.send_signal(signal.SIGCONT)
        time.sleep(0.05 * (attempt % 7))
    pytest.fail("never caught the import between opening and finishing a run")


@pytest.mark.slow  # real import processes, killed while they write
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_killed_import_leaves_no_figure_counted_that_is_not_whole(tmp_path, tracking_uri, sig):
    rows = 120
    path = tmp_path / "big.csv"
    path.write_text(HEADER + "".join(f"GPU{n} X,1,300,1000,{100 + n},{50 + n}\n" for n in range(rows)))
    command = [sys.executable, "-m", "src.published", str(path), "precision=fp32", "source=lambda",
               f"tracking.uri={tracking_uri}"]  # fmt: skip
    proc = subprocess.Popen(command, cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while len(finished_and_half_written(tracking_uri)[0]) < 5:  # well into the table
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.2)
    if sig == signal.SIGKILL:
        stop_while_a_run_is_half_written(proc, tracking_uri)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    if sig == signal.SIGTERM:  # it ends between two runs' writes, saying so
        assert proc.returncode == 143, err
        (line,) = err.strip().splitlines()
        assert line.startswith("error: interrupted (SIGTERM): ") and "the same command imports the rest" in line
        assert finished_and_half_written(tracking_uri)[1] == []
    done_before = len(finished_and_half_written(tracking_uri)[0])

    again = subprocess.run(command, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    assert f"imported {2 * rows - done_before} run(s)" in again.stdout
    assert f"{done_before} already there" in again.stdout
    released = "released 1 lock(s) on source=lambda held by imports that had stopped"
    assert (released in " ".join(again.stdout.split())) == (sig == signal.SIGKILL)  # SIGTERM released its own
    finished, others = finished_and_half_written(tracking_uri)
    assert others == []  # a half-written run was deleted and written again
    assert len({r.data.tags["import_key"] for r in finished}) == len(finished) == 2 * rows
    assert all(r.data.metrics["throughput"] > 0 and "gpu.tdp_w" in r.data.params for r in finished)
