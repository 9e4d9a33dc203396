"""Config composition, smoke sizes, batch-size precedence and validation messages."""

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import MISSING, OmegaConf

from src.config.finalise import finalize
from src.config.groups.benchmark import BenchmarkConfig
from src.config.groups.gpu import SPEC_FIGURES, GpuConfig
from src.config.groups.launcher import LauncherConfig
from src.config.groups.model import MODEL_FAMILIES, SIZE_KEYS
from src.config.groups.precision import PrecisionConfig
from src.config.groups.telemetry import TelemetryConfig
from src.config.groups.tracking import TrackingConfig
from src.errors import ConfigError
from src.paths import PROJECT_ROOT
from tests.conftest import compose_cfg, hash_before

CONF = PROJECT_ROOT / "conf"

GROUPS = {
    g: sorted(p.stem for p in (PROJECT_ROOT / "conf" / g).glob("*.yaml"))
    for g in ("gpu", "model", "precision", "benchmark")
}


@pytest.mark.parametrize("group,option", [(g, o) for g, opts in GROUPS.items() for o in opts])
def test_every_group_option_composes(group, option):
    cfg = compose_cfg([f"{group}={option}"])
    assert cfg[group].name == option
    OmegaConf.to_container(cfg, resolve=True)  # every interpolation resolves


# a sweep's point on Slurm, as the launcher composes it
SLURM_POINT = ["hydra/launcher=slurm", "hydra.sweep.dir=/s", "+hydra.launcher.python=/p", "gpu=a6000"]


@pytest.mark.parametrize(
    "overrides, hydra",
    [
        (["model=gpt2", "benchmark=smoke", "model.d_model=96", "gpu.count=2"], False),  # keys over choices
        (["+model.extra=1", "~benchmark.repeat", "gpu=h200"], False),  # a key added, a key deleted
        (["gpu=h200", "model.batch_size=big"], False),  # a value the schema refuses
        # with the hydra node: its keys, a launcher's added key, and the record of the command line
        ([*SLURM_POINT, "gpu.count=8"], True),
        (["model=gpt2", "hydra.job.config.override_dirname.kv_sep=:", "model.d_model=96"], True),
        (["hydra.job.env_copy=[HOME]", "benchmark.repeat=2"], True),  # a key Hydra reads while composing
        (["gpu=h200", "hydra.launcher.bogus=1"], True),  # a key the hydra node refuses
    ],
)
def test_compose_cfg_is_what_hydra_composes_from_the_whole_command_line(overrides, hydra):
    """The tests' compose_cfg sets plain keys on a copy of the choices' config: the config (or the
    error) must be the one Hydra composes from the whole list, hydra node and all."""

    def composed(make) -> str:
        try:
            return OmegaConf.to_yaml(make())
        except Exception as exc:  # the same exception, saying the same
            return f"{type(exc).__name__}: {exc}"

    def by_hydra():
        with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
            return compose(config_name="config", overrides=overrides, return_hydra_config=hydra)

    assert composed(lambda: compose_cfg(overrides, hydra=hydra)) == composed(by_hydra)


def test_tracking_uri_is_absolute_under_project_root():
    uri = compose_cfg().tracking.uri
    assert uri == f"sqlite:///{PROJECT_ROOT}/mlruns/mlflow.db"
    assert Path(uri.removeprefix("sqlite:///")).is_absolute()


def test_smoke_sizes_compose_and_command_line_wins():
    """The smoke sizes are part of composition (conf/sizes/smoke/), under the command line's keys."""
    cfg = compose_cfg(["model=gpt2", "benchmark=smoke", "model.d_model=96"])
    smoke = OmegaConf.load(CONF / "sizes" / "smoke" / "gpt2.yaml")
    assert cfg.model.d_model == 96 and smoke.d_model != 96  # from the command line, not smoke's value
    assert cfg.model.n_layer == smoke.n_layer and cfg.model.seq_len == smoke.seq_len
    assert cfg.model.items_per_sample == smoke.seq_len  # interpolation follows the new size
    assert cfg.benchmark.warmup_steps == 1 and cfg.benchmark.min_steps == cfg.benchmark.max_steps == 2
    assert compose_cfg(["model=gpt2"]).model.n_layer != smoke.n_layer  # only under benchmark=smoke


