"""Config composition, smoke sizes, batch-size precedence and validation messages."""

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from src.config.finalise import finalize, override_keys
from src.errors import ConfigError
from src.paths import PROJECT_ROOT
from tests.conftest import compose_cfg

GROUPS = {
    g: sorted(p.stem for p in (PROJECT_ROOT / "conf" / g).glob("*.yaml"))
    for g in ("gpu", "model", "precision", "benchmark")
}


@pytest.mark.parametrize("group,option", [(g, o) for g, opts in GROUPS.items() for o in opts])
def test_every_group_option_composes(group, option):
    cfg = compose_cfg([f"{group}={option}"])
    assert cfg[group].name == option
    OmegaConf.to_container(cfg, resolve=True)  # every interpolation resolves


def test_tracking_uri_is_absolute_under_project_root():
    uri = compose_cfg().tracking.uri
    assert uri == f"sqlite:///{PROJECT_ROOT}/mlruns/mlflow.db"
    assert Path(uri.removeprefix("sqlite:///")).is_absolute()


def test_smoke_shrinks_model_but_command_line_wins():
    overrides = ["gpu=cpu", "model=gpt2", "benchmark=smoke", "model.d_model=96"]
    cfg = finalize(compose_cfg(overrides), override_keys(overrides))
    smoke = compose_cfg(["model=gpt2"]).model.smoke
    assert cfg.model.d_model == 96  # from the command line, not smoke's value
    assert smoke.d_model != 96
    assert cfg.model.n_layer == smoke.n_layer and cfg.model.seq_len == smoke.seq_len
    assert cfg.model.items_per_sample == smoke.seq_len  # interpolation follows the new size
    assert cfg.benchmark.warmup_steps == 1 and cfg.benchmark.min_steps == cfg.benchmark.max_steps == 2


def test_batch_size_precedence():
    def batch(overrides):
        return finalize(compose_cfg(overrides), override_keys(overrides)).model.batch_size

    model_default = compose_cfg(["model=resnet50"]).model.batch_sizes
    assert batch(["gpu=h200", "model=resnet50", "precision=amp"]) == model_default.amp
    cpu_profile = compose_cfg(["gpu=cpu"]).gpu.batch_sizes.resnet50
    assert batch(["gpu=cpu", "model=resnet50"]) == cpu_profile.default
    assert batch(["gpu=cpu", "model=resnet50", "model.batch_size=3"]) == 3
    assert batch(["gpu=cpu", "model=resnet50", "benchmark=smoke"]) == compose_cfg().model.smoke.batch_size


@pytest.mark.parametrize(
    "override,key",
    [
        ("model.batch_size=0", "model.batch_size=0"),
        ("benchmark.min_steps=-1", "benchmark.min_steps=-1"),
        ("benchmark.max_steps=1", "benchmark.max_steps=1"),
        ("gpu.count=0", "gpu.count=0"),
        ("precision=amp", "precision='amp'"),
        ("benchmark.target_ci=2", "benchmark.target_ci=2"),
        ("tracking.uri=not-a-uri", "tracking.uri='not-a-uri'"),
        ("model.image_size=-4", "model.image_size=-4"),
    ],
)
def test_bad_values_name_key_value_and_allowed(override, key):
    overrides = ["gpu=cpu", override]
    with pytest.raises(ConfigError) as err:
        finalize(compose_cfg(overrides), override_keys(overrides))
    assert key in str(err.value)
    assert "must be" in str(err.value)


def test_misspelt_key_fails_at_composition():
    with pytest.raises(Exception, match="d_modle"):
        compose_cfg(["model=gpt2", "model.d_modle=64"])
