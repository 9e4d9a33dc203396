"""Faults that used to corrupt results or hide them: a process killed hard, a store that breaks
(corrupt, full, read-only), a result that could not reach the store, a job that would exhaust
the host's memory, and files read back from another job.

The full disk and the read-only store are real: a small tmpfs, or a read-only bind mount, in a
mount namespace of the test's own (`unshare`, root only); the rest of the machine sees neither.
"""

from __future__ import annotations

import errno
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import rank_report, read_runs, store_copy
from test_robust import TINY, Cli, parent_run, runs_by_name, wait_for

from src.paths import PROJECT_ROOT
from src.results import recorded
from tests.conftest import cpu_hardware

CPUX1 = cpu_hardware(1)  # how this host names a CPU job of 1 rank(s)

needs_namespaces = pytest.mark.skipif(
    os.geteuid() != 0 or subprocess.run(["unshare", "--mount", "true"], capture_output=True).returncode != 0,
    reason="needs root and unshare for a private mount",
)


class TinyDisk:
    """A tmpfs of `size` at `mount`, seen only by commands run through `command()` (nsenter)."""

    def __init__(self, mount: Path, size: str):
        mount.mkdir()
        self.mount = mount
        script = f"mount -t tmpfs -o size={size} tmpfs {mount} && echo ready && exec sleep 1200"
        self.holder = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.holder.stdout.readline().strip() == "ready"

    def command(self, args: list[str]) -> list[str]:
        return ["nsenter", "-t", str(self.holder.pid), "-m", f"--wd={PROJECT_ROOT}", "--", *args]

    def inside(self, path: Path) -> Path:
        """`path` as the namespace sees it, from outside (the holder's root)."""
        return Path(f"/proc/{self.holder.pid}/root{path}")

    def fill(self) -> None:
        """Write a file until the tmpfs is full."""
        chunk = b"\0" * 4096
        with open(self.inside(self.mount / "filler"), "ab", buffering=0) as filler:
            try:
                while True:
                    filler.write(chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC

    def free(self) -> None:
        self.inside(self.mount / "filler").unlink()

    def runs(self, uri: str) -> list:
        """[name, status, has a throughput] of the runs in the store at `uri`, read inside."""
        code = (
            "import json, sys; from conftest import read_runs; print(json.dumps([[r.info.run_name, "
            "r.info.status, 'throughput' in r.data.metrics] for r in read_runs(sys.argv[1])]))"
        )
        done = subprocess.run(
            self.command([sys.executable, "-c", code, uri]),
            env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT / "tests")},
            capture_output=True,
            text=True,
            timeout=120,
        )
        return json.loads(done.stdout.splitlines()[-1])

    def close(self) -> None:
        self.holder.kill()
        self.holder.wait()


def in_namespace(disk: TinyDisk, args: list[str], tmp: Path, uri: str, module: str = "src.train", env=None):
    """Run `python -m module args` inside the disk's namespace; (exit status, output)."""
    extra = (
        [f"tracking.uri={uri}", f"hydra.run.dir={tmp}/run-{time.monotonic_ns()}"]
        if module == "src.train"
        else []
    )
    done = subprocess.run(
        disk.command([sys.executable, "-m", module, *args, *extra]),
        cwd=PROJECT_ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200", **(env or {})},
        capture_output=True,
        text=True,
        timeout=400,
    )
    return done.returncode, done.stdout + done.stderr


# --- a result that cannot reach the store; a full disk ---