def test_smoke_benchmark_states_only_what_differs_from_default():
    default = compose_cfg(["benchmark=default"]).benchmark
    smoke = yaml.safe_load((CONF / "benchmark" / "smoke.yaml").read_text())
    assert smoke.pop("defaults") == ["default", "_self_"]
    assert {k: v for k, v in smoke.items() if default.get(k) == v} == {}
    composed = compose_cfg(["benchmark=smoke"]).benchmark
    assert composed.time_limit_s == default.time_limit_s  # inherited, not repeated


def _schema_defaults(schema) -> dict:
    found = {}
    for f in dataclasses.fields(schema):
        if f.default is not dataclasses.MISSING and f.default is not MISSING:
            found[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            value = f.default_factory()
            found[f.name] = dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value
    return found


GROUP_SCHEMAS = {
    "gpu": GpuConfig,
    "precision": PrecisionConfig,
    "benchmark": BenchmarkConfig,
    "telemetry": TelemetryConfig,
    "tracking": TrackingConfig,
    "launcher": LauncherConfig,
}
# A GPU's spec sheet states every figure with its source, null ones too ("no published price").
SPEC_SHEET = {"peak_tflops", "interconnect", "sources", *SPEC_FIGURES}


def _options():
    for group, schema in GROUP_SCHEMAS.items():
        for path in sorted((CONF / group).glob("*.yaml")):
            yield path, schema
    for path in sorted((CONF / "model").glob("*.yaml")):
        [family] = [
            d["family@_here_"] for d in yaml.safe_load(path.read_text())["defaults"] if isinstance(d, dict)
        ]
        yield path, MODEL_FAMILIES[family]


@pytest.mark.parametrize(("path", "schema"), list(_options()), ids=lambda v: getattr(v, "stem", ""))
def test_a_group_option_states_only_what_differs_from_its_schemas_defaults(path, schema):
    """Each default has one place, the schema: an option that repeats one would hide a change there."""
    stated = yaml.safe_load(path.read_text()) or {}
    exempt = SPEC_SHEET if path.parent.name == "gpu" and stated.get("match") else set()
    defaults = _schema_defaults(schema)
    repeated = [k for k, v in stated.items() if k in defaults and defaults[k] == v and k not in exempt]
    assert repeated == [], f"{path.relative_to(CONF)} restates the schema's defaults of {repeated}"


def test_size_keys_are_the_families_integer_sizes():
    """A size a family declares is checked as one (a new integer size joins without a list to edit)."""
    assert {"image_size", "rois_per_image", "seq_len", "n_kv_head", "div_val"} <= set(SIZE_KEYS)
    assert not {"batch_size", "items_per_sample", "mem_len", "dropout", "backbone"} & set(SIZE_KEYS)
    with pytest.raises(ConfigError, match=r"model.rois_per_image=0: must be a positive integer"):
        finalize(compose_cfg(["model=maskrcnn", "gpu=cpu", "model.rois_per_image=0"]))


def test_batch_size_precedence():
    def batch(overrides):
        return finalize(compose_cfg(overrides)).model.batch_size

    model_default = compose_cfg(["model=resnet50"]).model.batch_sizes
    assert batch(["gpu=h200", "model=resnet50", "precision=amp"]) == model_default.amp
    cpu_profile = compose_cfg(["gpu=cpu"]).gpu.batch_sizes.resnet50
    assert batch(["gpu=cpu", "model=resnet50"]) == cpu_profile.default
    assert batch(["gpu=cpu", "model=resnet50", "model.batch_size=3"]) == 3
    smoke = OmegaConf.load(CONF / "sizes" / "smoke" / "resnet50.yaml")
    assert batch(["gpu=cpu", "model=resnet50", "benchmark=smoke"]) == smoke.batch_size
    assert batch(["gpu=cpu", "model=resnet50", "benchmark=smoke", "model.batch_size=3"]) == 3


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
        ("benchmark.cpu_threads=0", "benchmark.cpu_threads=0"),
    ],
)
def test_bad_values_name_key_value_and_allowed(override, key):
    overrides = ["gpu=cpu", override]
    with pytest.raises(ConfigError) as err:
        finalize(compose_cfg(overrides))
    assert key in str(err.value)
    assert "must be" in str(err.value)


