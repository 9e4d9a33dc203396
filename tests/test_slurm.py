"""Slurm through hydra-submitit-launcher: what the array asks for, and a real submitit sweep."""

from __future__ import annotations

import itertools
import os
import pickle
import subprocess
from unittest.mock import MagicMock, patch

import pytest
import submitit
from conftest import compose_cfg, read_runs, run_cli
from hydra.core.plugins import Plugins
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher

from hydra_plugins.gpubench_slurm import launcher as slurm_launcher
from src.config.finalise import finalize
from src.errors import ConfigError, DeviceUnavailable
from src.run import resume


def point_config(overrides: list[str], sweep_dir: str = "/sweep"):
    """A sweep point's config with its `hydra` node, as the launcher composes it (in one sweep folder:
    the launcher composes every point with the sweep's own timestamp)."""
    return compose_cfg(["hydra/launcher=slurm", f"hydra.sweep.dir={sweep_dir}", *overrides], hydra=True)


def slurm_request(overrides: list[str]) -> dict:
    """What submitit turns into #SBATCH lines for the point."""
    return slurm_launcher.slurm_request(point_config(overrides))


def test_slurm_launcher_is_a_plugin_hydra_can_instantiate():
    """Hydra builds launchers only from classes it found under `hydra_plugins`."""
    target = point_config([]).hydra.launcher._target_
    assert Plugins.instance().class_name_to_class[target] is slurm_launcher.SlurmShapesLauncher


def sweep_launcher(cls, base: list[str], sweep_dir: str):
    """A `cls` launcher as Hydra sets it up for a sweep of `base` + each point's overrides."""
    config = point_config(base, sweep_dir)
    launcher = cls(**slurm_launcher.slurm_request(config))  # Hydra passes it the launcher block
    context = MagicMock()
    context.config_loader.load_sweep_config = lambda _, point: point_config(base + point, sweep_dir)
    launcher.setup(hydra_context=context, task_function=MagicMock(), config=config)
    return launcher


def submitit_calls(launcher, points: list[list[str]]) -> tuple:
    """What `launcher.launch(points)` asks of submitit: how it builds its executor(s) and what it
    maps over them (without the Hydra state each job carries)."""
    job = MagicMock()
    job.results.return_value = ["returned"]
    executor = MagicMock()
    executor.map_array.side_effect = lambda _, *args: [job] * len(args[0])
    auto_executor = MagicMock(return_value=executor)
    with patch.object(submitit, "AutoExecutor", auto_executor):
        assert launcher.launch(points, initial_job_idx=3) == ["returned"] * len(points)
    (called, *args), _ = executor.map_array.call_args
    return called, auto_executor.call_args_list, executor.update_parameters.call_args_list, args[:4]


@pytest.mark.parametrize(
    "site",
    [
        [],
        [
            "hydra.launcher.partition=gpu",
            "hydra.launcher.account=bench",
            "hydra.launcher.mem_gb=200",
            "hydra.launcher.max_num_timeout=2",
            "+hydra.launcher.additional_parameters={mail-type: END}",
        ],
    ],
)
def test_a_sweep_of_one_shape_is_submitted_as_upstreams_launcher_submits_it(tmp_path, site):
    """hydra-submitit-launcher builds its one executor inside `launch`: for a sweep whose points all
    ask for the same resources, ours makes the very submitit calls upstream makes (a rule upstream
    changes fails here)."""
    base = ["gpu=a6000", "gpu.count=8", *site]
    points = [["precision=fp32"], ["precision=amp"]]
    upstream = sweep_launcher(SlurmLauncher, base, str(tmp_path))
    ours = sweep_launcher(slurm_launcher.SlurmShapesLauncher, base, str(tmp_path))

    expected = submitit_calls(upstream, points)
    assert submitit_calls(ours, points) == (ours, *expected[1:])
    assert expected[2][0].kwargs["slurm_gres"] == "gpu:a6000:8"  # the calls hold the shape's request