@pytest.mark.slow  # a drill under load or outage: CI's slow set (README)
@needs_namespaces
def test_result_that_misses_a_full_disk_is_spooled_with_exit_3_and_a_full_disk_at_start_exits_2(tmp_path):
    disk = TinyDisk(tmp_path / "disk", "4m")
    try:
        uri = f"sqlite:///{disk.mount}/mlflow.db"
        gate = tmp_path / "gate"
        job = subprocess.Popen(
            disk.command(
                [sys.executable, "-m", "src.train", *TINY, "model.name=gated", f"tracking.uri={uri}"]
                + ["tracking.retries=1", f"hydra.run.dir={tmp_path}/run"]
            ),
            cwd=PROJECT_ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200", "GPUBENCH_TEST_GATE": str(gate)},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        deadline = time.monotonic() + 300
        while not gate.with_suffix(".started").exists():  # the run is open; the rank is building
            assert job.poll() is None and time.monotonic() < deadline, job.communicate()[0]
            time.sleep(0.1)
        disk.fill()
        gate.touch()
        output = job.communicate(timeout=300)[0]
        assert job.returncode == 3, output[-3000:]  # measured, but not in the store
        unwrapped = " ".join(output.split())
        done = unwrapped.split(f"done {CPUX1}-gated-fp32-smoke: ")[1]  # the result line
        assert (
            "; spooled: not in the store yet, kept in " in done and "`python -m src.sync` delivers it" in done
        )
        assert list((tmp_path / "run").rglob("spool/run.json"))

        disk.free()
        rc, synced = in_namespace(disk, [str(tmp_path / "run")], tmp_path, uri, module="src.sync")
        assert rc == 0 and f"delivered {CPUX1}-gated-fp32-smoke" in synced, synced
        assert disk.runs(uri) == [[f"{CPUX1}-gated-fp32-smoke", "FINISHED", True]]

        disk.fill()
        rc, output = in_namespace(disk, [*TINY, "model.name=tiny", "benchmark.rerun=true"], tmp_path, uri)
        assert rc == 2, output[-3000:]
        (line,) = [line for line in output.splitlines() if line.startswith("error:")]
        assert f"{disk.mount}/mlflow.db cannot grow" in line and "disk full" in line
        assert "Traceback" not in output and "cannot be reached" not in output
    finally:
        disk.close()


# --- a store that breaks (item 6), and a sweep that cannot start (item 2) ---


@pytest.mark.slow  # a real CLI scenario (processes, a store): CI's slow set (README)
@pytest.mark.parametrize("sweep", [False, True], ids=["job", "sweep"])
def test_corrupt_database_stops_with_one_line_and_exit_2(tmp_path, sweep):
    database = tmp_path / "mlruns" / "mlflow.db"
    database.parent.mkdir()
    database.write_bytes(b"these are not the tables you are looking for\n" * 200)
    cli = Cli([*(["-m"] if sweep else []), *TINY, "model.name=tiny"], tmp_path, f"sqlite:///{database}")
    assert cli.wait(300) == 2, cli.output[-3000:]
    (line,) = [line for line in cli.output.splitlines() if line.startswith("error:")]
    assert f"{database} is not an sqlite database (file is not a database)" in line
    assert "Traceback" not in cli.output and "sqlalchemy" not in cli.output.lower()
    assert not (tmp_path / "multirun" / "0").exists()  # no job ran


def test_a_store_damaged_in_the_middle_stops_before_the_job(tmp_path, empty_store):
    """Its header and the experiment's pages are whole: MLflow opens it and finds the experiment,
    and the broken pages would surface only when the job's result is written."""
    from mlflow.tracking import MlflowClient

    from src.errors import TrackingUnavailable
    from src.tracking import store

    uri = store_copy(empty_store, tmp_path)
    database = tmp_path / "mlflow.db"
    MlflowClient(uri).create_experiment("gpubench")
    size = database.stat().st_size
    with open(database, "r+b") as handle:  # a page in the middle: an index of the run tables
        handle.seek(size // 4096 // 2 * 4096)
        handle.write(b"garbage " * 512)
    with pytest.raises(TrackingUnavailable) as error:
        store.ensure_experiment(uri, "gpubench")
    assert str(error.value).startswith(f"tracking.uri='{uri}': {database} is damaged (sqlite's check: Page ")
    assert "\n" not in str(error.value)  # one line: sqlite's check reports on two
    assert str(error.value).endswith("move it aside to start a new store, or restore it from a backup; nothing was run")


@pytest.mark.slow  # a real CLI scenario (processes, a store): CI's slow set (README)
@needs_namespaces
def test_read_only_database_stops_with_exit_2_naming_the_cause(tmp_path):
    from src.tracking import store

    uri = f"sqlite:///{tmp_path}/mlruns/mlflow.db"
    store.ensure_experiment(uri, "gpubench")
    folder = tmp_path / "mlruns"
    read_only = f'mount --bind {folder} {folder} && mount -o remount,bind,ro {folder} && exec "$@"'
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", read_only, "sh"]
        + [sys.executable, "-m", "src.train", *TINY, "model.name=tiny", f"tracking.uri={uri}"]
        + [f"hydra.run.dir={tmp_path}/run"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = [line for line in done.stderr.splitlines() if "mlflow.db" in line]
    assert f"{folder}/mlflow.db cannot be written (Read-only file system)" in line


# --- runs whose process vanished (item 3) ---


@pytest.mark.slow  # a drill under load or outage: CI's slow set (README)
def test_killed_sweep_leaves_runs_that_the_next_job_ends_killed(tmp_path, tracking_uri):
    pids = tmp_path / "pids"
    sweep = Cli(["-m", *TINY, "model.name=hang"], tmp_path, tracking_uri, {"GPUBENCH_TEST_PIDS": str(pids)})
    wait_for(pids / "rank0.pid", sweep)
    os.kill(sweep.proc.pid, signal.SIGKILL)  # the sweep process: no handler, no atexit, no finally
    sweep.wait()
    assert {r.info.status for r in read_runs(tracking_uri)} == {"RUNNING"}  # parent and job, orphaned
    owner_pid = int(parent_run(tracking_uri).data.tags["owner.pid"])
    assert owner_pid == sweep.proc.pid

    later = tmp_path / "later"
    later.mkdir()
    job = Cli([*TINY, "model.name=tiny"], later, tracking_uri)
    assert job.wait() == 0, job.output[-3000:]
    assert "ended 2 run(s) KILLED whose process had vanished" in job.output
    runs = runs_by_name(tracking_uri)
    (hang,) = runs[f"{CPUX1}-hang-fp32-smoke"]
    for run in (hang, parent_run(tracking_uri)):
        assert run.info.status == "KILLED" and run.data.tags["error"] == "owner process vanished"
    (tiny,) = runs[f"{CPUX1}-tiny-fp32-smoke"]
    assert tiny.info.status == "FINISHED" and tiny.data.tags["owner.pid"] == str(job.proc.pid)


@pytest.mark.slow  # a real CLI scenario (processes, a store): CI's slow set (README)
def test_sync_ends_runs_whose_owner_is_gone_or_whose_pid_was_reused(tmp_path, tracking_uri):
    from src.tracking import owner, store

    gone = subprocess.Popen(["sleep", "0"])
    gone_started = owner.process_started(gone.pid) or "1.00"
    gone.wait()  # reaped: its pid names no process now
    me = owner.tags()
    cases = {
        "gone": {**me, recorded.OWNER_PID: str(gone.pid), recorded.OWNER_STARTED: gone_started},
        "reused": {
            **me,
            recorded.OWNER_STARTED: f"{float(me[recorded.OWNER_STARTED]) - 60:.2f}",
        },  # same pid, earlier start
        "alive": me,
        "other host": {**me, recorded.OWNER_HOST: "elsewhere", recorded.OWNER_PID: str(gone.pid)},
        "no owner": {},
    }
    client = store.client(tracking_uri)
    experiment_id = store.ensure_experiment(tracking_uri, "gpubench")
    for name, tags in cases.items():
        client.create_run(experiment_id, run_name=name, tags=tags)
    done = subprocess.run(
        [sys.executable, "-m", "src.sync", str(tmp_path), "--uri", tracking_uri],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    status = {r.info.run_name: (r.info.status, r.data.tags.get("error")) for r in read_runs(tracking_uri)}
    assert status == {
        "gone": ("KILLED", "owner process vanished"),
        "reused": ("KILLED", "owner process vanished"),
        "alive": ("RUNNING", None),
        "other host": ("RUNNING", None),
        "no owner": ("RUNNING", None),
    }


# --- the host's memory (item 7) ---


def test_a_reserve_the_host_cannot_keep_free_is_refused_before_the_job(monkeypatch):
    from conftest import compose_cfg

    from src.errors import ConfigError
    from src.hardware import host
    from src.run.prepare import prepare

    monkeypatch.setattr(host, "meminfo", lambda: {"MemTotal": 64 * 10**9, "MemAvailable": 40 * 10**9})
    for reserve in (40, 500):
        cfg = compose_cfg(["gpu=cpu", f"launcher.host_memory_reserve_gb={reserve}"])
        with pytest.raises(ConfigError, match=rf"^launcher.host_memory_reserve_gb={reserve}.0: must be below the "
                                              r"memory this host has available \(40.0 of 64.0 GB now\); 0: no guard$"):  # fmt: skip
            prepare(cfg, found=[])
    prepare(compose_cfg(["gpu=cpu", "launcher.host_memory_reserve_gb=39"]), found=[])


def test_memory_guard_stops_a_job_below_the_reserve_and_names_the_batch():
    from src.hardware import host
    from src.run.memory_guard import HostMemoryExhausted, HostMemoryGuard

    available_gb = host.meminfo()["MemAvailable"] / 1e9
    HostMemoryGuard(os.getsid(0), available_gb / 2, 64).check()  # plenty left: nothing happens
    HostMemoryGuard(os.getsid(0), 0, 64).check()  # 0: no guard
    with pytest.raises(
        HostMemoryExhausted, match=r"^host memory exhausted at batch 64 per GPU: the ranks held"
    ):
        HostMemoryGuard(os.getsid(0), available_gb * 4, 64).check()
    assert (
        host.session_rss_bytes(os.getsid(0)) > 50e6
    )  # this test process alone, with torch and mlflow loaded


def _limit_address_space():
    """The test's own safety net: no process of the job may map more than 8 GB."""
    resource.setrlimit(resource.RLIMIT_AS, (8 * 2**30, 8 * 2**30))


@pytest.mark.slow
def test_cpu_job_that_would_exhaust_the_host_memory_is_stopped_failed(tmp_path, tracking_uri):
    """A batch far too large for the host: the guard stops it once ~1.5 GB more is used."""
    from src.hardware import host

    reserve = host.meminfo()["MemAvailable"] / 1e9 - 1.5
    args = ["gpu=cpu", "benchmark=smoke", "model=resnet50", "model.batch_size=20000"]
    args += [f"launcher.host_memory_reserve_gb={reserve:.2f}", f"tracking.uri={tracking_uri}"]
    done = subprocess.run(
        [sys.executable, "-m", "src.train", *args, f"hydra.run.dir={tmp_path}/run"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=400,
        preexec_fn=_limit_address_space,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    (run,) = read_runs(tracking_uri)
    assert run.info.status == "FAILED"
    assert run.data.tags["error"].startswith("host memory exhausted at batch 20000 per GPU: the ranks held")
    printed = " ".join(done.stdout.split())
    assert f"FAILED {CPUX1}-resnet50-fp32-smoke: host memory exhausted at batch 20000" in printed


# --- files exchanged with the ranks belong to one job (item 1) ---


@pytest.mark.slow  # a real CLI scenario (processes, a store): CI's slow set (README)
def test_agent_runs_nothing_from_a_launch_file_of_another_job(tmp_path):
    from src.run.launch import Preloader

    spec = tmp_path / "launch.json"
    outcome = tmp_path / "outcome.json"
    spec.write_text(json.dumps({"job_id": "theirs", "outcome_path": str(outcome), "log_dir": str(tmp_path)}))
    preloader = Preloader()  # a real one: its agent is forked as a job's would be
    try:
        agent = preloader.fork_agent(spec, "mine", time.monotonic() + 300, tmp_path)
        assert preloader.reap(agent) == 1
        assert "belongs to another job (id theirs, not mine)" in preloader.output()
    finally:
        preloader.discard()
    assert not outcome.exists()


def test_job_refuses_an_outcome_written_for_another_job(tmp_path):
    from src.errors import RankFailure
    from src.run.launch import _read_outcome

    outcome = tmp_path / "outcome.json"
    report = rank_report(0, [0.1, 0.2])
    outcome.write_text(json.dumps({"job_id": "theirs", "ranks": [report.to_json()]}))
    with pytest.raises(RankFailure, match="written by another job"):
        _read_outcome(outcome, 0, lambda: "", tmp_path, "mine")
    outcome.write_text(json.dumps({"job_id": "mine", "ranks": [report.to_json()]}))
    assert _read_outcome(outcome, 0, lambda: "", tmp_path, "mine") == [report]


def test_progress_of_another_job_is_not_shown(tmp_path, monkeypatch):
    from src import console

    monkeypatch.setattr(console.JobProgress, "interval_s", 0.01)
    class Watched:
        """The progress file, counting the follower's reads."""

        def __init__(self, path: Path):
            self.path, self.reads = path, 0

        def read_text(self) -> str:
            self.reads += 1
            return self.path.read_text()

    path = tmp_path / "progress.node0.json"
    shown = {}
    for writer in ("theirs", "mine"):
        path.write_text(json.dumps({"job_id": writer, "phase": "warmup", "step": 1, "of": 9}))
        watched, deadline = Watched(path), time.monotonic() + 300
        with console.JobProgress(f"{CPUX1}-tiny-fp32", watched, "images/s", job_id="mine") as progress:
            while watched.reads < 2:  # read and acted on once, however late its thread runs
                assert time.monotonic() < deadline, "hang guard"
                time.sleep(0.05)
        shown[writer] = progress._progress.tasks[0].fields["status"]
    assert shown == {"theirs": "starting ranks", "mine": "warm-up 1/9"}


def test_a_preloader_that_does_not_answer_fails_the_job_and_is_replaced(tmp_path):
    from src.errors import RankFailure
    from src.run import launch

    spec = tmp_path / "launch.json"
    spec.write_text(
        json.dumps({"job_id": "theirs", "outcome_path": str(tmp_path / "o.json"), "log_dir": str(tmp_path)})
    )
    preloader = launch._preloader()
    try:
        with pytest.raises(RankFailure, match="preloader did not answer in time"):
            preloader.fork_agent(spec, "mine", time.monotonic(), tmp_path)  # its deadline has passed
        preloader.proc.wait(timeout=10)  # stopped, not left importing or forking
        assert launch._preloader() is not preloader
    finally:
        launch._discard()


def test_sync_of_a_folder_that_does_not_exist_is_bad_input(tmp_path, capsys):
    from src import sync

    with pytest.raises(SystemExit) as exited:
        sync.main([str(tmp_path / "nonexistent")])
    assert exited.value.code == 2
    assert f"{tmp_path}/nonexistent: no such folder" in capsys.readouterr().err
