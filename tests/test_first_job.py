"""What a single job calls its run and what its last line points at: a name tells apart runs of
different hardware, and the `next:` line names something that shows the run."""

from __future__ import annotations

import io
from types import SimpleNamespace

import pytest
from rich.console import Console

from src import console, doctor
from src.config.finalise import finalize
from src.run import job
from src.run.job import run_name
from tests.conftest import compose_cfg
from tests.fake_nvml import LIBRARY_NOT_FOUND, FakeNvml, install


def test_a_cpu_runs_threads_and_a_jobs_nodes_are_in_its_name():
    threads = [run_name("cpu", 1, "resnet50", "fp32", "smoke", threads=t) for t in (1, 2, 4)]
    assert threads == [
        "cpux1t1-resnet50-fp32-smoke",
        "cpux1t2-resnet50-fp32-smoke",
        "cpux1t4-resnet50-fp32-smoke",
    ]
    assert run_name("h200", 16, "resnet50", "amp", nodes=2) == "h200x2x8-resnet50-amp"
    assert run_name("h200", 16, "resnet50", "amp") == "h200x16-resnet50-amp"  # one node of 16
    assert run_name("h200", 8, "resnet50", "amp") == "h200x8-resnet50-amp"  # a GPU run on one node as ever


def test_the_default_cpu_job_at_other_thread_counts_gets_a_name_each(monkeypatch):
    """Three thread counts are three figures (4.2, 1.2 and 9.4 images/s on one host): three names."""
    install(monkeypatch, FakeNvml([], init_error=LIBRARY_NOT_FOUND))
    names = set()
    for threads in (1, 2, 4):
        overrides = ["experiment=cpu_dry_run", f"benchmark.cpu_threads={threads}"]
        check = doctor.check_default(compose_cfg(overrides), overrides, doctor._nvml_problem())
        assert check.status == "ok", check.text
        names.add(check.text.split(" would run ")[1].split()[0])
    assert names == {f"cpux1t{t}-resnet50-fp32-smoke" for t in (1, 2, 4)}


def next_line_of(monkeypatch, *overrides: str) -> str:
    """The last line a single job with `overrides` prints once its run is logged."""
    from src.tracking import ui

    out = io.StringIO()
    monkeypatch.setattr(console, "console", Console(file=out, width=80, highlight=False))
    monkeypatch.setattr(ui, "how_to_open", lambda uri, experiment_id: "MLflow UI: ...")
    job._where_and_next(
        finalize(compose_cfg(["gpu=cpu", *overrides])), SimpleNamespace(run_id="r", experiment_id="1")
    )
    return out.getvalue().splitlines()[-1]


STUDY_COMPARE = "`python -m src.compare experiment=lambda_a6000_vs_3090`"


@pytest.mark.parametrize("overrides", [["experiment=cpu_dry_run"], ["benchmark=smoke", "model=txl_base"]])
def test_a_dry_runs_next_line_points_at_the_ui_not_at_a_compare_that_leaves_it_out(monkeypatch, overrides):
    line = next_line_of(monkeypatch, *overrides)
    assert line.startswith("next: the MLflow UI above shows this dry run, which compare leaves out;")
    assert f"{STUDY_COMPARE} answers the study from Lambda's published figures" in line
    assert "sets it beside" not in line


def test_a_run_of_a_model_outside_the_study_is_not_sent_to_the_studys_compare(monkeypatch):
    line = next_line_of(monkeypatch, "model=gpt2")
    assert line.startswith("next: the MLflow UI above shows this run; the study's compare")
    assert line.endswith("holds only ssd300, resnet50, maskrcnn, txl_base, txl_large")


def test_a_strict_fp32_run_is_not_said_to_stand_beside_lambdas_tf32_figures(monkeypatch):
    line = next_line_of(monkeypatch, "model=resnet50", "precision=fp32")
    assert line.startswith("next: the MLflow UI above shows this run;")
    assert 'Lambda\'s "fp32", which ran TF32 (precision=tf32 measures its like)' in line


@pytest.mark.parametrize("precision", ["bf16", "amp", "tf32"])
def test_a_measured_run_of_a_study_model_is_sent_to_the_studys_compare(monkeypatch, precision):
    gpu = ["gpu=h200", "gpu.count=1"] if precision != "bf16" else []
    line = next_line_of(monkeypatch, "model=resnet50", f"precision={precision}", *gpu)
    assert line.startswith(f"next: {STUDY_COMPARE} sets it beside Lambda's RTX A6000 and RTX 3090")
