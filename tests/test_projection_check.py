"""benchmarks/projection_check.py: it runs on a CPU from a fresh clone, from the points shipped with
gpubench, and docs/projection.md's error tables are what it prints (a figure changes only with the doc)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest
from omegaconf import OmegaConf

from src.paths import PROJECT_ROOT

CHECK = PROJECT_ROOT / "benchmarks" / "projection_check.py"
DOC = PROJECT_ROOT / "docs" / "projection.md"


@pytest.fixture(scope="module")
def check():
    spec = importlib.util.spec_from_file_location("projection_check", CHECK)
    module = sys.modules.setdefault(spec.name, importlib.util.module_from_spec(spec))
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("gpu", ["h200", "h100"])  # each shipped card as the source
@pytest.mark.parametrize("source", ["lambda-2021", "lambda-2022"])
def test_the_docs_error_tables_are_what_the_check_prints(check, source, gpu):
    model_error = OmegaConf.load(PROJECT_ROOT / "conf" / "compare.yaml").projection.model_error
    rows = check.check(source, check.source_points(*check.measured_runs([], "gpubench"), gpu), model_error)
    doc = DOC.read_text()
    study = [r for r in rows if r.pair == check.STUDY]
    missing = [line for line in check.markdown(study) if line not in doc]
    assert not missing, (
        f"docs/projection.md lacks what projection_check.py prints for {source} from {gpu}:\n"
        + "\n".join(missing)
    )
    if gpu == "h200":  # the all-pairs table is the H200's
        assert f"| {source} (" in doc and check.every_pair(rows).removeprefix("|") in doc


def test_the_shipped_points_are_in_the_repository():
    """A fresh clone has what the check and compare's projection read."""
    tracked = subprocess.run(
        ["git", "ls-files", "reference/measured"], cwd=PROJECT_ROOT, capture_output=True, text=True
    )
    files = tracked.stdout.split()
    assert "reference/measured/h200-study-2026-12-02.json" in files
    assert "reference/measured/h100-profile-batches-2026-12-05.json" in files


@pytest.mark.slow  # a real process: CI's slow set (README)
def test_the_check_runs_on_a_cpu_from_the_shipped_points_without_a_store(tmp_path):
    done = subprocess.run(
        [sys.executable, str(CHECK)], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for source in ("lambda-2021", "lambda-2022"):
        assert f"projected from h200 (reference/measured) against {source}" in done.stdout
    assert "| median / worst |" in done.stdout and not list(tmp_path.iterdir())  # nothing written


def test_each_card_is_projected_from_the_point_measured_at_its_published_batch(check, monkeypatch):
    """The source card measured at both published batches (the 3090's 4, the A6000's 16): each card
    is projected from its own batch's point, none through the counted ops from another batch."""
    from tests.test_projection import SOURCE, point

    cells = {
        ("a6000", "txl_large", "fp32"): check.Cell(20_000.0, 16, False),
        ("rtx3090", "txl_large", "fp32"): check.Cell(14_000.0, 4, False),
    }
    monkeypatch.setattr(check, "published", lambda source: cells)
    projected_from, real_project = [], check.project

    def project(source_point, *args):
        projected_from.append((source_point.batch, args[-1]))
        return real_project(source_point, *args)

    monkeypatch.setattr(check, "project", project)
    points = [(point(model="txl_large", batch=b), SOURCE) for b in (32, 4, 16)]

    [row] = check.check("lambda-2021", points, 0.1)

    assert row.pair == ("a6000", "rtx3090") and row.batches == (16, 4)
    assert projected_from == [(16, 16), (4, 4)]


def test_each_measured_point_is_projected_onto_each_card_at_each_batch_it_measured(check, capsys):
    """The shipped H100 ran SSD300 amp at 140 and 256, the H200 at 256: onto the H100 itself two
    projections, onto the H200 two, from the H200 two; each set against the throughput measured at
    the batch it projects to."""
    model_error = OmegaConf.load(PROJECT_ROOT / "conf" / "compare.yaml").projection.model_error
    runs, counted = check.measured_runs([], "gpubench")
    assert check.measured_cards(runs) == ["h100", "h200"]
    cards = {gpu: check.source_points(runs, counted, gpu) for gpu in ("h100", "h200")}
    check.measured_against_measured(cards, model_error)
    printed = capsys.readouterr().out
    ssd = {
        (gpu, p.batch): p.throughput
        for gpu, points in cards.items()
        for p, _ in points
        if (p.model, p.precision) == ("ssd300", "amp")
    }
    assert sorted(ssd) == [("h100", 140), ("h100", 256), ("h200", 256)]
    blocks: dict[str, list[list[str]]] = {}
    for line in printed.splitlines():
        if line.startswith("    "):  # a projection, under the last pair of cards named
            blocks[list(blocks)[-1]].append(line.split())
        elif line.startswith("  "):
            blocks[line.strip().split(":")[0]] = []
    assert set(blocks) == {"h100 -> h100", "h100 -> h200", "h200 -> h100"}
    ran = {
        pair: [line for line in lines if line[:2] == ["ssd300", "amp"]] for pair, lines in blocks.items()
    }
    assert [len(ran[pair]) for pair in ("h100 -> h100", "h100 -> h200", "h200 -> h100")] == [2, 2, 2]
    same_batch = [line for line in ran["h100 -> h200"] if line[3:6] == ["256", "->", "256"]]
    assert same_batch[0][7] == f"{ssd[('h200', 256)] / ssd[('h100', 256)]:.3f}x,"
