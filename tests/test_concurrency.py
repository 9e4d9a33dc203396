"""Commands that run at the same time on one host and one store: each keeps its own folder, files
and results; a new store is created once; a GPU measures one job at a time.

The processes are started in the same second on purpose: Hydra's `now` is frozen for all of them
(tests/frozen_now.py), which is what two commands started in the same second see.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import read_runs
from omegaconf import OmegaConf
from test_robust import TINY, Cli

from src.paths import PROJECT_ROOT

FROZEN_NOW = PROJECT_ROOT / "tests" / "frozen_now.py"
HYDRA_DIRS = OmegaConf.load(PROJECT_ROOT / "conf" / "config.yaml").hydra


class SameSecond:
    """`python -m MODULE ARGS` with Hydra's `now` frozen (tests/frozen_now.py), and the project's
    own folder pattern (conf/config.yaml) rooted in `tmp` instead of the project."""

    def __init__(
        self, args: list[str], tmp: Path, uri: str, module: str = "src.train", env: dict | None = None
    ):
        dirs = []
        if module == "src.train":
            for key in ("run", "sweep"):
                pattern = HYDRA_DIRS[key]._get_node("dir")._value().replace("${project_root:}", str(tmp))
                dirs.append(f"hydra.{key}.dir='{pattern}'")
        self.log = tmp / f"{module}-{time.monotonic_ns()}.log"
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen(
                [sys.executable, str(FROZEN_NOW), module, *args, f"tracking.uri={uri}", *dirs],
                cwd=PROJECT_ROOT,
                env={**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200", **(env or {})},
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def wait(self, timeout: float = 600) -> int:
        return self.proc.wait(timeout)

    @property
    def output(self) -> str:
        return self.log.read_text()


@pytest.mark.slow  # a drill under load or outage: CI's slow set (README)
def test_jobs_and_sweeps_started_in_the_same_second_keep_their_own_results(tmp_path):
    uri = f"sqlite:///{tmp_path}/mlruns/mlflow.db"
    from src.tracking import store

    store.ensure_experiment(uri, "gpubench")  # the store exists: only the folders race here
    clis = [
        SameSecond([*TINY, "model.name=tiny", "model.batch_size=3"], tmp_path, uri),
        SameSecond([*TINY, "model.name=tiny", "model.batch_size=8"], tmp_path, uri),
        SameSecond(["-m", *TINY, "model.name=tiny", "model.batch_size=5"], tmp_path, uri),
        SameSecond(["-m", *TINY, "model.name=tiny", "model.batch_size=6"], tmp_path, uri),
    ]
    for cli in clis:
        assert cli.wait() == 0, cli.output[-3000:]
    runs = read_runs(uri)
    jobs = [r for r in runs if r.data.tags.get("sweep") != "true"]
    assert sorted(int(r.data.params["model.batch_size"]) for r in jobs) == [3, 5, 6, 8]
    for run in jobs:  # each run measured its own batch, not its neighbour's
        assert run.data.metrics["batch_size"] == int(run.data.params["model.batch_size"])
    parents = {r.info.run_id: r for r in runs if r.data.tags.get("sweep") == "true"}
    assert len(parents) == 2 and all(p.info.status == "FINISHED" for p in parents.values())
    children = sorted(
        int(r.data.params["model.batch_size"]) for r in jobs if r.data.tags.get("mlflow.parentRunId")
    )
    assert children == [5, 6]
    assert (
        len({r.data.tags["mlflow.parentRunId"] for r in jobs if r.data.tags.get("mlflow.parentRunId")}) == 2
    )
    singles = sorted((tmp_path / "multirun" / "single").glob("*/*"))
    sweeps = sorted(p for p in (tmp_path / "multirun").glob("*/*") if p.parent.name != "single")
    assert len(singles) == 2 and len(sweeps) == 2, (singles, sweeps)


RACE = """
import sys, time
from pathlib import Path
import mlflow.store.tracking.sqlalchemy_store  # imported before the start: only the store races
from src.tracking import store

