"""Shared test helpers: compose configs like the CLI does, run the real CLI into a temp store."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import gc
import hashlib
import http.server
import os
import pickle
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra._internal.config_loader_impl import ConfigLoaderImpl, get_overrides_dirname
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser

from src.config.schema import register_configs
from src.paths import PROJECT_ROOT
from tests import services

# Tests import this module as `conftest` (pytest's name for it) or as `tests.conftest`: one module either
# way, so that what it keeps per process (the composed configs, the stored schemas) is kept once.
sys.modules.setdefault("tests.conftest", sys.modules[__name__])

CONF_DIR = str(PROJECT_ROOT / "conf")
DEFAULT_SET = "not gpu and not slow"  # pyproject's addopts
WORKERS = 2


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """The default set runs on two workers when pytest-xdist is installed (the dev extras), each
    worker taking whole files, so that a module's shared fixture is made once (and the CLI sweep, whose
    tests are one file's): most tests wait on real job processes, and two workers keep two cores busy.
    Files of many tests go first, so that the last files, small ones, leave neither worker idle for
    long. The slow set (drills under load) and the GPU set (one GPU) run one test at a time, as does
    anything given `-n`."""
    if not config.pluginmanager.hasplugin("xdist") or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    if config.option.numprocesses is None and config.option.markexpr == DEFAULT_SET:
        config.option.numprocesses = WORKERS
        config.option.dist = "loadfile"


def pytest_configure(config):
    """Hermetic tests: MLflow users often export MLFLOW_TRACKING_URI (a team's server) or a token;
    neither may reach the configs composed here or the CLI runs started from here.

    No garbage collection in a process that collects the tests, until it has (xdist's controller
    collects nothing): the imports of torch, MLflow and every test module make half a million
    objects, which the collector would walk again and again (a quarter of the imports' time)."""
    if os.environ.get("PYTEST_XDIST_WORKER") or not getattr(config.option, "numprocesses", None):
        gc.disable()  # until pytest_collection_finish
    for key in [k for k in os.environ if k.startswith("MLFLOW_")]:
        del os.environ[key]
    # The CLI jobs of two workers run ranks of two threads each on two cores, and OpenMP's idle
    # threads spin: they burn the cores the other jobs wait for (a ResNet-50 smoke step took 5 s
    # instead of 0.5 s under load). Threads that sleep while idle change nothing a test asserts.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def pytest_collection_finish():
    """What collection imported lives as long as the test process: frozen, it is left out of each
    later garbage collection, which would otherwise walk over half a million objects every time (a
    quarter of a second each: model.batch_size=auto's search collects after every try). The few
    thousand cycles the imports left as garbage are frozen with it, not walked for."""
    gc.freeze()
    gc.enable()


@pytest.fixture(scope="module", autouse=True)
def frozen_between_files():
    """What lives on from one test file to the next (what later imports loaded, the test run's
    fixtures, the caches) is frozen too, once the file's garbage is collected: the files make configs
    by the thousand, every OmegaConf node a cycle with its parent, and each full collection would walk
    all that outlived the files before (a tenth of a second by the end, dozens of times)."""
    gc.collect()
    gc.freeze()


def compose_cfg(overrides: list[str] | None = None, hydra: bool = False, config_name: str = "config"):
    """The config `python -m src.train OVERRIDES` composes (`config_name="compare"`: src.compare's),
    before it is finalised (with its `hydra` node if asked): a copy of its own, which the test may
    change. Interpolations such as `oc.env` stay unresolved until read, as in a composed config.

    A compose takes a tenth of a second and most tests set a few keys over a few groups' choices, so
    Hydra composes each test run's choices once, and the keys are set on a copy as Hydra sets them:
    after the defaults list is merged, by its own `_apply_overrides_to_config` (the same update,
    schema check and error). The `hydra` node then records every override, as Hydra records them."""
    choices, keys = _split(overrides or [], hydra)
    cfg = pickle.loads(_composed(config_name, choices, hydra))
    ConfigLoaderImpl._apply_overrides_to_config(keys, cfg)
    if hydra:
        _record_overrides(cfg, overrides or [])
    return cfg


# The hydra node's keys that Hydra reads or writes itself while composing: set by Hydra's compose
HYDRA_OWN = ("hydra.searchpath", "hydra.job.", "hydra.runtime.", "hydra.overrides.")


def _split(overrides: list[str], hydra: bool) -> tuple[tuple[str, ...], list]:
    """(the overrides Hydra's defaults list takes: group choices, and the hydra node's keys where
    the config has no hydra node or Hydra reads them; the parsed overrides it leaves to
    `_apply_overrides_to_config`: keys of no config group)."""
    choices, keys = [], []
    for override in OverridesParser.create().parse_overrides(overrides):
        key = override.key_or_group
        if override.is_hydra_override():
            is_key = hydra and not key.startswith(HYDRA_OWN) and not _is_group(key)
        else:
            is_key = isinstance(override.value(), dict) or not _is_group(key)
        if is_key and not override.is_sweep_override():
            keys.append(override)
        else:
            choices.append(override.input_line)
    return tuple(choices), keys


def _record_overrides(cfg, overrides: list[str]) -> None:
    """The hydra node's record of the command line, as Hydra's compose writes it: the overrides in
    order (the hydra node's, the task's) and the job's override_dirname."""
    parsed = OverridesParser.create().parse_overrides(overrides)
    task = [o for o in parsed if not o.is_hydra_override()]
    cfg.hydra.overrides.hydra.clear()
    cfg.hydra.overrides.hydra.extend([o.input_line for o in parsed if o.is_hydra_override()])
    cfg.hydra.overrides.task.clear()
    cfg.hydra.overrides.task.extend([o.input_line for o in task])
    dirname = cfg.hydra.job.config.override_dirname
    cfg.hydra.job.override_dirname = get_overrides_dirname(
        overrides=task, kv_sep=dirname.kv_sep, item_sep=dirname.item_sep, exclude_keys=dirname.exclude_keys
    )


_composed_folder: list[Path] = []  # where this test run's workers keep what they composed (composes_shared)


@functools.cache
def _composed(config_name: str, overrides: tuple[str, ...], hydra: bool) -> bytes:
    """Hydra's compose, pickled: each test unpickles a copy of its own (faster than a deep copy).
    Kept in this test run's folder too, where the other worker finds it instead of composing again."""
    key = hashlib.sha256(repr((config_name, overrides, hydra)).encode()).hexdigest()
    kept = _composed_folder[0] / f"{key}.pickle" if _composed_folder else None
    if kept and kept.exists():
        return kept.read_bytes()
    _register_configs()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name=config_name, overrides=list(overrides), return_hydra_config=hydra)
    composed = pickle.dumps(cfg)
    if kept:
        partial = kept.with_suffix(f".{os.getpid()}")
        partial.write_bytes(composed)
        partial.replace(kept)  # whole or not there: the other worker may be reading
    return composed


@pytest.fixture(scope="session", autouse=True)
def composes_shared(tmp_path_factory):
    """The workers of one test run share what they compose (compose_cfg)."""
    folder = run_folder(tmp_path_factory) / "composed"
    folder.mkdir(exist_ok=True)
    _composed_folder.append(folder)
    yield
    _composed_folder.remove(folder)


@functools.cache
def _is_group(name: str) -> bool:
    """Whether Hydra's config repository (conf/ and the stored schemas) has the config group `name`."""
    _register_configs()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return GlobalHydra.instance().hydra.config_loader.repository.group_exists(name)


@functools.cache
def _register_configs() -> None:
    register_configs()  # the schemas stay in Hydra's store: storing them again costs each compose time


def hash_before(cfg, *keys: str) -> str:
    """The resume hash of `cfg` as a run logged before the dotted `keys` existed would have it."""
    from omegaconf import OmegaConf

    from src.run.resume import config_hash

    older = OmegaConf.to_container(cfg, resolve=True)
    for key in keys:
        group, name = key.split(".")
        del older[group][name]
    return config_hash(OmegaConf.create(older))


def cpu_hardware(ranks: int = 1, nodes: int = 1, profile: str = "cpu", threads: int | None = None) -> str:
    """The start of a CPU job's run name on this host, `cpux1t2`: `ranks` ranks per node, each with
    `threads`, else the threads benchmark.cpu_threads=null gives it (the cores shared among the node's
    ranks). With a GPU `profile`, a pretend GPU's job (tests/fake_host.py), whose ranks train on this
    CPU: `h200x1t2`."""
    from src.hardware.host import threads_per_rank
    from src.run.job import run_name

    name = run_name(profile, ranks * nodes, "m", "p", nodes=nodes, threads=threads_per_rank(ranks, threads))
    return name.removesuffix("-m-p")


@pytest.fixture
def one_thread():
    """One intra-op thread: on a shared 2-core host, two spinning threads run slower than one."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def index_away(monkeypatch):
    """PyTorch's wheel index (any index) cannot be reached: every HTTP(S) request of this process and
    its children goes through a proxy that refuses."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        proxy = f"http://127.0.0.1:{closed.getsockname()[1]}"
    for name in ("https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY"):
        monkeypatch.setenv(name, proxy)
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def http_port():
    """A plain HTTP server (not MLflow, not PostgreSQL), its log kept off the test's stderr."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()  # shut down in 50 ms
    yield server.server_address[1]
    server.shutdown()


def run_folder(tmp_path_factory) -> Path:
    """This test run's folder, shared by its workers (each has a folder of its own below it)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def made_once(tmp_path_factory, name: str, make) -> Path:
    """The folder `name` that `make(folder)` fills once per test run: the workers of one run share it
    (in the folder above their own, under a lock); a worker that finds it being made waits for it."""
    base = run_folder(tmp_path_factory)
    folder, done = base / name, base / f"{name}.done"
    with open(base / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)  # what a worker that failed making it left
            folder.mkdir()
            make(folder)
            done.touch()
    return folder


@pytest.fixture(scope="session")
def empty_store(tmp_path_factory) -> Path:
    """An MLflow sqlite store whose tables are made once: making them costs seconds per store. The
    workers of one test run share it; copy it to use it."""
    from mlflow.tracking import MlflowClient

    def make(folder: Path) -> None:
        MlflowClient(f"sqlite:///{folder}/mlflow.db").search_experiments()

    return made_once(tmp_path_factory, "empty-store", make) / "mlflow.db"


# A real CPU job of a two-layer MLP: its tiny steps meet the smoke rule in a few steps
CPU_TINY = ["gpu=cpu", "benchmark=smoke", "model=resnet50", "model._target_=tests.workloads.by_name"]
CPU_TINY += ["model.name=tiny", "benchmark.max_steps=400"]
MISSED = "benchmark.target_ci=0.000001"  # no window of a few steps gets within 1e-6


@pytest.fixture(scope="session")
def tiny_runs(tmp_path_factory, empty_store):
    """(store URI, clean run, missed run): two real CPU jobs of CPU_TINY (real ranks, started from the
    test process) made once per test run, for the tests that read a real job's record: a clean run
    whose window met its stopping rule, and a run of another point that missed it. Read them, or copy
    them into a store of the test's own (logged_copy); write nothing into theirs."""

    def make(folder: Path) -> None:
        uri = store_copy(empty_store, folder / "mlruns")
        for job, target_ci in enumerate(("benchmark.target_ci=0.5", MISSED)):
            run_job_here([*CPU_TINY, target_ci], folder / f"job{job}", uri)

    uri = f"sqlite:///{made_once(tmp_path_factory, 'tiny-runs', make) / 'mlruns' / 'mlflow.db'}"
    runs = {r.data.params["benchmark.target_ci"]: r for r in read_runs(uri)}
    clean, missed = runs["0.5"], runs["1e-06"]
    assert clean.data.tags["stop_reason"] == "ci" and missed.data.tags["stop_reason"] != "ci"
    return uri, clean, missed


def store_copy(empty_store: Path, folder: Path) -> str:
    """The URI of a copy of the empty store in `folder` (made if missing)."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(empty_store, folder / "mlflow.db")
    return f"sqlite:///{folder / 'mlflow.db'}"


@pytest.fixture
def tracking_uri(tmp_path: Path, empty_store: Path) -> str:
    """A store of the test's own, its tables made. A store made from nothing by the CLI is what
    test_cli.py's sweep, the fault sweep and the parallel jobs of test_robust.py start from."""
    return store_copy(empty_store, tmp_path / "mlruns")


# The sweep runs under this wrapper, which reports at exit whether the job process imported torch.
JOB_WATCHING_TORCH = """
import atexit, runpy, sys
atexit.register(lambda: print("torch loaded in the job process:", "torch" in sys.modules))
sys.argv = ["src.train", *sys.argv[1:]]
runpy.run_module("src.train", run_name="__main__")
"""


@pytest.fixture(scope="session")
def cli_sweep(tmp_path_factory) -> dict:
    """The one sweep of the default tests through the real command line, for what only it shows (the
    job process without torch, Hydra's multirun, the parent run, the console, a store made from
    nothing): two jobs, a vision and a language model at bf16, on a host without NVML. A job whose
    command line does not matter is run_job_here's.

    NVML is hidden so that gpu=auto finds no GPU here and on a GPU host alike; 10 ms telemetry
    samples, since a smoke run's measured window is a fraction of a second. Each rank trains on one
    thread: two threads of one rank wait on each other at every op wherever the other tests keep a
    core busy (a ResNet-50 smoke step took 6 s instead of 0.1 s). No profiled steps after the window:
    the ranks' breakdown is the same from any command line (tiny_runs' jobs profile theirs).
    """
    # the user's environment: one NCCL setting of theirs, none of those a shared host may want
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "NVSHMEM_", "TORCH_SYMM_MEM_"))}
    env["NCCL_ALGO"] = "Ring"
    tmp = tmp_path_factory.mktemp("sweep")
    (tmp / "hidden").mkdir()
    (tmp / "hidden" / "pynvml.py").write_text("raise ImportError('hidden by the test')\n")
    uri = f"sqlite:///{tmp}/mlruns/mlflow.db"
    args = ["-m", "gpu=auto", "model=resnet50,txl_base", "precision=bf16", "benchmark=smoke"]
    args += ["benchmark.cudnn_benchmark_limit=3", "benchmark.cpu_threads=1", "benchmark.breakdown_steps=0"]
    args += ["telemetry.interval_ms=10"]
    args += [f"tracking.uri={uri}", f"hydra.sweep.dir={tmp}/multirun"]
    proc = subprocess.run(
        [sys.executable, "-c", JOB_WATCHING_TORCH, *args],
        cwd=PROJECT_ROOT,
        env={**env, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(tmp / "hidden")},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    runs = read_runs(uri)
    (parent,) = [r for r in runs if r.data.tags.get("sweep") == "true"]
    children = sorted((r for r in runs if r is not parent), key=lambda r: r.info.run_name)
    return {"proc": proc, "uri": uri, "tmp": tmp, "env": env, "parent": parent, "children": children}


def run_cli(
    args: list[str], tmp_path: Path, tracking_uri: str, timeout: float = 600, module: str = "src.train"
):
    """Run `python -m <module>` as a user would, writing runs and Hydra folders under tmp_path."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    extra = [f"tracking.uri={tracking_uri}"]
    if module == "src.train":
        extra += [f"hydra.sweep.dir={tmp_path}/multirun", f"hydra.run.dir={tmp_path}/run"]
    return subprocess.run(
        [sys.executable, "-m", module, *args, *extra],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_job_here(overrides: list[str], job_dir: Path, tracking_uri: str) -> float | None:
    """One job as `python -m src.train OVERRIDES` runs it, called from this process: its config
    composed and prepared, its ranks started by torch's elastic launcher as ever. Returns what the job
    returns (its throughput). What only the command line adds (Hydra's folders, the exit status, a
    sweep's parent run, the job process without torch) is test_cli.py's sweep."""
    from src.run import job
    from src.run.prepare import prepare

    cfg = compose_cfg(overrides)
    cfg.tracking.uri = tracking_uri  # as tracking.uri=URI sets it: the overrides composed once per process
    cfg, selection = prepare(cfg)
    return job.run_job(cfg, selection, job_dir)


def read_runs(tracking_uri: str, experiment: str = "gpubench"):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    exp = client.get_experiment_by_name(experiment)
    return [] if exp is None else client.search_runs([exp.experiment_id])


def missing_service(reason: str) -> None:
    """A slow test whose service is not here: it fails in CI (which must run it), skips elsewhere."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI runs every slow test: .ci/run installs what they need)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture
def postgres_uri():
    """A fresh PostgreSQL database on 127.0.0.1 (postgresql://...), dropped with its cluster after."""
    try:
        with services.local_postgres() as uri:
            yield uri
    except services.ServiceMissing as exc:
        missing_service(str(exc))


@pytest.fixture(scope="module")
def slurm_cluster(tmp_path_factory):
    """The environment (SLURM_CONF) of a private one-node Slurm, up for the module's tests."""
    from one_node_slurm import one_node_slurm  # it imports this module's missing_service

    with one_node_slurm(tmp_path_factory.mktemp("slurm")) as env:
        yield env


@pytest.fixture
def start_server(tmp_path):
    """start_server(backend_store_uri=None, workers=1) -> a running services.TrackingServer.

    `python -m src.server` on a free loopback port with its store (sqlite unless named) and
    artifacts under tmp_path/server; stopped with its workers after the test.
    """
    with contextlib.ExitStack() as stack:

        def start(backend_store_uri: str | None = None, workers: int = 1) -> services.TrackingServer:
            server = services.TrackingServer(tmp_path / "server", backend_store_uri, workers)
            return stack.enter_context(server)

        yield start


@pytest.fixture
def server(start_server) -> str:
    """The URL of a tracking server on an sqlite store."""
    return start_server().url


def rank_report(rank: int, times: list[float], items: int = 32):
    """A rank's report as the worker writes it, its marks a second apart from 101 s."""
    from src.results.reports import RankReport

    return RankReport(
        rank=rank,
        pid=1000 + rank,
        world_size=2,
        step_times_s=times,
        items_per_step=items,
        flops_per_item=1e9,
        batch_size=8,
        loss_first=7.0,
        loss_last=6.0,
        all_finite=True,
        stop_reason="ci",
        precision_math={},
        device_name="x",
        runtime_versions={"cuda": "none"},
        peak_memory_gb=10.0 + rank,
        rank_started=102.0 + rank,
        built=103.0 + rank,
        first_step_done=105.0 + rank,
        window_start=110.0 + rank,
        window_end=120.0 + rank,
        agent_ready=101.0,
    )


def read_back(tags: dict | None = None, params: dict | None = None, metrics: dict | None = None, run_id="r"):
    """A run as src.results.recorded reads it, from the tags, params and metrics an MLflow run would hold."""
    from types import SimpleNamespace

    from src.results import run_result

    info = SimpleNamespace(run_id=run_id, run_name=run_id, status="FINISHED", start_time=0)
    data = SimpleNamespace(tags=tags or {}, params=params or {}, metrics=metrics or {})
    return run_result.read(SimpleNamespace(info=info, data=data))


def spec_of(gpu: str, precision: str, tf32_math: bool, params: dict):
    """The spec sheet a run of `gpu` that logged `params` is judged by."""
    tags = {"gpu": gpu, "precision": precision, "math_matmul_tf32": str(tf32_math)}
    return read_back(tags, {k: str(v) for k, v in params.items()}).spec


def logged_copy(
    run,
    uri: str,
    tags: dict | None = None,
    params: dict | None = None,
    dropped: tuple = (),
    experiment="gpubench",
) -> str:
    """A real run's record logged again, FINISHED, into `experiment` of the store at `uri`, with tags
    or params changed and tags dropped: the run as another install, host or setting would have logged it."""
    from mlflow.entities import Metric, Param, RunTag
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    found = client.get_experiment_by_name(experiment)
    experiment_id = found.experiment_id if found else client.create_experiment(experiment)
    kept = {k: v for k, v in run.data.tags.items() if k not in dropped and not k.startswith("mlflow.")}
    copy = client.create_run(experiment_id, run_name=run.info.run_name)
    client.log_batch(
        copy.info.run_id,
        metrics=[Metric(k, v, 0, 0) for k, v in run.data.metrics.items()],
        params=[Param(k, str(v)) for k, v in (run.data.params | (params or {})).items()],
        tags=[RunTag(k, str(v)) for k, v in (kept | (tags or {})).items()],
    )
    client.set_terminated(copy.info.run_id, "FINISHED")
    return copy.info.run_id


@pytest.fixture
def drawn(monkeypatch):
    """Every matplotlib figure a chart function saves, as it was drawn: a chart test reads what the
    chart shows (its bars, lines, labels, colours) from the figure itself."""
    from matplotlib.figure import Figure

    saved, save = [], Figure.savefig

    def keep(fig, *args, **kwargs):
        saved.append(fig)
        return save(fig, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", keep)
    return saved
