"""`python -m src.doctor` and the torch/torchvision check that runs before a job's ranks start.

A broken torchvision is a package on PYTHONPATH shadowing the real one (tests/fake_torchvision.py):
on import it meets torch's own `operator torchvision::nms does not exist`. A host without NVML,
or with GPUs, is tests/fake_nvml.py.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from src import doctor
from src.paths import PROJECT_ROOT
from src.rank import stack_check
from tests import fake_torchvision
from tests.conftest import compose_cfg, cpu_hardware, read_runs, run_cli
from tests.fake_nvml import LIBRARY_NOT_FOUND, FakeGpu, FakeNvml, install

CPUX1 = cpu_hardware(1)  # how this host names a CPU job of 1 rank(s)

A6000 = FakeGpu("NVIDIA RTX A6000", "00000000:18:00.0", "GPU-a6000")
RTX3090 = FakeGpu("NVIDIA GeForce RTX 3090", "00000000:3B:00.0", "GPU-3090")
TORCH_MINOR = int(__import__("torch").__version__.split(".")[1])
MATCHING = f"0.{TORCH_MINOR + 15}.0"  # a torchvision release made for the installed torch


@pytest.fixture
def shadowed(tmp_path, monkeypatch):
    """Put a torchvision of `version` first on the PYTHONPATH every subprocess inherits."""

    def shadow(version: str):
        folder = fake_torchvision.install(tmp_path / "site", version)
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")]))

    return shadow


def test_the_installed_pair_passes():
    check = doctor.check_torch(stack_check.report())  # as doctor's subprocess reports it (below)
    assert check.status == "ok", check.line()
    assert "torchvision's compiled ops load" in check.text


def test_a_torchvision_whose_ops_do_not_load_is_named_with_the_reinstall(shadowed, index_away):
    shadowed(MATCHING)
    found = doctor.stack_report(gpu_here=False)  # doctor's subprocess, as on a host without a GPU
    if found["cuda"]:  # its CPU build's command as it works from here (tests/test_wheel_index.py)
        assert found["cpu_build"].startswith("PyTorch's index https://download.pytorch.org/whl/cpu cannot")
    check = doctor.check_torch(found)
    assert check.status == "FAIL"
    assert "compiled ops do not load (operator torchvision::nms does not exist)" in check.text
    # the reinstall, as it works where PyTorch's index does not answer (tests/test_wheel_index.py)
    assert "reinstall it with PyTorch's index https://download.pytorch.org/whl/" in check.text
    assert f"pip download --no-deps 'torchvision==0.{TORCH_MINOR + 15}.*'" in check.text


def test_a_torchvision_made_for_another_torch_is_named(monkeypatch):
    """The installed metadata's version decides before any import (a shadowing package's
    dist-info is read the same way: doctor's subprocess, above)."""
    installed = {"torch": stack_check._version("torch"), "torchvision": "0.20.0"}
    monkeypatch.setattr(stack_check, "_version", installed.get)
    check = doctor.check_torch(stack_check.report.__wrapped__())
    assert check.status == "FAIL"
    assert "torchvision 0.20.0 is not made for torch 2." in check.text


def test_the_reinstall_keeps_the_index_of_the_torch_build():
    from src.rank.stack_check import reinstall_hint

    assert reinstall_hint("2.11.0+cu130") == (
        "pip install --force-reinstall --no-deps 'torchvision==0.26.*' "
        "--index-url https://download.pytorch.org/whl/cu130"
    )
    assert reinstall_hint("2.11.0") == "pip install --force-reinstall --no-deps 'torchvision==0.26.*'"


CUDA_TORCH = {"torch": "2.14.1+cu130", "torchvision": "0.29.1+cu130", "cuda": "13.0", "problem": None}
CUDA_TORCH["cpu_build"] = stack_check.cpu_build_command(CUDA_TORCH["torch"])