uri, folder, me = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
(folder / f"ready.{me}").touch()
while not (folder / "go").exists():
    time.sleep(0.005)
experiment_id = store.ensure_experiment(uri, "gpubench")
store.client(uri).create_run(experiment_id, run_name=f"racer {me}")
"""


@pytest.mark.slow  # a drill under load or outage: CI's slow set (README)
def test_processes_that_open_a_new_store_at_once_all_get_their_runs_in(tmp_path):
    """MLflow creates the database's tables when a process first opens it; four at once raced."""
    uri = f"sqlite:///{tmp_path}/mlruns/mlflow.db"
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACE, uri, str(tmp_path), str(n)],
            cwd=PROJECT_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for n in range(4)
    ]
    deadline = time.monotonic() + 180
    while len(list(tmp_path.glob("ready.*"))) < len(racers):
        assert time.monotonic() < deadline and all(r.poll() is None for r in racers)
        time.sleep(0.05)
    (tmp_path / "go").touch()
    outputs = [r.communicate(timeout=180)[0] for r in racers]
    assert [r.returncode for r in racers] == [0, 0, 0, 0], "\n".join(o[-1500:] for o in outputs)
    assert sorted(r.info.run_name for r in read_runs(uri)) == [f"racer {n}" for n in range(4)]


COMPARE_OUT = OmegaConf.load(PROJECT_ROOT / "conf" / "compare.yaml")._get_node("out")._value()


@pytest.mark.slow  # three compares at once on a shared host: CI's slow set (README)
def test_compares_started_in_the_same_second_each_own_a_folder_and_log_what_they_computed(tmp_path):
    """Three baselines at once: each report folder, and each report run's files, are its own."""
    import csv

    from test_compare import make_run

    from src.tracking import store

    uri = f"sqlite:///{tmp_path}/mlruns/mlflow.db"
    client = store.client(uri)
    experiment_id = store.ensure_experiment(uri, "gpubench")
    for gpu, figure in (("rtx3090", 100.0), ("a6000", 150.0), ("a100", 300.0)):
        make_run(client, experiment_id, gpu, 1, "resnet50", "vision", "fp32", figure, {})
    out = COMPARE_OUT.replace("${project_root:}", str(tmp_path))
    baselines = ["rtx3090", "a6000", "a100"]
    clis = [
        SameSecond([f"baseline={b}", "tag_runs=false", f"out='{out}'"], tmp_path, uri, "src.compare")
        for b in baselines
    ]
    for cli in clis:
        assert cli.wait() == 0, cli.output[-3000:]
    folders = sorted(tmp_path.glob("multirun/compare/*/*"))
    assert len(folders) == 3, folders
    for folder in folders:
        with open(folder / "relative_throughput.csv", newline="") as handle:
            assert len({row["baseline_gpu"] for row in csv.DictReader(handle)}) == 1
    reports = [r for r in read_runs(uri, "gpubench-reports") if r.data.tags.get("report") == "true"]
    assert sorted(r.data.tags["baseline"] for r in reports) == sorted(baselines)
    for run in reports:  # the CSV a report run logged was computed against its own baseline
        logged = client.download_artifacts(run.info.run_id, "relative_throughput.csv", str(tmp_path / run.info.run_id))
        with open(logged, newline="") as handle:
            assert {row["baseline_gpu"] for row in csv.DictReader(handle)} == {run.data.tags["baseline"]}


PLAIN_CLIENT_CREATING = """
import sys, time
from pathlib import Path
from alembic.runtime import migration
from mlflow.tracking import MlflowClient

uri, folder = sys.argv[1], Path(sys.argv[2])
stamp, held = migration.HeadMaintainer.update_to_step, []

def held_once(self, step):
    # MLflow's first migration has changed the tables, not yet recorded it: held there until released
    if not held:
        held.append(step)
        (folder / "creating").touch()
        while not (folder / "release").exists():
            time.sleep(0.05)
    return stamp(self, step)

migration.HeadMaintainer.update_to_step = held_once
print(len(MlflowClient(uri).search_experiments()), "experiment(s)")
"""


