"""What an import may put into a store: each published figure once whatever runs at once, a name
that names a card, one row per card, a number a ratio can divide by, and the shipped sources' names
kept for the shipped files."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from subprocess import PIPE

import pytest
from mlflow.tracking import MlflowClient

from src.errors import ConfigError
from src.paths import PROJECT_ROOT
from tests.conftest import read_runs
from tests.test_import_results import HEADER, PUBLISHED, import_cfg

ROWS = 6  # 12 figures: seconds of writes; two imports started together overlap in their start-up already


def many_figures(folder) -> object:
    path = folder / "table.csv"
    path.write_text(HEADER + "".join(f"GPU{n} X,1,300,1000,{100 + n},{50 + n}\n" for n in range(ROWS)))
    return path


def figures_stored(uri: str) -> Counter:
    """import key -> how many FINISHED runs hold that figure."""
    runs = read_runs(uri, PUBLISHED)
    return Counter(r.data.tags["import_key"] for r in runs if r.info.status == "FINISHED")


def imported(stdout: str) -> int:
    return sum(int(line.split()[1]) for line in stdout.splitlines() if line.startswith("imported "))


def import_at_once(uri: str, table) -> list[subprocess.CompletedProcess]:
    """Two `python -m src.published` of one table and source, started together."""
    command = [sys.executable, "-m", "src.published", str(table), "precision=fp32", "source=lab"]
    command.append(f"tracking.uri={uri}")
    started = [
        subprocess.Popen(command, cwd=PROJECT_ROOT, stdout=PIPE, stderr=PIPE, text=True) for _ in range(2)
    ]
    outputs = [p.communicate(timeout=600) for p in started]
    return [
        subprocess.CompletedProcess(p.args, p.returncode, *out)
        for p, out in zip(started, outputs, strict=True)
    ]


@pytest.mark.slow  # two real import processes racing on one store, end to end
def test_two_imports_of_one_source_at_once_store_each_figure_once(tmp_path, tracking_uri):
    done = import_at_once(tracking_uri, many_figures(tmp_path))
    assert [d.returncode for d in done] == [0, 0], [d.stderr[-2000:] for d in done]
    stored = figures_stored(tracking_uri)
    assert len(stored) == 2 * ROWS and set(stored.values()) == {1}
    assert sum(imported(d.stdout) for d in done) == 2 * ROWS  # the second found them there


@pytest.mark.slow  # a real tracking server, as a team shares one
def test_two_imports_at_once_through_a_tracking_server_store_each_figure_once(tmp_path, server):
    done = import_at_once(server, many_figures(tmp_path))
    assert [d.returncode for d in done] == [0, 0], [d.stderr[-2000:] for d in done]
    stored = figures_stored(server)
    assert len(stored) == 2 * ROWS and set(stored.values()) == {1}


def test_an_import_repairs_a_store_that_holds_figures_twice(tmp_path, tracking_uri, capsys):
    from src.published.__main__ import import_table, main
    from tests.conftest import logged_copy

    table = tmp_path / "table.csv"
    table.write_text(HEADER + "RTX 3090,1,350,2750,513,144\nRTX A6000,1,300,4437,514,153\n")
    cfg = import_cfg("precision=fp32", "source=lab", f"file={table}", f"tracking.uri={tracking_uri}")
    import_table(cfg, table)
    for run in read_runs(tracking_uri, PUBLISHED)[:3]:  # as two imports at once left them
        logged_copy(run, tracking_uri, experiment=PUBLISHED)
    assert sum(figures_stored(tracking_uri).values()) == 7
    capsys.readouterr()
    main(cfg)  # `python -m src.published TABLE precision=fp32 source=lab` again, in this process
    said = " ".join(capsys.readouterr().out.split())
    assert "removed 3 duplicate run(s) of source=lab" in said and "imported 0 run(s)" in said
    stored = figures_stored(tracking_uri)
    assert len(stored) == 4 and set(stored.values()) == {1}  # every figure kept, once


@pytest.mark.parametrize("name", ["8X", "NVIDIA", "8x NVIDIA", "x", "2x2x"])
def test_a_gpu_name_that_is_only_a_count_or_a_vendor_is_refused(tmp_path, name):
    from src.published.tables import TableError, read_table

    path = tmp_path / "table.csv"
    path.write_text(HEADER + "RTX 3090,1,350,2750,513,144\n" + f"{name},8,2800,22000,4000,1100\n")
    with pytest.raises(TableError) as error:
        read_table(path, {}, {})
    (line,) = str(error.value).splitlines()
    assert line.startswith(f"{path}:3: name_gpu={name!r}: names no GPU")


def test_one_card_named_by_two_rows_of_a_table_is_refused(tmp_path):
    from src.published.tables import TableError, read_table

    path = tmp_path / "table.csv"
    path.write_text(
        HEADER + "RTX 3090,1,350,2750,513,144\nRTX A6000,1,300,4437,514,153\n1x RTX 3090,1,350,2750,520,150\n"
    )
    with pytest.raises(TableError) as error:
        read_table(path, {}, {})
    (line,) = str(error.value).splitlines()
    assert line.startswith(f"{path}:4: name_gpu='1x RTX 3090' x1 is the card of line 2 ('RTX 3090' x1)")


@pytest.mark.parametrize("cell", ["5e-324", "2e-310"])
def test_a_subnormal_figure_is_refused_like_a_non_finite_one(tmp_path, cell):
    from src.published.tables import TableError, read_table

    path = tmp_path / "table.csv"
    path.write_text(HEADER + f"RTX 3090,1,350,2750,{cell},144\n")
    with pytest.raises(TableError) as error:
        read_table(path, {}, {})
    assert str(error.value).startswith(f"{path}:2: resnet50={cell!r}: must be a normal finite number")


def test_a_table_of_your_own_under_a_shipped_sources_name_is_refused_in_one_line(tmp_path, tracking_uri):
    from src.published.__main__ import validate_import

    path = tmp_path / "mine.csv"
    path.write_text(HEADER + "RTX 3090,1,350,2750,513,144\n")
    cfg = import_cfg("precision=fp32", "source=lambda-2021", f"file={path}", f"tracking.uri={tracking_uri}")
    with pytest.raises(ConfigError) as error:
        validate_import(cfg)
    header, line = str(error.value).splitlines()  # the entry points' form: `invalid config:`, a line per key
    assert header == "invalid config:" and line.strip().startswith(
        "source=lambda-2021: names a generation the project ships (reference/lambda/)"
    )
    assert "python -m src.published source=lambda-2021" in line and "another source=" in line


def test_a_lock_left_by_an_import_of_another_host_is_taken_over_once_its_heartbeat_stops(
    tmp_path, tracking_uri, monkeypatch, capsys
):
    from src.published import imported
    from src.published.__main__ import import_table

    monkeypatch.setattr(imported, "LEASE_S", 0.3)  # how long a heartbeat that stands still is trusted
    monkeypatch.setattr(imported, "RETRY_S", 0.1)
    client = MlflowClient(tracking_uri)
    experiment_id = client.create_experiment(PUBLISHED)
    owner = {"owner.host": "node-7", "owner.pid": "4242", "owner.started": "1700000000"}  # killed there
    client.create_run(experiment_id, tags={"import_lock": "lab", "import_heartbeat": "3", **owner})
    table = tmp_path / "table.csv"
    table.write_text(HEADER + "RTX 3090,1,350,2750,513,144\n")
    done = import_table(
        import_cfg("precision=fp32", "source=lab", f"file={table}", f"tracking.uri={tracking_uri}"), table
    )
    assert (done.created, done.repairs.dead_locks) == (2, 1)
    said = " ".join(capsys.readouterr().out.split())
    assert "source=lab: another import (host node-7, pid 4242) is writing it; waiting for it to end" in said
    assert [r.data.tags.get("import_lock") for r in read_runs(tracking_uri, PUBLISHED)] == [None, None]


def test_one_figure_held_by_two_runs_with_different_values_is_named_and_both_kept(tmp_path, tracking_uri):
    from src.published.__main__ import import_table
    from src.published.tables import TableError
    from tests.conftest import logged_copy

    table = tmp_path / "table.csv"
    table.write_text(HEADER + "RTX 3090,1,350,2750,513,144\n")
    cfg = import_cfg("precision=fp32", "source=lab", f"file={table}", f"tracking.uri={tracking_uri}")
    import_table(cfg, table)
    first = next(r for r in read_runs(tracking_uri, PUBLISHED) if r.data.tags["published_task"] == "ssd")
    other = logged_copy(first, tracking_uri, experiment=PUBLISHED)
    MlflowClient(tracking_uri).log_metric(other, "throughput", 150.0)
    with pytest.raises(TableError) as error:
        import_table(cfg, table)
    assert error.value.args[0].startswith(
        f"lab|fp32|RTX 3090|1|ssd: runs {first.info.run_id} (throughput=144, num_gpu=1, watt per GPU=350.0, "
        f"price per GPU=2750.0) and {other} (throughput=150, "
    )
    assert sum(figures_stored(tracking_uri).values()) == 3