def test_a_cuda_build_of_torch_on_a_host_without_gpu_is_a_note_with_its_size_and_the_cpu_build(monkeypatch):
    monkeypatch.setattr(doctor, "cuda_build_bytes", lambda: 5_474_797_091)
    check = doctor.check_cuda_build(CUDA_TORCH, gpu_here=False)
    assert check.status == "note" and check.name == "torch"
    assert "torch 2.14.1+cu130 is a CUDA 13.0 build (5.5 GB with its CUDA libraries) on a host without a GPU" in check.text
    assert (
        "pip install --force-reinstall --no-deps 'torch==2.14.*' 'torchvision==0.29.*' "
        "--index-url https://download.pytorch.org/whl/cpu"
    ) in check.text
    assert doctor.check_cuda_build(CUDA_TORCH, gpu_here=True) is None  # a GPU host needs that build
    cpu_torch = {**CUDA_TORCH, "torch": "2.14.1+cpu", "torchvision": "0.29.1+cpu", "cuda": None}
    assert doctor.check_cuda_build(cpu_torch, gpu_here=False) is None


def test_the_cuda_build_is_read_from_the_installed_torch_and_its_size_from_its_distributions():
    import importlib.metadata

    import torch

    assert stack_check.report()["cuda"] == torch.version.cuda  # what doctor's subprocess prints
    torch_alone = sum(f.size or 0 for f in importlib.metadata.distribution("torch").files)
    assert doctor.cuda_build_bytes() >= torch_alone > 0


def test_a_host_has_a_gpu_when_nvml_sees_one_or_a_driver_is_loaded(monkeypatch, tmp_path):
    monkeypatch.setattr(doctor, "NVIDIA_DRIVER", tmp_path / "absent")
    install(monkeypatch, FakeNvml([], init_error=LIBRARY_NOT_FOUND))
    assert not doctor.gpu_here(doctor._nvml_problem())
    install(monkeypatch, FakeNvml([]))
    assert not doctor.gpu_here(doctor._nvml_problem())
    install(monkeypatch, FakeNvml([A6000]))
    assert doctor.gpu_here(doctor._nvml_problem())
    monkeypatch.setattr(doctor, "NVIDIA_DRIVER", tmp_path)
    install(monkeypatch, FakeNvml([], init_error=LIBRARY_NOT_FOUND))
    assert doctor.gpu_here(doctor._nvml_problem())


def test_gpus_name_the_profiles_they_match(monkeypatch):
    install(monkeypatch, FakeNvml([A6000, RTX3090, FakeGpu("NVIDIA L40S", "00000000:5E:00.0", "GPU-l40s")]))
    check = doctor.check_gpus(doctor._nvml_problem())
    assert check.status == "ok"
    assert check.text == (
        "NVML sees 1 x NVIDIA RTX A6000 (profile a6000), 1 x NVIDIA GeForce RTX 3090 (profile rtx3090), "
        "1 x NVIDIA L40S (profile none: gpu=auto tags it l40s)"
    )


def test_no_nvml_is_a_note_on_a_host_without_a_driver_and_broken_beside_one(monkeypatch, tmp_path):
    install(monkeypatch, FakeNvml([], init_error=LIBRARY_NOT_FOUND))
    monkeypatch.setattr(doctor, "NVIDIA_DRIVER", tmp_path / "absent")
    missing = doctor._nvml_problem()
    assert doctor.check_gpus(missing).status == "note"
    assert "jobs run on the CPU" in doctor.check_gpus(missing).text
    monkeypatch.setattr(doctor, "NVIDIA_DRIVER", tmp_path)
    check = doctor.check_gpus(missing)
    assert check.status == "FAIL" and "NVML does not start (NVML error 12)" in check.text


def test_a_store_that_is_not_a_database_fails_its_line(tmp_path):
    database = tmp_path / "mlruns" / "mlflow.db"
    database.parent.mkdir()
    database.write_text("not sqlite")
    check = doctor.check_tracking(compose_cfg([f"tracking.uri=sqlite:///{database}"]))
    assert check.status == "FAIL"
    assert "is not an sqlite database" in check.text