@pytest.mark.slow  # a drill under load or outage: CI's slow set (README)
def test_a_new_store_that_a_plain_mlflow_client_is_creating_is_waited_for(tmp_path):
    """A plain MLflow client (`mlflow ui`, a script) creates the new store as the first job opens
    it: the job waits for it, says so, and runs. The client is held inside its migrations, where a
    busy host leaves it, until the job has said it waits; before, the job stopped: 'unreachable'."""
    uri = f"sqlite:///{tmp_path}/mlruns/mlflow.db"
    plain = subprocess.Popen(
        [sys.executable, "-c", PLAIN_CLIENT_CREATING, uri, str(tmp_path)],
        cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    wait_until(lambda: (tmp_path / "creating").exists(), [plain], lambda: plain.communicate()[0])
    job = Cli([*TINY, "model.name=tiny"], tmp_path, uri)
    wait_until(
        lambda: "another client is creating this new store" in job.output, [job.proc], lambda: job.output
    )
    (tmp_path / "release").touch()
    assert plain.wait(300) == 0, plain.communicate()[0][-3000:]
    assert job.wait() == 0, job.output[-3000:]
    (run,) = read_runs(uri)
    assert run.info.status == "FINISHED" and run.data.metrics["throughput"] > 0


@pytest.mark.slow  # a real CLI scenario (processes, a store): CI's slow set (README)
def test_an_old_store_is_reported_at_once_not_waited_for(tracking_uri):
    """An out-of-date schema alone is an old store, not another client creating a new one."""
    uri = tracking_uri
    with sqlite3.connect(uri.removeprefix("sqlite:///")) as db:
        db.execute("UPDATE alembic_version SET version_num = '451aebb31d03'")  # MLflow's first schema
    opened = subprocess.run(
        [sys.executable, "-c", f"from src.tracking import store; store.client({uri!r})"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert opened.returncode != 0
    assert "out-of-date database schema (found version 451aebb31d03" in opened.stderr, opened.stderr[-2000:]
    assert "another client is creating" not in opened.stdout + opened.stderr


def wait_until(condition, procs: list[subprocess.Popen], output, timeout: float = 300) -> None:
    """Poll `condition` while all `procs` run (one's end, or the hang guard, fails the test)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert all(p.poll() is None for p in procs), output()[-3000:]
        assert time.monotonic() < deadline, "hang guard"
        time.sleep(0.1)


HOLD_GPU = """
import sys, time
from pathlib import Path
sys.path.insert(0, "tests")
from fake_nvml import FakeGpu, FakeNvml
sys.modules["pynvml"] = FakeNvml([FakeGpu(name="NVIDIA H200", bus_id="00000000:19:00.0", uuid=sys.argv[1])])
from conftest import compose_cfg
from src.hardware import devices, gpu_lock

devices.INHERITED_VISIBLE_DEVICES = None
selection = devices.select(compose_cfg(["gpu=h200"]).gpu, devices.list_devices())
release = Path(sys.argv[3])
with gpu_lock.exclusive(selection.devices, f"job {sys.argv[2]}"):
    print("measuring", time.time(), flush=True)
    while not release.exists():  # held until the other job is seen waiting, however slow it starts
        time.sleep(0.05)
    print("done", time.time(), flush=True)
"""


def test_two_jobs_on_one_gpu_take_turns_and_the_second_says_it_waits(tmp_path):
    """Two processes started together want the same (fake NVML) H200: one measures, then the other."""
    uuid = f"GPU-test-{tmp_path.name}-{os.getpid()}"  # a GPU of this test alone
    release, logs = tmp_path / "release", [tmp_path / f"job{n}.log" for n in (1, 2)]
    jobs = []
    for n, log in enumerate(logs, 1):
        with open(log, "w") as out:
            jobs.append(
                subprocess.Popen(
                    [sys.executable, "-c", HOLD_GPU, uuid, str(n), str(release)],
                    cwd=PROJECT_ROOT,
                    env={**os.environ, "COLUMNS": "200", "PYTHONUNBUFFERED": "1"},
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            )
    texts = lambda: " ".join(log.read_text() for log in logs)  # noqa: E731
    # whichever measures first, the other finds the GPU taken
    wait_until(lambda: "measuring" in texts() and "waiting for GPU" in texts(), jobs, texts)
    release.touch()
    assert [j.wait(300) for j in jobs] == [0, 0], texts()
    outputs = [log.read_text() for log in logs]
    windows = []
    for output in outputs:
        times = {
            line.split()[0]: float(line.split()[1])
            for line in output.splitlines()
            if line[:4] in ("meas", "done")
        }
        windows.append((times["measuring"], times["done"]))
    first, second = sorted(windows)
    assert second[0] >= first[1]  # the second measured only after the first had finished
    waiter = outputs[windows.index(second)]
    assert "waiting for GPU 00000000:19:00.0 (NVIDIA H200): job" in waiter
    assert "is running on it" in waiter and "GPU 00000000:19:00.0 is free" in waiter


def test_a_gpu_job_launches_its_ranks_holding_its_gpus_lock(tmp_path, monkeypatch):
    import fcntl

    from conftest import compose_cfg
    from fake_nvml import FakeGpu, FakeNvml, install

    from src.hardware import devices, gpu_lock
    from src.run import job, launch

    uuid = f"GPU-test-{tmp_path.name}-{os.getpid()}"
    install(monkeypatch, FakeNvml([FakeGpu(name="NVIDIA H200", bus_id="00000000:19:00.0", uuid=uuid)]))
    monkeypatch.setattr(devices, "INHERITED_VISIBLE_DEVICES", None)
    for variable in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"):  # _launch sets them for its ranks
        monkeypatch.setenv(variable, "")
    cfg = compose_cfg(["gpu=h200", "model=resnet50", "precision=amp"])
    selection = devices.select(cfg.gpu, devices.list_devices())

    class Launched(Exception):
        pass

    def launch_ranks(*args):
        with open(gpu_lock.LOCK_DIR / f"{uuid}.lock") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise Launched("held") from None
        raise Launched("free")

    monkeypatch.setattr(launch, "launch_ranks", launch_ranks)
    with pytest.raises(Launched, match="held"):
        job._launch(cfg, selection, tmp_path, "h200x1-resnet50-amp", time.time())


@pytest.mark.gpu
def test_two_jobs_started_together_on_one_h200_take_turns(tmp_path):
    """On a host with an H200: the second job waits for the GPU, says so, and both measure alone
    (their figures agree). Run: python -m pytest -m gpu tests/test_concurrency.py -k take_turns"""
    from src.hardware import devices

    if not any("H200" in d.name for d in devices.list_devices()):
        pytest.skip("no H200 here")
    uri = f"sqlite:///{tmp_path}/mlruns/mlflow.db"
    from src.tracking import store

    store.ensure_experiment(uri, "gpubench")
    args = [
        "gpu=h200",
        "model=resnet50",
        "precision=amp",
        "benchmark.time_limit_s=20",
        "benchmark.rerun=true",
    ]
    clis = [SameSecond(args, tmp_path, uri), SameSecond(args, tmp_path, uri)]
    for cli in clis:
        assert cli.wait() == 0, cli.output[-3000:]
    waited = [cli for cli in clis if "waiting for GPU" in cli.output]
    assert len(waited) == 1 and "is free: h200x1-resnet50-amp starts" in waited[0].output
    runs = [r for r in read_runs(uri) if r.info.status == "FINISHED"]
    assert len(runs) == 2
    low, high = sorted(r.data.metrics["throughput"] for r in runs)
    assert low / high > 0.9  # two jobs sharing the GPU would each see about half
