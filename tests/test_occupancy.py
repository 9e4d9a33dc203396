"""Another program on the job's GPUs: seen through NVML's compute processes (a fake NVML listing
real processes), recorded, said on the result line, and refused with benchmark.exclusive=true."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess

import pytest
from conftest import cpu_hardware, read_runs
from fake_nvml import FakeGpu, FakeNvml, install
from test_study import H200, TINY, fake_host_cli

from src.hardware import devices, occupancy
from src.results import recorded


@pytest.fixture
def stranger():
    """A real process that is nobody's descendant here: its shell exits, leaving it to init."""
    started = subprocess.run(
        ["sh", "-c", "sleep 600 >/dev/null 2>&1 & echo $!"], capture_output=True, text=True
    )
    pid = int(started.stdout)
    yield pid
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def test_only_processes_that_are_not_the_jobs_are_foreign(monkeypatch, stranger):
    ours = (os.getpid(), "python", int(2e9))  # the job process itself (as a rank would be)
    gpu = FakeGpu(**H200, processes=[ours, (stranger, "notebook", int(5e8))])
    install(monkeypatch, FakeNvml([gpu]))
    found = devices.list_devices()
    busy = occupancy.before_start(found, exclusive=False)
    assert [(p.pid, p.name, p.memory_gb) for p in busy] == [(stranger, "notebook", 0.5)]
    assert (
        occupancy.describe(busy, busy)
        == f"pid {stranger} notebook (gpu0, 0.50 GB) before start and in the window"
    )
    with pytest.raises(
        occupancy.GpuBusy, match=rf"^benchmark.exclusive=true: .* in use by pid {stranger} notebook"
    ):
        occupancy.before_start(found, exclusive=True)


def test_in_another_pid_namespace_one_unseen_process_per_gpu_is_the_jobs_rank(monkeypatch):
    """NVML in a container answers host pids: the rank's is unseen here, as is a stranger's."""
    unseen = [p for p in range(4_000_000, 4_000_100) if not os.path.exists(f"/proc/{p}")][:2]
    rank, other = (unseen[0], "python", int(30e9)), (unseen[1], "python", int(1e9))
    install(monkeypatch, FakeNvml([FakeGpu(**H200, processes=[rank, other])]))
    with occupancy.nvml.session() as lib:
        found = devices.list_devices()
        assert [p.pid for p in occupancy.foreign(lib, found, ranks_running=True)] == [unseen[1]]
        assert [p.pid for p in occupancy.foreign(lib, found, ranks_running=False)] == unseen


@pytest.mark.slow  # a real CLI scenario (processes, a store): CI's slow set (README)
def test_a_busy_gpu_is_recorded_said_and_refused_when_exclusive(tmp_path, stranger, tracking_uri):
    uri = tracking_uri
    gpu = H200 | {"processes": [[stranger, "notebook", int(5e8)]]}
    args = [
        "-m",
        "gpu=h200",
        *TINY,
        "model.name=tiny",
        "benchmark.rerun=true",
        "benchmark.exclusive=false,true",
    ]
    result = fake_host_cli(args, tmp_path, uri, [gpu])
    output = result.stdout + result.stderr
    assert result.returncode != 0, output[-3000:]  # the refused job failed; the sweep says so
    said = " ".join(output.split())  # the result line wraps in a narrow terminal
    # the pretend H200's rank trains on this CPU: the name carries its threads
    assert said.count(f"done {cpu_hardware(1, profile='h200')}-tiny-fp32-smoke") == 1
    assert f"; GPU shared with pid {stranger} notebook (gpu0, 0.50 GB) before start and in the window" in said
    refused = [line for line in output.splitlines() if line.startswith("FAILED ")]
    assert (
        len(refused) == 1
        and f"benchmark.exclusive=true: the job's GPUs are in use by pid {stranger}" in refused[0]
    )
    runs = {r.info.status: r for r in read_runs(uri) if "gpu" in r.data.tags}
    assert f"pid {stranger} notebook" in runs["FINISHED"].data.tags[recorded.GPU_FOREIGN_PROCESSES]
    assert "in the window" in runs["FINISHED"].data.tags[recorded.GPU_FOREIGN_PROCESSES]
    assert runs["FAILED"].data.tags["error"].startswith("benchmark.exclusive=true")
    assert "throughput" not in runs["FAILED"].data.metrics