def test_a_store_nothing_answers_at_fails_at_once_in_whole_words(monkeypatch):
    import socket

    from src.errors import first_line
    from src.tracking import store

    with socket.socket() as unused:  # a port nothing listens on
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]

    def no_retries(seconds):
        raise AssertionError(f"waited {seconds} s to try again")

    monkeypatch.setattr(store.time, "sleep", no_retries)
    check = doctor.check_tracking(compose_cfg([f"tracking.uri=http://alice:pw@127.0.0.1:{port}"]))
    assert check.line() == (
        f"FAIL  tracking  tracking.uri='http://127.0.0.1:{port}': the tracking store cannot be reached "
        f"(nothing answers at 127.0.0.1:{port}: Connection refused); start it, or check tracking.uri"
    )
    long = RuntimeError("HTTPConnectionPool(host='127.0.0.1', port=9): Max retries exceeded " * 8)
    words = first_line(long).removesuffix(" ...").split()
    assert words == str(long).split()[: len(words)] and len(first_line(long)) <= 304  # cut between words


def test_the_default_job_without_nvml_runs_on_the_cpu(monkeypatch, tmp_path):
    install(monkeypatch, FakeNvml([], init_error=LIBRARY_NOT_FOUND))
    check = doctor.check_default(compose_cfg([]), [], doctor._nvml_problem())
    assert check.status == "ok"
    assert check.text.startswith(f"python -m src.train would run {CPUX1}-")


@pytest.mark.parametrize("gpus, error", [([], None), ([], LIBRARY_NOT_FOUND)])
def test_the_default_job_on_a_host_without_gpu_is_reported_as_the_cpu_dry_run_src_train_runs(
    monkeypatch, gpus, error
):
    install(monkeypatch, FakeNvml(gpus, init_error=error))
    overrides = doctor.as_the_job_runs([], doctor._nvml_problem())
    assert overrides == ["experiment=cpu_dry_run"]
    check = doctor.check_default(compose_cfg(overrides), [], doctor._nvml_problem())
    assert check.text.startswith("python -m src.train would run cpux1t1-resnet50-fp32-smoke (")  # one thread
    assert doctor.as_the_job_runs(["gpu=cpu"], None) == ["gpu=cpu"]  # named: what runs at full size


def test_a_default_the_host_cannot_run_fails_its_line(monkeypatch):
    install(monkeypatch, FakeNvml([A6000]))
    check = doctor.check_default(compose_cfg(["gpu=rtx3090"]), ["gpu=rtx3090"], None)
    assert check.status == "FAIL"
    assert check.text.startswith("python -m src.train gpu=rtx3090 would stop: gpu=rtx3090 needs 1 x")


@pytest.mark.slow  # a real CLI scenario (processes, a store): CI's slow set (README)
def test_the_command_exits_1_on_a_broken_install_and_says_which(shadowed, tracking_uri):
    shadowed(MATCHING)
    done = subprocess.run(
        [sys.executable, "-m", "src.doctor", f"tracking.uri={tracking_uri}"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert [line.split()[:2] for line in lines[:4]] == [
        ["FAIL", "torch"],
        [lines[1].split()[0], "gpus"],
        ["ok", "tracking"],
        ["ok", "default"],
    ]
    assert lines[-1] == "broken: torch (each FAIL line says what to do)"
    assert "INFO" not in done.stdout + done.stderr  # MLflow's creating-the-store lines


def test_a_bad_override_exits_2(capsys):
    with pytest.raises(SystemExit) as exited:
        doctor.main(["gpu=nonesuch"])  # what `python -m src.doctor` exits with
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "nonesuch" in err


@pytest.mark.slow  # a real CLI scenario (processes, a store): CI's slow set (README)
def test_a_job_with_a_broken_torchvision_fails_in_one_line_before_its_ranks(shadowed, tmp_path, tracking_uri):
    shadowed(MATCHING)
    done = run_cli(["gpu=cpu", "benchmark=smoke", "model=resnet50"], tmp_path, tracking_uri)
    assert done.returncode == 1, done.stdout + done.stderr
    (run,) = read_runs(tracking_uri)
    assert run.info.status == "FAILED"
    error = run.data.tags["error"]
    assert error.startswith("torchvision ") and "operator torchvision::nms does not exist" in error
    assert "\n" not in error and "pip install --force-reinstall --no-deps" in error
    assert not list((tmp_path / "run").rglob("attempt_0"))  # torch elastic's per-rank logs: no rank started
    printed = " ".join(done.stdout.split())
    assert f"FAILED {CPUX1}-resnet50-fp32-smoke: torchvision " in printed