def test_misspelt_key_fails_at_composition():
    with pytest.raises(Exception, match="d_modle"):
        compose_cfg(["model=gpt2", "model.d_modle=64"])


@pytest.mark.parametrize(
    "model,key",
    [("resnet50", "n_head"), ("gpt2", "image_size"), ("maskrcnn", "backbone"), ("llama", "dropout")],
)
def test_key_of_another_model_family_fails_at_composition(model, key):
    """Each model is typed by its family's schema: a size it does not take cannot slip into its
    params and resume hash."""
    with pytest.raises(ConfigCompositionException, match=rf"model\.{key}") as err:
        compose_cfg([f"model={model}", f"model.{key}=7"])
    assert f"Key '{key}' not in" in str(err.value.__cause__)


@pytest.mark.parametrize("override", ["+foo=1", "+model.foo=1", "+benchmark.steps=3"])
def test_key_added_with_plus_is_refused_naming_it(override):
    key, value = override.lstrip("+").split("=")
    with pytest.raises(ConfigError) as err:
        finalize(compose_cfg(["gpu=cpu", override]))
    assert f"{key}={value}: not a key of" in str(err.value)


@pytest.mark.parametrize(
    "command, message",
    [
        (["src.train", "model=nope"], "Could not find 'model/nope'; Available options in 'model': bert_large,"),
        (["src.train", "model.n_head=7", "--cfg", "job"], "Could not override 'model.n_head'; Key 'n_head' not"),
        (["src.compare", "baselin=a6000"], "Could not override 'baselin'; Key 'baselin' not in 'CompareConfig'"),
        (["src.compare", "gpus=[cpu,"], "gpus=[cpu,: not an override Hydra can read (no viable alternative"),
    ],
)
def test_command_line_that_does_not_compose_exits_2_with_one_line(command, message):
    done = subprocess.run(
        [sys.executable, "-m", *command],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"error: {done.stderr.removeprefix('error: ').strip()}"]
    assert message in done.stderr


def test_the_autotuning_limit_keeps_old_resume_hashes_until_it_is_set():
    """Runs logged before benchmark.cudnn_benchmark_limit existed measured torch's default: a null
    limit must hash as they did (else every finished point reruns), a set one must not."""
    from src.run.resume import config_hash

    cfg = finalize(compose_cfg(["gpu=h200", "model=ssd300"]))
    assert config_hash(cfg) == hash_before(cfg, "benchmark.cudnn_benchmark_limit")
    limited = finalize(compose_cfg(["gpu=h200", "model=ssd300", "benchmark.cudnn_benchmark_limit=6"]))
    assert config_hash(limited) != config_hash(cfg)


def test_cpu_threads_hash_as_runs_before_the_key_until_set_and_are_refused_on_a_gpu():
    """Runs logged before benchmark.cpu_threads shared the cores among the ranks: null must hash
    as they did; on a GPU a count is refused. (The threads that ran are tagged by the job:
    tests/test_resume_points.py.)"""
    from src.run.resume import config_hash

    cfg = finalize(compose_cfg(["gpu=cpu", "model=resnet50", "benchmark=smoke"]))
    assert config_hash(cfg) == hash_before(cfg, "benchmark.cpu_threads")
    with pytest.raises(ConfigError, match=r"benchmark.cpu_threads=1: must be null on a GPU"):
        finalize(compose_cfg(["gpu=h200", "benchmark.cpu_threads=1"]))


def test_a_repeat_is_kept_as_its_own_run_but_repeat_0_hashes_as_runs_before_the_key():
    """benchmark.repeat=0,1,2 must run three times (three hashes); repeat 0 and exclusive hash as
    runs logged before those keys existed, so finished points are not run again."""
    from src.run.resume import config_hash

    cfg = finalize(compose_cfg(["gpu=h200", "model=resnet50"]))
    assert config_hash(cfg) == hash_before(cfg, "benchmark.repeat", "benchmark.exclusive")
    hashes = {
        config_hash(finalize(compose_cfg(["gpu=h200", "model=resnet50", f"benchmark.repeat={i}"])))
        for i in range(3)
    }
    assert len(hashes) == 3
    exclusive = finalize(compose_cfg(["gpu=h200", "model=resnet50", "benchmark.exclusive=true"]))
    assert config_hash(exclusive) == config_hash(cfg)
