"""Slurm through hydra-submitit-launcher: what the array asks for, and a real submitit sweep."""

from __future__ import annotations

import os
import subprocess

import pytest
from conftest import CONF_DIR, compose_cfg, read_runs, run_cli
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from src.config.schema import register_configs


def slurm_request(overrides: list[str]) -> dict:
    """The resolved `hydra.launcher` block that submitit turns into #SBATCH lines."""
    register_configs()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose("config", overrides=["hydra/launcher=slurm", *overrides], return_hydra_config=True)
    keys = ("_target_", "gres", "constraint", "nodes", "tasks_per_node", "timeout_min", "setup")
    return {k: OmegaConf.to_container(cfg.hydra.launcher, resolve=True)[k] for k in keys}


def test_slurm_array_asks_for_the_profiles_gpus_nodes_and_time():
    request = slurm_request(["gpu=a6000", "gpu.count=8", "launcher.nnodes=2", "launcher.time_limit_min=30"])
    assert request["_target_"].endswith("SlurmLauncher")
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
