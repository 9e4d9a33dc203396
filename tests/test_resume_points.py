"""Resume reuses only a clean finished run of the job's own point: the same config (its hash), stack,
card, nodes and CPU threads (src/config/points.py's one key), and a figure that met its stopping
rule on a GPU of its own. Otherwise the job measures, says why in one line, and keeps the old run.

The finished runs are real (jobs with real ranks into real stores, started from the test process); a
run of another stack or threads is a real run's record copied with that one tag changed, as another
install or host would have logged it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess

import pytest
from conftest import CPU_TINY, MISSED, logged_copy, read_runs, run_job_here, store_copy
from test_study import H200, fake_host_cli

from src.compare import anomalies
from src.compare.runs import aggregate, to_record
from src.config import points
from src.results import recorded, run_result
from tests.conftest import cpu_hardware

CPUX1 = cpu_hardware(1)  # how this host names a CPU job of 1 rank(s)
H200X1 = cpu_hardware(1, profile="h200")  # and a job on a pretend H200, whose rank trains on this CPU


class Opened(Exception):
    """Stands in for opening the job's run: whether the job measures is what matters here."""


def job_outcome(uri: str, overrides: list[str], monkeypatch, capsys, tmp_path) -> tuple[str, str]:
    """("skip", the figure it returned) or ("measure", what it said), for the job of `overrides`."""
    from src.tracking import job_run

    def open_run(*args, **kwargs):
        raise Opened

    monkeypatch.setattr(job_run, "JobRun", open_run)
    capsys.readouterr()
    try:
        return "skip", run_job_here(overrides, tmp_path, uri)
    except Opened:
        return "measure", " ".join(capsys.readouterr().out.split())


def test_a_cpu_job_records_its_processor_and_the_threads_its_ranks_ran(tiny_runs):
    _, clean, _ = tiny_runs
    threads = len(os.sched_getaffinity(0))  # benchmark.cpu_threads=null: the cores shared by one rank
    assert clean.data.tags[points.CPU_THREADS] == str(threads)
    assert clean.data.tags[points.CPU_MODEL] and clean.data.tags[recorded.NNODES] == "1"


def test_a_clean_run_of_the_point_is_reused_and_one_without_the_nodes_tag_is_at_one_node(
    tiny_runs, tmp_path, empty_store, monkeypatch, capsys
):
    _, clean, _ = tiny_runs
    uri = store_copy(empty_store, tmp_path / "mlruns")
    logged_copy(clean, uri, dropped=(recorded.NNODES,))  # as runs logged before the tag
    assert job_outcome(uri, CPU_TINY, monkeypatch, capsys, tmp_path) == ("skip", clean.data.metrics["throughput"])


def test_a_run_that_missed_its_stopping_rule_is_measured_again_saying_so(
    tiny_runs, tmp_path, monkeypatch, capsys
):
    uri, _, missed = tiny_runs
    outcome, said = job_outcome(uri, [*CPU_TINY, MISSED], monkeypatch, capsys, tmp_path)
    assert outcome == "measure"
    assert f"measure {CPUX1}-tiny-fp32-smoke: run {missed.info.run_id} of this point missed its stopping rule (" in said
    assert said.endswith("; it is kept as it is")


def test_a_run_that_shared_its_gpu_is_measured_again_saying_with_what(
    tiny_runs, tmp_path, empty_store, monkeypatch, capsys
):
    _, clean, _ = tiny_runs
    uri = store_copy(empty_store, tmp_path / "mlruns")
    busy = "pid 4242 notebook (gpu0, 0.50 GB) before start and in the window"  # as the job tags it
    run_id = logged_copy(clean, uri, {recorded.GPU_FOREIGN_PROCESSES: busy})
    outcome, said = job_outcome(uri, CPU_TINY, monkeypatch, capsys, tmp_path)
    assert outcome == "measure"
    assert f"run {run_id} of this point shared its GPU with {busy}; it is kept as it is" in said