def test_the_python_key_of_upstreams_next_release_builds_the_executor(tmp_path):
    """hydra-submitit-launcher's main branch adds `python` (the job's interpreter) and, like
    `max_num_timeout`, hands it to the executor's constructor: as a job parameter submitit refuses it."""
    base = ["gpu=a6000", "+hydra.launcher.python=/opt/venv/bin/python"]
    launcher = sweep_launcher(slurm_launcher.SlurmShapesLauncher, base, str(tmp_path))
    _, (built,), (updated,), _ = submitit_calls(launcher, [["precision=fp32"]])
    assert built.kwargs["slurm_python"] == "/opt/venv/bin/python"
    assert "slurm_python" not in updated.kwargs


def test_slurm_array_asks_for_the_profiles_gpus_nodes_and_time():
    request = slurm_request(["gpu=a6000", "gpu.count=8", "launcher.nnodes=2", "gpu.slurm.time_limit_min=30"])
    assert request["gres"] == "gpu:a6000:8"
    assert request["nodes"] == 2
    assert request["tasks_per_node"] == 1  # one job process per node; it starts the node's ranks
    assert request["timeout_min"] == 30


@pytest.mark.parametrize(
    "overrides, gres, constraint",
    [
        (["gpu=h200", "gpu.count=2"], "gpu:h200:2", None),
        (["gpu=auto", "gpu.count=4"], "gpu:4", None),  # any type the partition has
        (["gpu=cpu"], None, None),
        # a site that names the type its own way, or selects GPU nodes by feature
        (["gpu=a6000", "gpu.count=2", "gpu.slurm.gres=gpu:rtx_a6000:${gpu.count}"], "gpu:rtx_a6000:2", None),
        (["gpu=rtx3090", "gpu.slurm.gres=gpu:1", "gpu.slurm.constraint=rtx3090"], "gpu:1", "rtx3090"),
    ],
)
def test_each_profile_says_how_to_ask_for_its_gpus(overrides, gres, constraint):
    request = slurm_request(overrides)
    assert (request["gres"], request["constraint"]) == (gres, constraint)


def test_time_limit_is_checked_before_the_job_starts():
    overrides = ["gpu=cpu", "gpu.slurm.time_limit_min=0"]
    with pytest.raises(ConfigError, match=r"gpu\.slurm\.time_limit_min=0: must be a positive integer"):
        finalize(compose_cfg(overrides))


def test_a_longer_time_limit_measures_the_same_point():
    """Resubmitting timed-out points with more time skips the points that already finished."""
    assert resume.config_hash(compose_cfg(["gpu=cpu"])) == resume.config_hash(
        compose_cfg(["gpu=cpu", "gpu.slurm.time_limit_min=240"])
    )
    assert resume.config_hash(compose_cfg(["gpu=cpu"])) != resume.config_hash(
        compose_cfg(["gpu=cpu", "precision=bf16"])
    )


