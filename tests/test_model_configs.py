"""Model configs: every one declares the contract, bad sizes fail up front, and a new model runs
end to end through the CLI."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from src.config.finalise import finalize
from src.config.groups.model import target_exists
from src.config.groups.precision import PRECISIONS
from src.errors import ConfigError
from src.paths import PROJECT_ROOT
from tests.conftest import compose_cfg

MODELS = PROJECT_ROOT / "conf" / "model"
MODEL_NAMES = sorted(p.stem for p in MODELS.glob("*.yaml"))
# read from the files, not composed: collection runs in every test process
VISION_MODELS = [n for n in MODEL_NAMES if "image_size" in OmegaConf.load(MODELS / f"{n}.yaml")]


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_model_config_declares_the_contract(name):
    model = compose_cfg([f"model={name}"]).model
    assert target_exists(model._target_)
    assert set(model.batch_sizes) == set(PRECISIONS)
    smoke = compose_cfg([f"model={name}", "benchmark=smoke"]).model
    assert smoke.batch_size, "the smoke size must name its batch"
    assert smoke != model


@pytest.mark.parametrize("name", VISION_MODELS)
def test_image_too_small_for_the_model_is_refused_naming_its_minimum(name):
    """Below its minimum a model trains on garbage (ResNet-50 at 3 px: NaN, reported as diverged)."""
    minimum = compose_cfg([f"model={name}"]).model.min_image_size
    with pytest.raises(ConfigError) as err:
        finalize(compose_cfg(["gpu=cpu", f"model={name}", "model.image_size=3"]))
    assert f"model.image_size=3: must be >= {minimum} for {name}" in str(err.value)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["model=txl_base", "model.cutoffs=[19997,10]"], "model.cutoffs=[19997, 10]: must be increasing"),
        (["model=txl_base", "model.cutoffs=[19997,300000]"], "below model.vocab_size (267735)"),
        (
            ["model=txl_large", "model.cutoffs=[19997,39997,199997]", "model.div_val=64"],
            "model.div_val=64: must be small enough",
        ),
        (["model=txl_base", "model.mem_len=-1"], "model.mem_len=-1: must be an integer >= 0"),
        (["model=txl_large", "model.dropout=1.5"], "model.dropout=1.5: must be a probability"),
        (["model=llama", "model.n_kv_head=5"], "model.n_kv_head=5: must be a divisor of model.n_head (32)"),
        (["model=bert_large", "model.n_head=7"], "model.n_head=7: must be a divisor of model.d_model (1024)"),
        (
            ["model=vit_b16", "model.image_size=200"],
            "model.image_size=200: must be a multiple of model.patch_size",
        ),
        (["model=ssd300", "model.image_size=200"], "model.image_size=200: must be >= 264 for ssd300"),
        (["model=vit_b16", "model._target_=src.models.vision.vit"], "model._target_='src.models.vision.vit'"),
        (["model=ssd300", "model.backbone=vgg16"], "model.backbone='vgg16': must be one of resnet18"),
        (["model=maskrcnn", "model.min_size=2000"], "model.min_size=2000: must be <= model.max_size (1333)"),
        (["model=maskrcnn", "model.objects_per_image=8"], "model.objects_per_image=8: must be >= 128"),
        (["model=maskrcnn", "model.positive_fraction=1.5"], "model.positive_fraction=1.5: must be a share"),
        (
            ["model=maskrcnn", "model.rois_per_image=64", "model.objects_per_image=15"],
            "model.objects_per_image=15: must be >= 16",
        ),
        (["model=gpt2", "benchmark.channels_last=true"], "benchmark.channels_last=True: must be false for"),
        (
            ["model=ssd300", "benchmark.cudnn_benchmark_limit=-1"],
            "benchmark.cudnn_benchmark_limit=-1: must be an",
        ),
        (  # refused before the limit is dropped for a model without autotuning
            ["model=maskrcnn", "benchmark.cudnn_benchmark_limit=-1"],
            "benchmark.cudnn_benchmark_limit=-1: must be an",
        ),
        (
            ["model=resnet50", "gpu=a6000", "+gpu.batch_sizes.resnet50.fp64=8"],
            "keyed by fp32, tf32, amp, bf16",
        ),
    ],
)
def test_bad_model_values_fail_naming_the_key(overrides, message):
    cfg = compose_cfg(["gpu=h200", *overrides])
    with pytest.raises(ConfigError) as err:
        finalize(cfg)
    assert message in str(err.value)


def test_gpu_profile_batch_sizes_override_the_model_defaults():
    """a6000 and rtx3090 carry Lambda's per-task batch sizes; other cards use the model's own."""
    for gpu in ("a6000", "rtx3090"):
        cfg = finalize(compose_cfg([f"gpu={gpu}", "model=txl_large", "precision=amp"]))
        assert cfg.model.batch_size == cfg.gpu.batch_sizes.txl_large.amp
    cfg = finalize(compose_cfg(["gpu=cpu", "model=txl_large", "precision=bf16"]))
    assert cfg.model.batch_size == cfg.model.batch_sizes.bf16


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["model=resnet50"], True),
        (["model=maskrcnn"], False),  # static_shapes: false: no autotuning
        (["model=maskrcnn", "benchmark.cudnn_benchmark=true"], True),
        (["model=ssd300", "benchmark.cudnn_benchmark=false"], False),
    ],
)
def test_cudnn_autotuning_follows_the_model_unless_set(overrides, expected):
    cfg = finalize(compose_cfg(["gpu=h200", *overrides]))
    assert cfg.benchmark.cudnn_benchmark is expected


@pytest.mark.parametrize(("model", "limit"), [("ssd300", 6), ("maskrcnn", None)])
def test_a_search_limit_stays_only_where_autotuning_searches(model, limit):
    """A sweep of all models with a limit runs Mask R-CNN (no autotuning) without the setting."""
    cfg = finalize(compose_cfg(["gpu=h200", f"model={model}", "benchmark.cudnn_benchmark_limit=6"]))
    assert cfg.benchmark.cudnn_benchmark_limit == limit
