"""A real one-node Slurm (tests/one_node_slurm.py) runs a two-profile sweep from one command: one
job array per profile's GPU type, every point under one parent run; refusals, missing GPUs and
Ctrl-C end as the docs say."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import read_runs, run_cli
from one_node_slurm import GRES_FILES, slurm

from src.paths import PROJECT_ROOT

pytestmark = pytest.mark.slow


def _slurm_sweep(tmp_path: Path, profiles: dict[str, str], *extra: str) -> list[str]:
    """`-m` arguments of a sweep over the gpu profiles given as {name: yaml}, kept in tmp_path."""
    conf_dir = tmp_path / "site_conf"
    (conf_dir / "gpu").mkdir(parents=True)
    for name, body in profiles.items():
        (conf_dir / "gpu" / f"{name}.yaml").write_text(f"name: {name}\n{body}")
    return [
        "-m",
        "hydra/launcher=slurm",
        f"hydra.searchpath=[file://{conf_dir}]",
        "hydra.launcher.partition=debug",
        "hydra.launcher.cpus_per_task=1",
        f"hydra.launcher.name={tmp_path.name}",  # the job name: this test's jobs in squeue
        f"gpu={','.join(profiles)}",
        "model=gpt2",
        *extra,
    ]


def _two_profile_sweep(tmp_path: Path, *extra: str) -> list[str]:
    """Two CPU profiles that ask Slurm for different GPU types: two resource shapes."""
    profiles = {
        f"cpu_{kind}": "device: cpu\nmatch: []\nprecisions: [fp32, bf16]\ndefault_precision: fp32\n"
        f"batch_sizes: {{gpt2: {{default: 2}}}}\nslurm: {{gres: 'gpu:{kind}:1'}}\n"
        for kind in GRES_FILES
    }
    return _slurm_sweep(tmp_path, profiles, *extra)


def _slurm_jobs(env: dict, name: str) -> dict[str, tuple[str, str, str]]:
    """Slurm's own account of the jobs named `name`: job id -> (array job id, gres asked for,
    state). Finished jobs stay listed for MinJobAge (300 s)."""
    rows = slurm(["squeue", "-h", "-t", "all", "-n", name, "-o", "%A|%F|%b|%T"], env).splitlines()
    return {job_id: (array_id, gres, state) for job_id, array_id, gres, state in (r.split("|") for r in rows)}


def test_two_profile_sweep_is_two_arrays_under_one_parent_run(
    slurm_cluster, tmp_path, tracking_uri, monkeypatch
):
    for key, value in slurm_cluster.items():
        monkeypatch.setenv(key, value)  # run_cli passes this process's environment on
    sweep = _two_profile_sweep(tmp_path, "benchmark=smoke", "precision=fp32,bf16")
    result = run_cli(sweep, tmp_path, tracking_uri, timeout=550)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]

    # Each result is read once its file is written; Slurm marks the job ended once every process
    # of it has exited and its epilog has run (RUNNING, then COMPLETING), moments later on a busy
    # host: nothing may keep a job's allocation past that
    deadline = time.monotonic() + 300  # a hang guard: a busy host takes its time
    jobs = _slurm_jobs(slurm_cluster, tmp_path.name)
    while any(state in ("RUNNING", "COMPLETING") for _, _, state in jobs.values()):
        assert time.monotonic() < deadline, jobs
        time.sleep(1)
        jobs = _slurm_jobs(slurm_cluster, tmp_path.name)
    arrays: dict[str, list[str]] = {}
    for array_id, gres, _ in jobs.values():
        arrays.setdefault(gres, []).append(array_id)
    # one array per shape, each holding its shape's two points
    assert {gres: (len(set(ids)), len(ids)) for gres, ids in arrays.items()} == {
        f"gres:gpu:{kind}:1": (1, 2) for kind in GRES_FILES
    }, jobs
    assert all(state == "COMPLETED" for _, _, state in jobs.values()), jobs

    runs = read_runs(tracking_uri)
    parents = [r for r in runs if r.data.tags.get("sweep") == "true"]
    children = [r for r in runs if r.data.tags.get("sweep") != "true"]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    points = sorted((r.data.tags["gpu"], r.data.tags["precision"]) for r in children)
    assert points == [(f"cpu_{k}", p) for k in GRES_FILES for p in ("bf16", "fp32")]
    for run in children:
        assert run.info.status == "FINISHED"
        assert run.data.tags["mlflow.parentRunId"] == parents[0].info.run_id
        # each point ran as a task of the array that asked for its profile's GPU type
        environment = Path(run.info.artifact_uri.removeprefix("file://"), "environment.json")
        env = json.loads(environment.read_text())["env"]
        _, gres, _ = jobs[env["SLURM_JOB_ID"]]
        assert gres == f"gres:gpu:{run.data.tags['gpu'].removeprefix('cpu_')}:1"


def test_array_that_sbatch_refuses_fails_its_points_with_sbatchs_reason(
    slurm_cluster, tmp_path, tracking_uri, monkeypatch
):
    for key, value in slurm_cluster.items():
        monkeypatch.setenv(key, value)
    result = run_cli(
        [
            "-m",
            "hydra/launcher=slurm",
            "hydra.launcher.partition=nosuch",
            "gpu=cpu",
            "model=gpt2",
            "precision=fp32,bf16",
        ],
        tmp_path,
        tracking_uri,
        timeout=200,
    )
    assert result.returncode != 0
    assert "Invalid partition name specified" in result.stderr + result.stdout

    (parent,) = read_runs(tracking_uri)  # no job ran
    assert parent.info.status == "FAILED"
    reasons = {k: v for k, v in parent.data.tags.items() if k.startswith("failed_job.")}
    assert sorted(reasons) == ["failed_job.0", "failed_job.1"]
    assert all("Invalid partition name specified" in v for v in reasons.values()), reasons


def test_a_job_whose_allocation_lacks_its_gpus_fails_instead_of_being_skipped(
    slurm_cluster, tmp_path, tracking_uri, monkeypatch
):
    """Off Slurm, a point for a GPU this host lacks is another host's; in a Slurm job it is a failure
    (here: the node's "a6000" GRES is no RTX A6000 that NVML can see)."""
    for key, value in slurm_cluster.items():
        monkeypatch.setenv(key, value)
    profile = "device: cuda\nmatch: [RTX A6000]\nslurm: {gres: 'gpu:a6000:1'}\n"
    sweep = _slurm_sweep(tmp_path, {"cuda_a6000": profile}, "benchmark=smoke", "precision=fp32")
    result = run_cli(sweep, tmp_path, tracking_uri, timeout=400)
    assert result.returncode != 0

    (parent,) = read_runs(tracking_uri)  # the job failed before opening a run
    assert parent.info.status == "FAILED"
    tags = {k: v for k, v in parent.data.tags.items() if k.startswith(("failed_job.", "unavailable."))}
    assert list(tags) == ["failed_job.0"] and "RTX A6000" in tags["failed_job.0"], tags


def test_ctrl_c_cancels_every_array_and_ends_the_runs_killed(slurm_cluster, tmp_path, tracking_uri):
    long_jobs = ["benchmark.min_steps=100000", "benchmark.max_steps=100000", "benchmark.time_limit_s=600"]
    sweep = _two_profile_sweep(tmp_path, "benchmark=smoke", *long_jobs)
    extra = [f"tracking.uri={tracking_uri}", f"hydra.sweep.dir={tmp_path}/multirun"]
    log = tmp_path / "sweep.log"
    with open(log, "w") as out:
        command = [sys.executable, "-m", "src.train", *sweep, *extra]
        process = subprocess.Popen(command, cwd=PROJECT_ROOT, env=slurm_cluster, stdout=out, stderr=out)
    try:
        deadline = time.monotonic() + 480  # a job process starts in seconds; a shared CI box is slower

        def wait_for(condition) -> None:
            while not condition():
                assert process.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
                time.sleep(2)

        # Slurm first: reading the store while the sweep creates it would race its schema set-up
        wait_for(
            lambda: [s for _, _, s in _slurm_jobs(slurm_cluster, tmp_path.name).values()] == ["RUNNING"] * 2
        )
        wait_for(lambda: sum(r.info.status == "RUNNING" for r in read_runs(tracking_uri)) == 3)  # parent + 2
        process.send_signal(signal.SIGINT)
        process.wait(timeout=120)
    finally:
        process.kill()
    assert process.returncode != 0, log.read_text()[-3000:]

    deadline = time.monotonic() + 300  # a hang guard: a busy host takes its time
    while True:  # a cancelled job is COMPLETING until its processes have ended
        states = [state for _, _, state in _slurm_jobs(slurm_cluster, tmp_path.name).values()]
        if "COMPLETING" not in states or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert states == ["CANCELLED", "CANCELLED"], log.read_text()[-3000:]
    assert {r.info.status for r in read_runs(tracking_uri)} == {"KILLED"}