def test_allocation_setup_gives_every_node_node_0s_rendezvous(tmp_path, monkeypatch):
    """The sbatch setup line, run by bash with a stand-in scontrol, feeds launcher.rdzv_endpoint."""
    scontrol = tmp_path / "scontrol"
    scontrol.write_text('#!/bin/sh\n[ "$1 $2" = "show hostnames" ] && printf "gpu-node07\\ngpu-node08\\n"\n')
    scontrol.chmod(0o755)
    setup = "\n".join(slurm_request(["gpu=h200", "launcher.nnodes=2"])["setup"])
    env = {
        "PATH": f"{tmp_path}:{os.environ['PATH']}",
        "SLURM_JOB_NODELIST": "gpu-node[07-08]",
        "SLURM_JOB_ID": "4123456",
    }
    out = subprocess.run(
        ["bash", "-c", f'{setup}\necho "$PET_RDZV_ENDPOINT"'],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    endpoint = out.stdout.strip()
    assert endpoint == "gpu-node07:23456"

    monkeypatch.setenv("PET_RDZV_ENDPOINT", endpoint)
    monkeypatch.setenv("SLURM_NODEID", "1")
    launcher = compose_cfg(["gpu=h200", "launcher.nnodes=2"]).launcher
    assert (launcher.rdzv_endpoint, launcher.node_rank) == ("gpu-node07:23456", 1)


def sweep_points(axes: dict[str, list[str]]) -> list[list[str]]:
    """The points of `key=a,b ...` in Hydra's basic sweeper order (the cartesian product)."""
    return [
        [f"{k}={v}" for k, v in zip(axes, values, strict=True)]
        for values in itertools.product(*axes.values())
    ]


def test_sweep_points_are_grouped_into_one_array_per_resource_shape():
    points = sweep_points(
        {
            "gpu": ["a6000", "rtx3090"],
            "gpu.count": ["1", "8"],
            "precision": ["fp32", "amp"],
            "model": ["resnet50"],
        }
    )
    groups = slurm_launcher.group_by_shape([slurm_request(p) for p in points])
    assert len(groups) == 4
    shapes = {request["gres"]: [points[i][:3] for i in members] for request, members in groups}
    # precision and model do not change what Slurm is asked for: each array holds both precisions
    assert shapes == {
        f"gpu:{gpu}:{n}": [[f"gpu={gpu}", f"gpu.count={n}", f"precision={p}"] for p in ("fp32", "amp")]
        for gpu in ("a6000", "rtx3090")
        for n in ("1", "8")
    }


@pytest.mark.parametrize(
    "axis",
    [
        "launcher.nnodes=1,2",
        "gpu.slurm.time_limit_min=30,90",
        "gpu.slurm.constraint=a6000,a6000_nvlink",  # same gres, different node feature
    ],
)
def test_nodes_time_and_constraint_are_part_of_the_shape(axis):
    key, values = axis.split("=")
    points = sweep_points({"gpu": ["a6000"], key: values.split(",")})
    groups = slurm_launcher.group_by_shape([slurm_request(p) for p in points])
    assert [members for _, members in groups] == [[0], [1]]


@pytest.mark.slow  # real job processes end to end
def test_sweep_through_submitit_local_logs_every_run(tmp_path, tracking_uri):
    """The same sweep a cluster would run, through real submitit job processes on this machine."""
    result = run_cli(
        [
            "-m",
            "hydra/launcher=submitit_local",
            "gpu=cpu",
            "model=gpt2",
            "benchmark=smoke",
            "precision=fp32,bf16",
        ],
        tmp_path,
        tracking_uri,
        timeout=400,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    submitted = [p for p in (tmp_path / "multirun" / ".submitit").iterdir() if p.name.isdigit()]
    assert len(submitted) == 2  # each job ran in a process submitit started

    runs = read_runs(tracking_uri)
    parents = [r for r in runs if r.data.tags.get("sweep") == "true"]
    children = [r for r in runs if r.data.tags.get("sweep") != "true"]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert sorted(r.data.tags["precision"] for r in children) == ["bf16", "fp32"]
    for run in children:
        assert run.info.status == "FINISHED"
        assert run.data.tags["mlflow.parentRunId"] == parents[0].info.run_id
        assert (run.data.tags["gpu"], run.data.tags["model"], run.data.tags["gpu_count"]) == (
            "cpu",
            "gpt2",
            "1",
        )
        assert run.data.metrics["throughput"] > 0


def test_a_jobs_missing_gpu_error_travels_back_from_its_node():
    """submitit pickles a Slurm job's outcome; an error that cannot be rebuilt loses its reason."""
    error = pickle.loads(pickle.dumps(DeviceUnavailable("a6000", "1 x RTX A6000", "2 x NVIDIA H200")))
    assert (type(error), str(error)) == (
        DeviceUnavailable,
        "gpu=a6000 needs 1 x RTX A6000; this host has 2 x NVIDIA H200",
    )
