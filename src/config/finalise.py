"""The steps that finalise a composed config: derived switches and the batch-size rule."""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from src.config import points
from src.config.groups.precision import AUTO_PRECISION, PrecisionConfig
from src.config.validate import validate
from src.errors import ConfigError
from src.paths import PROJECT_ROOT

PRECISION_GROUP = PROJECT_ROOT / "conf" / "precision"


def finalize(cfg: DictConfig) -> DictConfig:
    """Derive the switches left null and the batch size, then validate. Returns a new config.

    Batch size: command line > the benchmark's sizes (conf/sizes/, e.g. benchmark=smoke) > gpu
    profile's per-model figure > model's per-precision default. Once per job, when its gpu profile
    is known: gpu=auto adopts the found device's first (src/run/prepare.py).
    """
    if cfg.gpu.device == "auto":
        raise ValueError("gpu=auto is finalised once its device is found: src.run.prepare.prepare(cfg)")
    cfg = cfg.copy()
    # NHWC is what tuned vision training uses on tensor cores (about 2x ResNet-50 amp on an H200)
    if cfg.benchmark.channels_last is None:
        cfg.benchmark.channels_last = cfg.model.category == "vision"
    # Autotuning picks each convolution's fastest algorithm once per shape: a gain where shapes
    # repeat, a new search every step where they do not.
    if cfg.benchmark.cudnn_benchmark is None:
        cfg.benchmark.cudnn_benchmark = cfg.model.static_shapes
    cfg = resolve_precision(cfg)
    if cfg.model.batch_size is None:
        cfg.model.batch_size = default_batch_size(cfg)
    validate(cfg)
    # A setting that means nothing without its switch (a search limit without the search) is
    # reset once checked, so a bad one is refused for every model, and a sweep of models with and
    # without the switch runs every point, logging and hashing no setting it did not use.
    points.drop_unused(cfg)
    return cfg


def resolve_precision(cfg: DictConfig) -> DictConfig:
    """precision=auto becomes the profile's default_precision group (conf/precision/<name>.yaml), so
    the run records, hashes and compares the math that ran. Left as is while gpu=auto's device is
    unknown (a point skipped for want of its GPUs is named before that)."""
    if cfg.precision.name != AUTO_PRECISION or cfg.gpu.device == "auto":
        return cfg
    path = PRECISION_GROUP / f"{cfg.gpu.default_precision}.yaml"
    if not path.exists():
        raise ConfigError(
            f"gpu.default_precision={cfg.gpu.default_precision!r}: not a precision of conf/precision/"
        )
    cfg = cfg.copy()
    cfg.precision = OmegaConf.merge(OmegaConf.structured(PrecisionConfig), OmegaConf.load(path))
    return cfg


def default_batch_size(cfg: DictConfig) -> int:
    precision = cfg.precision.name
    per_gpu = cfg.gpu.batch_sizes.get(cfg.model.name, {})
    for table in (per_gpu, cfg.model.batch_sizes):
        if precision in table:
            return table[precision]
        if "default" in table:
            return table["default"]
    raise ConfigError(
        f"model.batch_size: no default for model={cfg.model.name} precision={precision}; "
        f"set model.batch_size=N (a positive integer)"
    )