@pytest.mark.parametrize(
    "changed, there, here",
    [
        ({"torch_version": "2.13.0+cpu"}, "torch=2.13.0+cpu", "torch=2.14.1"),  # another install's run
        ({points.CPU_MODEL: "AMD EPYC 9654 96-Core Processor"}, "cpu=AMD EPYC 9654", "cpu=Intel"),
        ({points.CPU_THREADS: "64"}, "cpu_threads=64", "cpu_threads="),
        ({recorded.NNODES: "2"}, "nnodes=2", "nnodes=1"),
    ],
    ids=["torch", "processor", "threads", "nodes"],
)
def test_a_run_of_the_config_on_another_stack_card_or_layout_is_another_point(
    tiny_runs, tmp_path, empty_store, monkeypatch, capsys, changed, there, here
):
    from importlib import metadata

    _, clean, _ = tiny_runs
    if "torch_version" in changed:
        here = f"torch={metadata.version('torch')}"
    if points.CPU_MODEL in changed:
        here = f"cpu={clean.data.tags[points.CPU_MODEL]}"
    uri = store_copy(empty_store, tmp_path / "mlruns")
    run_id = logged_copy(clean, uri, changed)
    outcome, said = job_outcome(uri, CPU_TINY, monkeypatch, capsys, tmp_path)
    assert outcome == "measure"
    assert f"run {run_id} of this config ran with {there}" in said
    assert f", this job with {here}" in said


@pytest.mark.parametrize(
    "tag, value",
    [
        ("cuda_version", "12.8"),
        ("cudnn_version", "90100"),  # nvidia-cudnn upgraded beside one torch: its version string stays
        ("nccl_version", "2.21.5"),
        ("gpu_name", "NVIDIA H200 NVL"),
        ("power_limit_w", "450"),
    ],
)
def test_a_run_of_the_config_under_another_cuda_cudnn_nccl_or_card_is_another_point(
    tiny_runs, tmp_path, empty_store, monkeypatch, capsys, tag, value
):
    _, clean, _ = tiny_runs
    uri = store_copy(empty_store, tmp_path / "mlruns")
    run_id = logged_copy(clean, uri, {tag: value})
    outcome, said = job_outcome(uri, CPU_TINY, monkeypatch, capsys, tmp_path)
    name = points.label(f"tag:{tag}")
    assert outcome == "measure"
    assert f"run {run_id} of this config ran with {name}={value}, " in said
    assert f"this job with {name}={clean.data.tags.get(tag, 'unrecorded')}" in said


@pytest.fixture
def stranger():
    """A real process that is nobody's descendant here: the other program on the GPU."""
    started = subprocess.run(["sh", "-c", "sleep 600 >/dev/null 2>&1 & echo $!"], capture_output=True, text=True)
    pid = int(started.stdout)
    yield pid
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
def test_a_run_that_shared_its_gpu_is_measured_again_by_the_repeats_and_kept(tmp_path, tracking_uri, stranger):
    """The busy-GPU drill on a pretend H200 (its ranks train on this CPU): a run while another
    program holds the GPU, then the same sweep with benchmark.repeat=0,1,2 on a free GPU."""
    point = ["gpu=h200", "benchmark=smoke", "precision=fp32", "model=resnet50"]
    point += ["model._target_=tests.workloads.by_name", "model.name=tiny", "benchmark.max_steps=400"]
    busy = fake_host_cli(point, tmp_path / "busy", tracking_uri, [H200 | {"processes": [[stranger, "notebook", int(5e8)]]}])
    assert busy.returncode == 0, (busy.stdout + busy.stderr)[-3000:]
    [shared] = [r for r in read_runs(tracking_uri) if recorded.GPU in r.data.tags]
    assert shared.data.tags[recorded.GPU_FOREIGN_PROCESSES]

    repeats = fake_host_cli(["-m", *point, "benchmark.repeat=0,1,2"], tmp_path / "repeats", tracking_uri, [H200])
    output = " ".join((repeats.stdout + repeats.stderr).split())
    assert repeats.returncode == 0, output[-3000:]
    assert (
        f"measure {H200X1}-tiny-fp32-smoke: run {shared.info.run_id} of this point shared its GPU with "
        f"pid {stranger} notebook" in output
    )
    assert f"skip {H200X1}-tiny-fp32-smoke" not in output
    runs = [r for r in read_runs(tracking_uri) if recorded.GPU in r.data.tags]
    assert len(runs) == 4 and {r.info.status for r in runs} == {"FINISHED"}  # the shared run is kept
    assert [r.info.run_id for r in runs if recorded.GPU_FOREIGN_PROCESSES in r.data.tags] == [shared.info.run_id]
    # compare of the three: one clean point, the shared run left out (and named) as measured again
    [point] = aggregate([to_record(run_result.read(r)) for r in runs])
    assert point.n_runs == 3 and [r.run_id for r in point.superseded] == [shared.info.run_id]
    assert not any(anomalies.flawed_runs([point], kind) for kind in anomalies.RUN_FLAWS)
