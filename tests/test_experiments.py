"""Experiments (conf/experiment/) and the single job's defaults: the study as an overlay selected by
default, experiment=none, precision=auto, and the CPU dry run that `python -m src.train` runs on a
host without a GPU."""

from __future__ import annotations

import pytest
from conftest import compose_cfg
from fake_nvml import FakeGpu, FakeNvml, install
from omegaconf import OmegaConf
from test_study import STUDY_MODELS, sweep_points

from src import train
from src.config.finalise import finalize
from src.errors import ConfigError
from src.hardware import devices
from src.paths import PROJECT_ROOT
from src.run.prepare import prepare

EXPERIMENTS = sorted(p.stem for p in (PROJECT_ROOT / "conf" / "experiment").glob("*.yaml"))
H200 = FakeGpu("NVIDIA H200", "00000000:17:00.0", "GPU-h200", 141e9)


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_every_experiment_composes_and_finalises(experiment, monkeypatch):
    assert compose_cfg([f"experiment={experiment}"], hydra=True).hydra.runtime.choices.experiment == experiment
    OmegaConf.to_container(compose_cfg([f"experiment={experiment}"]), resolve=True)
    install(monkeypatch, FakeNvml([H200]))
    prepare(compose_cfg([f"experiment={experiment}"]))  # a runnable job, checked


def test_the_study_is_the_default_experiment_and_none_sweeps_only_what_is_named():
    assert compose_cfg([], hydra=True).hydra.runtime.choices.experiment == "lambda_a6000_vs_3090"
    study = sweep_points(["gpu=a6000,rtx3090", "precision=fp32,amp"])
    assert sorted({p["model"] for p in study}) == sorted(STUDY_MODELS) and len(study) == len(STUDY_MODELS) * 2 * 2
    named = sweep_points(["experiment=none", "gpu=a6000,rtx3090", "precision=fp32,amp"])
    assert [sorted(p) for p in named] == [["experiment", "gpu", "precision"]] * 4  # no model= added


def test_the_study_sets_only_its_sweep_not_the_job():
    """A point of the study is the same job as the same point named by hand: same config, same hash."""
    with_study = compose_cfg(["model=ssd300", "gpu=a6000", "precision=fp32"])
    without = compose_cfg(["experiment=none", "model=ssd300", "gpu=a6000", "precision=fp32"])
    assert OmegaConf.to_container(with_study) == OmegaConf.to_container(without)


@pytest.mark.parametrize(
    ("gpu", "expected"),
    [("gpu=h200", "amp"), ("gpu=a6000", "amp"), ("gpu=cpu", "fp32")],
)
def test_precision_auto_is_the_profiles_default_and_records_the_math_that_ran(gpu, expected):
    cfg = finalize(compose_cfg([gpu]))
    named = finalize(compose_cfg([gpu, f"precision={expected}"]))
    assert cfg.precision == named.precision  # name, autocast, scaling, peak key: as if named
    assert cfg.model.batch_size == named.model.batch_size


def test_precision_auto_on_gpu_auto_follows_the_device_found(monkeypatch):
    install(monkeypatch, FakeNvml([H200]))
    cfg = compose_cfg([])
    on_gpu, _ = prepare(cfg)
    assert (on_gpu.precision.name, on_gpu.precision.peak_key, on_gpu.model.batch_size) == ("amp", "fp16", 256)
    on_cpu, _ = prepare(cfg, found=[])
    assert (on_cpu.precision.name, on_cpu.model.batch_size) == ("fp32", 8)


def test_gpu_auto_is_finalised_once_after_its_device_is_found(monkeypatch):
    """Finalising needs the profile (precision=auto's math, the batch, the checks): gpu=auto's is the
    device found, so the config is finalised and validated once, after the device is selected."""
    from src.config import finalise

    install(monkeypatch, FakeNvml([H200]))
    validated = []
    monkeypatch.setattr(finalise, "validate", lambda cfg: validated.append(cfg.gpu.name))
    prepare(compose_cfg([]))
    assert validated == ["h200"]
    with pytest.raises(ValueError, match="gpu=auto is finalised once its device is found"):
        finalise.finalize(compose_cfg([]))


def test_a_profiles_default_precision_must_be_one_it_runs():
    with pytest.raises(ConfigError, match=r"gpu.default_precision='amp': must be one of gpu.precisions"):
        finalize(compose_cfg(["gpu=cpu", "gpu.default_precision=amp", "precision=fp32"]))
    with pytest.raises(ConfigError, match=r"precision.name='auto': must be one of fp32, tf32, amp, bf16$"):
        from src.config.validate import validate

        validate(compose_cfg(["gpu=h200"]))  # auto is resolved before a known device is checked


def test_the_cpu_dry_run_is_a_smoke_sized_job_with_a_rule_a_cpu_can_meet():
    cfg = finalize(compose_cfg(["experiment=cpu_dry_run"]))
    smoke = finalize(compose_cfg(["gpu=cpu", "benchmark=smoke"]))
    assert (cfg.gpu.name, cfg.precision.name, cfg.benchmark.name) == ("cpu", "fp32", "smoke")
    assert cfg.model == smoke.model  # smoke's sizes: the run is labelled and compared as a dry run
    assert cfg.benchmark.min_steps > smoke.benchmark.min_steps and cfg.benchmark.target_ci < 0.5


@pytest.mark.parametrize(
    ("argv", "gpus", "expected"),
    [
        ([], [], ["experiment=cpu_dry_run"]),
        (["model=gpt2"], [], ["experiment=cpu_dry_run", "model=gpt2"]),
        ([], [H200], []),  # a GPU host: the plain defaults
        (["gpu=cpu"], [], ["gpu=cpu"]),  # a named gpu is what runs
        (["experiment=none"], [], ["experiment=none"]),
        (["-m", "model=gpt2"], [], ["-m", "model=gpt2"]),  # a sweep is left as named
        (["--help"], [], ["--help"]),
        (["--cfg", "job"], [], ["--cfg", "job"]),  # prints the composition, and nothing before it
    ],
)
def test_a_single_job_left_at_gpu_auto_on_a_host_without_gpu_is_the_cpu_dry_run(
    argv, gpus, expected, monkeypatch
):
    install(monkeypatch, FakeNvml(gpus))
    monkeypatch.setattr(devices, "INHERITED_VISIBLE_DEVICES", None)
    assert train.with_cpu_dry_run(argv) == expected
