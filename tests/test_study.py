"""The A6000-vs-3090 study from one command: the default sweep, and GPUs this host lacks skipped.

The CLI tests run on a pretend host (tests/fake_host.py): NVML shows an H200, so the
`gpu=a6000` and `gpu=rtx3090` points cannot run here, while `gpu=cpu` points train for real.
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import compose_cfg, read_runs, run_cli
from fake_host import gpus_env
from fake_nvml import A6000, RTX3090
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser

from src.errors import USAGE_ERROR
from src.paths import PROJECT_ROOT
from tests.conftest import cpu_hardware

CPUX1 = cpu_hardware(1)  # how this host names a CPU job of 1 rank(s)

STUDY_MODELS = ["ssd300", "resnet50", "maskrcnn", "txl_base", "txl_large", "ceilings"]
H200 = dict(name="NVIDIA H200", bus_id="00000000:17:00.0", uuid="GPU-h200", memory_total=141e9)
TINY = ["benchmark=smoke", "precision=fp32", "model=resnet50", "model._target_=tests.workloads.by_name"]


def sweep_points(args: list[str]) -> list[dict[str, str]]:
    """The jobs `python -m src.train -m ARGS` launches: the sweeper params of the config composed
    with the experiment the command line picks, then the command line, expanded by Hydra's own
    basic sweeper."""
    cfg = compose_cfg([a for a in args if a.startswith("experiment=")], hydra=True)
    params = [f"{key}={value}" for key, value in (cfg.hydra.sweeper.params or {}).items()]
    overrides = OverridesParser.create().parse_overrides(params + args)
    [jobs] = BasicSweeper.split_arguments(overrides, None)
    return [dict(o.split("=", 1) for o in job) for job in jobs]


def test_a_multirun_without_model_is_the_five_model_study_and_the_cards_ceilings():
    points = sweep_points(["gpu=a6000,rtx3090", "precision=fp32,amp"])
    assert len(points) == 6 * 2 * 2  # a ceilings point per precision: the second is a resume skip
    assert sorted({p["model"] for p in points}) == sorted(STUDY_MODELS)
    assert compose_cfg().model.name == "resnet50"  # a single run stays one ResNet-50 job


def test_model_on_the_command_line_wins_over_the_study():
    assert [p["model"] for p in sweep_points(["model=gpt2", "precision=fp32,amp"])] == ["gpt2", "gpt2"]


def fake_host_cli(args: list[str], tmp: Path, uri: str, gpus: list[dict]) -> subprocess.CompletedProcess:
    extra = [f"tracking.uri={uri}", f"hydra.sweep.dir={tmp}/multirun", f"hydra.run.dir={tmp}/run"]
    return subprocess.run(
        [sys.executable, str(PROJECT_ROOT / "tests" / "fake_host.py"), *args, *extra],
        cwd=PROJECT_ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200", **gpus_env(*gpus)},
        capture_output=True,
        text=True,
        timeout=400,
    )


@pytest.mark.slow  # a real CLI scenario (processes, a store): CI's slow set (README)
def test_points_for_gpus_the_host_lacks_are_skipped_in_one_line_and_the_rest_run(tmp_path, tracking_uri):
    result = fake_host_cli(["-m", "gpu=a6000,cpu", *TINY, "model.name=tiny"], tmp_path, tracking_uri, [H200])
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    skipped = [line for line in output.splitlines() if line.startswith("skipped ")]
    assert skipped == ["skipped a6000x1-tiny-fp32-smoke: needs 1 x RTX A6000; this host has 1 x NVIDIA H200"]
    assert "Traceback" not in output and "HYDRA_FULL_ERROR" not in output

    runs = read_runs(tracking_uri)
    [parent] = [r for r in runs if r.data.tags.get("sweep") == "true"]
    children = [r for r in runs if r.data.tags.get("sweep") != "true"]
    assert [(r.info.run_name, r.info.status) for r in children] == [(f"{CPUX1}-tiny-fp32-smoke", "FINISHED")]
    assert parent.info.status == "FINISHED"
    lines = result.stdout.splitlines()
    [row] = [
        line for line in lines if "a6000x1-tiny-fp32-smoke" in line and "SKIPPED" in line
    ]  # summary table
    # the reason is said once, on its `skipped` line above; the summary does not repeat it
    assert not [
        line
        for line in lines
        if line.strip() == "a6000x1-tiny-fp32-smoke: needs 1 x RTX A6000; this host has 1 x NVIDIA H200"
    ]


@pytest.mark.slow  # a real CLI scenario (processes, a store): CI's slow set (README)
def test_a_sweep_that_cannot_run_anything_here_exits_non_zero_without_failed_runs(tmp_path, tracking_uri):
    args = ["-m", "gpu=a6000,rtx3090", *TINY, "model.name=tiny"]
    result = fake_host_cli(args, tmp_path, tracking_uri, [H200])
    output = result.stdout + result.stderr
    assert result.returncode == USAGE_ERROR, output[-3000:]
    assert len([line for line in output.splitlines() if line.startswith("skipped ")]) == 2
    assert "error: no point of this sweep can run on this host" in result.stderr
    assert "Traceback" not in output and "HYDRA_FULL_ERROR" not in output
    runs = read_runs(tracking_uri)
    assert [r.data.tags.get("sweep") for r in runs] == ["true"]  # the parent alone: no FAILED child
    assert runs[0].info.status == "FAILED"


def test_a_sweep_starting_as_another_creates_the_experiment_uses_it(tracking_uri, monkeypatch):
    """Two workstations start on a fresh server: both look, find no experiment, both create it."""
    from mlflow.tracking import MlflowClient

    from src.tracking import store

    made_first = store.ensure_experiment(tracking_uri, "gpubench")  # the other box won the race
    looked = MlflowClient.get_experiment_by_name
    calls = []

    def this_box_looked_too_early(self, name):
        calls.append(name)
        return None if len(calls) == 1 else looked(self, name)

    monkeypatch.setattr(MlflowClient, "get_experiment_by_name", this_box_looked_too_early)
    assert store.ensure_experiment(tracking_uri, "gpubench") == made_first


@pytest.mark.slow  # two sweeps, a tracking server and compare, end to end
def test_two_workstations_one_server_then_compare(server, tmp_path):
    """The same command on an A6000 box and a 3090 box, both logging to one server; each runs its
    own points and skips the other's; then compare on either box sees both GPUs."""
    boxes = {
        "a6000-box": dict(A6000, bus_id="00000000:17:00.0"),
        "rtx3090-box": dict(RTX3090, bus_id="00000000:65:00.0", memory_total=24e9),
    }
    command = [sys.executable, str(PROJECT_ROOT / "tests" / "fake_host.py"), "-m", "gpu=a6000,rtx3090"]
    command += [*TINY, "model.name=tiny", f"tracking.uri={server}"]
    sweeps = {}
    for box, gpu in boxes.items():  # both at once, as two machines would be
        log = open(tmp_path / f"{box}.log", "w+")
        sweeps[box] = (
            subprocess.Popen(
                [*command, f"hydra.sweep.dir={tmp_path}/{box}"],
                cwd=PROJECT_ROOT,
                env={**os.environ, "PYTHONUNBUFFERED": "1", **gpus_env(gpu)},
                stdout=log,
                stderr=subprocess.STDOUT,
            ),
            log,
        )
    for box, (proc, log) in sweeps.items():
        assert proc.wait(timeout=600) == 0, (tmp_path / f"{box}.log").read_text()[-3000:]
        log.close()
    skipped = {
        box: [
            line for line in (tmp_path / f"{box}.log").read_text().splitlines() if line.startswith("skipped")
        ]
        for box in boxes
    }
    assert skipped == {
        "a6000-box": [
            "skipped rtx3090x1-tiny-fp32-smoke: needs 1 x RTX 3090; this host has 1 x NVIDIA RTX A6000"
        ],
        "rtx3090-box": [
            "skipped a6000x1-tiny-fp32-smoke: needs 1 x RTX A6000; this host has 1 x NVIDIA GeForce RTX 3090"
        ],
    }
    runs = read_runs(server)
    parents = [r for r in runs if r.data.tags.get("sweep") == "true"]
    children = sorted((r for r in runs if r.data.tags.get("sweep") != "true"), key=lambda r: r.info.run_name)
    assert [p.info.status for p in parents] == ["FINISHED", "FINISHED"]
    # the ranks train on this machine's CPU (tests/fake_host.py): the names carry their threads
    threads = CPUX1.removeprefix("cpux1")
    assert [(r.info.run_name, r.info.status, r.data.tags["gpu_name"]) for r in children] == [
        (f"a6000x1{threads}-tiny-fp32-smoke", "FINISHED", "NVIDIA RTX A6000"),
        (f"rtx3090x1{threads}-tiny-fp32-smoke", "FINISHED", "NVIDIA GeForce RTX 3090"),
    ]

    compare = run_cli(
        ["baseline=rtx3090", "include_smoke=true", f"out={tmp_path}/compare"],
        tmp_path,
        server,
        module="src.compare",
    )
    assert compare.returncode == 0, compare.stdout[-2000:] + compare.stderr[-2000:]
    with open(tmp_path / "compare" / "relative_throughput.csv", newline="") as handle:
        rows = {row["gpu"]: row for row in csv.DictReader(handle)}
    throughput = {r.data.tags["gpu"]: r.data.metrics["throughput"] for r in children}
    assert sorted(rows) == ["a6000", "rtx3090"]
    assert float(rows["a6000"]["relative"]) == pytest.approx(
        throughput["a6000"] / throughput["rtx3090"], rel=1e-3
    )
    assert rows["a6000"]["baseline_gpu"] == "rtx3090"
