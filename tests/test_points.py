"""The point declared once (src/config/points.py): the resume hash, compare's point, the setting tags
and the variant labels follow it."""

from __future__ import annotations

import json

import pytest
from omegaconf import OmegaConf

from src.compare.runs import RunRecord, aggregate, to_record
from src.config import points
from src.config.finalise import finalize
from src.results import recorded
from src.run import resume
from src.run.prepare import prepare
from src.tracking.job_run import flatten
from tests.conftest import compose_cfg, read_back


def logged_params(cfg) -> dict[str, str]:
    """The params a job logs for this config, as MLflow stores them, with the batch that ran."""
    return {k: str(v) for k, v in flatten(cfg).items()} | {"batch_size": str(cfg.model.batch_size)}


@pytest.fixture
def fake_knob(monkeypatch):
    """A measured setting added after runs were logged, at default 0, tagged `fake_knob`."""
    monkeypatch.setitem(
        points.KEYS, "benchmark.fake_knob", points.Declared(points.MEASURED, tag="fake_knob", default=0)
    )

    base = OmegaConf.to_container(finalize(compose_cfg(["gpu=cpu", "model=gpt2"])), resolve=True)

    def config(value):
        data = json.loads(json.dumps(base))
        if value is not None:
            data["benchmark"]["fake_knob"] = value
        return OmegaConf.create(data)

    return config


def record(params: dict[str, str], throughput: float) -> RunRecord:
    tags = {"gpu": "cpu", "gpu_count": "1", "model": "gpt2", "category": "language", "precision": "fp32"}
    return to_record(read_back(tags, params, {"throughput": throughput}, run_id=str(throughput)))


def test_a_measured_key_declared_once_reaches_hash_point_tags_and_labels(fake_knob):
    before, default, set_ = fake_knob(None), fake_knob(0), fake_knob(3)
    # the hash: unchanged at the default (runs logged before the key keep theirs), its own when set
    assert resume.config_hash(default) == resume.config_hash(before)
    assert resume.config_hash(set_) != resume.config_hash(default)
    # compare's point
    assert points.point_config(logged_params(default)) == points.point_config(logged_params(before))
    assert ("benchmark.fake_knob", "3") in points.point_config(logged_params(set_))
    # the run's setting tags
    assert "fake_knob" not in points.setting_tags(default)
    assert points.setting_tags(set_)["fake_knob"] == 3
    # the variant labels: two points of one model told apart by the key
    labels = {m.throughput: m.variant for m in aggregate([record(logged_params(default), 1.0),
                                                         record(logged_params(set_), 2.0)])}  # fmt: skip
    assert labels == {1.0: "", 2.0: "fake_knob=3"}


def test_a_procedure_key_is_in_the_hash_but_not_the_point(monkeypatch, fake_knob):
    monkeypatch.setitem(points.KEYS, "benchmark.fake_knob", points.Declared(points.PROCEDURE, default=0))
    assert resume.config_hash(fake_knob(3)) != resume.config_hash(fake_knob(0))
    three, zero = (points.point_config(logged_params(fake_knob(n))) for n in (3, 0))
    assert three == zero
    assert points.setting_tags(fake_knob(3)) == points.setting_tags(fake_knob(0))


def test_an_undeclared_key_is_refused_by_name():
    data = OmegaConf.to_container(finalize(compose_cfg(["gpu=cpu"])), resolve=True) | {"extra": {"knob": 3}}
    with pytest.raises(LookupError, match=r"extra\.knob: no role declared in src/config/points\.py"):
        resume.config_hash(OmegaConf.create(data))


@pytest.mark.parametrize("model", ["resnet50", "ssd300", "maskrcnn", "txl_base", "gpt2", "llama", "vit_b16"])
def test_every_key_of_every_model_has_a_role(model):
    for key in flatten(finalize(compose_cfg(["gpu=h200", f"model={model}"]))):
        points.role_of(key)


@pytest.mark.parametrize("overrides", [["gpu=cpu"], ["gpu=cpu", "model=ceilings", "benchmark.compile=true"]])
def test_every_tag_a_job_opens_its_run_with_is_named_once(overrides):
    from src.run.job import _run_tags

    settings = {e.tag for e in points.KEYS.values() if e.tag} | set(points.TAGS)
    names = {v for k, v in vars(recorded).items() if k.isupper() and isinstance(v, str)} | settings
    cfg, selection = prepare(compose_cfg(overrides))
    tags = _run_tags(cfg, selection, resume.config_hash(cfg))
    assert not set(tags) - names, "tags named neither in src/results/recorded.py nor in src/config/points.py"
    assert tags[recorded.KIND] == ("ceilings" if "model=ceilings" in overrides else "training")


def test_runs_with_and_without_nvlink_sharp_are_different_points():
    from src.run.job import nccl_settings_tag

    params = {"model.name": "gpt2", "model.d_model": "768", "batch_size": "12"}
    default = points.point_config(params, {"nccl_settings": nccl_settings_tag({})})
    off = points.point_config(params, {"nccl_settings": nccl_settings_tag({"NCCL_NVLS_ENABLE": "0"})})
    assert default != off
    assert dict(off)["tag:nccl_settings"] == "NCCL_NVLS_ENABLE=0"
    assert points.label("tag:nccl_settings") == "nccl_settings"
