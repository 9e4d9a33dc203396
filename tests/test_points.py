"""The point declared once (src/config/points.py): the resume hash, compare's point, the setting tags
and the variant labels follow it, and runs logged before it keep their hashes and points.

tests/data/runs_b6bf398.json was captured with the code of b6bf398 (before the declaration): two
CPU smoke runs as MLflow stored them (tags, params, config.yaml, the point compare made of them),
and, for 28 composed configs across models, precisions and settings, the hash, point and setting
tags that code derived.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf

from src import recorded
from src.compare.runs import RunRecord, aggregate, measured_config, to_record
from src.config import points
from src.config.finalise import finalize
from src.run import resume
from src.run.prepare import prepare
from src.tracking.job_run import flatten
from tests.conftest import compose_cfg, spec_of

STORED = json.loads((Path(__file__).parent / "data" / "runs_b6bf398.json").read_text())


def as_then(overrides: list[str]) -> list[str]:
    """The command line as b6bf398 read it: fp32 was the default precision then (now precision=auto)."""
    return overrides if any(o.startswith("precision=") for o in overrides) else [*overrides, "precision=fp32"]


def as_point(stored: list) -> tuple:
    gpu, count, model, precision, source, config = stored
    return (gpu, count, model, precision, source, tuple(tuple(pair) for pair in config))


def logged_params(cfg) -> dict[str, str]:
    """The params a job logs for this config, as MLflow stores them, with the batch that ran."""
    return {k: str(v) for k, v in flatten(cfg).items()} | {"batch_size": str(cfg.model.batch_size)}


@pytest.mark.parametrize("case", STORED["composed"], ids=lambda c: " ".join(c["overrides"]))
def test_configs_hash_tag_and_compare_as_they_did_before_the_declaration(case):
    cfg = finalize(compose_cfg(as_then(case["overrides"])))
    assert resume.config_hash(cfg) == case["config_hash"]
    assert measured_config(logged_params(cfg)) == tuple(tuple(pair) for pair in case["point_config"])
    assert {k: str(v) for k, v in points.setting_tags(cfg).items()} == case["setting_tags"]


def without_keys_added_since(config: dict, then: dict, prefix: str = "") -> dict:
    """Today's config less the keys the stored one lacks that cannot change its hash: plumbing, or
    at the default they were declared `since`."""
    kept = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if key not in then:
            entry = points.role_of(name)
            if entry.role == points.PLUMBING or points.at_since_default(entry, value):
                continue
            kept[key] = value
        elif isinstance(value, dict) and isinstance(then[key], dict):
            kept[key] = without_keys_added_since(value, then[key], f"{name}.")
        else:
            kept[key] = value
    return kept


@pytest.fixture
def stored_runs(tracking_uri):
    """The b6bf398 runs, put back into a store as MLflow held them."""
    client = MlflowClient(tracking_uri)
    experiment_id = client.create_experiment("gpubench")
    ids = []
    for stored in STORED["runs"]:
        run = client.create_run(experiment_id, run_name=stored["run_name"])
        run_id = run.info.run_id
        client.log_batch(
            run_id,
            metrics=[Metric(k, v, 0, 0) for k, v in stored["metrics"].items()],
            params=[Param(k, v) for k, v in stored["params"].items()],
            tags=[RunTag(k, v) for k, v in stored["tags"].items()],
        )
        client.set_terminated(run_id, "FINISHED")
        ids.append(run_id)
    return client, ids


def test_a_run_from_before_the_declaration_keeps_its_hash_and_compares_as_its_point(
    stored_runs, tracking_uri, tmp_path, monkeypatch, capsys
):
    """Its hash finds it; it is not this job's point only for what it never recorded (a CPU job's
    processor and threads), which the job says before it measures again."""
    from src.run import job, launch
    from src.tracking import job_run

    class Opened(Exception):
        """Stands in for opening the run: only whether the job measures matters here."""

    def new_run(*args, **kwargs):
        raise Opened

    monkeypatch.setattr(job_run, "JobRun", new_run)
    monkeypatch.setattr(launch, "prestart", lambda *args: None)  # no rank will start
    client, ids = stored_runs
    for stored, run_id in zip(STORED["runs"], ids, strict=True):
        cfg, selection = prepare(compose_cfg([*as_then(stored["overrides"]), f"tracking.uri={tracking_uri}"]))
        then = OmegaConf.to_container(OmegaConf.create(stored["config_yaml"]))
        now = OmegaConf.to_container(cfg, resolve=True)
        assert points.hashed(now) == points.hashed(then)  # the same config, plumbing (tracking) aside
        today = without_keys_added_since(OmegaConf.to_container(cfg, resolve=True), then)
        then["tracking"]["uri"] = today["tracking"]["uri"] = "URI"
        assert today == then
        with pytest.raises(Opened):
            job.run_job(cfg, selection, tmp_path)
        said = " ".join(capsys.readouterr().out.split())
        assert f"run {run_id} of this config ran with cpu=unrecorded, cpu_threads=unrecorded, this job with cpu=" in said
        # the stack it logged (torch, CUDA, ... as tags) joins the point it had
        record = to_record(recorded.read(client.get_run(run_id)))
        stack = {
            f"tag:{name}": stored["tags"][name] for name in points.STACK.values() if name in stored["tags"]
        }
        assert record.point[:5] == as_point(stored["point"])[:5]
        assert record.config == tuple(sorted((dict(as_point(stored["point"])[5]) | stack).items()))
        assert dict(record.stack)["torch"] == stored["tags"]["torch_version"]


@pytest.fixture
def fake_knob(monkeypatch):
    """A measured setting added after runs were logged, at default 0, tagged `fake_knob`."""
    monkeypatch.setitem(
        points.KEYS, "benchmark.fake_knob", points.Declared(points.MEASURED, tag="fake_knob", since=0)
    )

    base = OmegaConf.to_container(finalize(compose_cfg(["gpu=cpu", "model=gpt2"])), resolve=True)

    def config(value):
        data = json.loads(json.dumps(base))
        if value is not None:
            data["benchmark"]["fake_knob"] = value
        return OmegaConf.create(data)

    return config


def record(params: dict[str, str], throughput: float) -> RunRecord:
    return RunRecord(
        run_id=str(throughput), gpu="cpu", gpu_count=1, model="gpt2", category="language",
        precision="fp32", source="measured", unit="tokens/s", config=measured_config(params),
        throughput=throughput, tf32_math=False, per_watt=None, per_watt_basis=None, per_kusd=None,
        smoke=False, ci_missed=None, anomaly_tag=None, spec=spec_of("cpu", "fp32", False, params),
    )  # fmt: skip


def test_a_measured_key_declared_once_reaches_hash_point_tags_and_labels(fake_knob):
    before, default, set_ = fake_knob(None), fake_knob(0), fake_knob(3)
    # the hash: unchanged at the default (runs logged before the key keep theirs), its own when set
    assert resume.config_hash(default) == resume.config_hash(before)
    assert resume.config_hash(set_) != resume.config_hash(default)
    # compare's point
    assert measured_config(logged_params(default)) == measured_config(logged_params(before))
    assert ("benchmark.fake_knob", "3") in measured_config(logged_params(set_))
    # the run's setting tags
    assert "fake_knob" not in points.setting_tags(default)
    assert points.setting_tags(set_)["fake_knob"] == 3
    # the variant labels: two points of one model told apart by the key
    labels = {m.throughput: m.variant for m in aggregate([record(logged_params(default), 1.0),
                                                         record(logged_params(set_), 2.0)])}  # fmt: skip
    assert labels == {1.0: "", 2.0: "fake_knob=3"}


def test_a_procedure_key_is_in_the_hash_but_not_the_point(monkeypatch, fake_knob):
    monkeypatch.setitem(points.KEYS, "benchmark.fake_knob", points.Declared(points.PROCEDURE, since=0))
    assert resume.config_hash(fake_knob(3)) != resume.config_hash(fake_knob(0))
    assert measured_config(logged_params(fake_knob(3))) == measured_config(logged_params(fake_knob(0)))
    assert points.setting_tags(fake_knob(3)) == points.setting_tags(fake_knob(0))


def test_an_undeclared_key_is_refused_by_name():
    data = OmegaConf.to_container(finalize(compose_cfg(["gpu=cpu"])), resolve=True) | {"extra": {"knob": 3}}
    with pytest.raises(LookupError, match=r"extra\.knob: no role declared in src/config/points\.py"):
        resume.config_hash(OmegaConf.create(data))


@pytest.mark.parametrize("model", ["resnet50", "ssd300", "maskrcnn", "txl_base", "gpt2", "llama", "vit_b16"])
def test_every_key_of_every_model_has_a_role(model):
    for key in flatten(finalize(compose_cfg(["gpu=h200", f"model={model}"]))):
        points.role_of(key)


def test_every_tag_a_job_writes_is_named_in_the_tag_module():
    settings = {e.tag for e in points.KEYS.values() if e.tag}
    names = {v for k, v in vars(recorded).items() if k.isupper() and isinstance(v, str)} | settings
    for stored in STORED["runs"]:
        unnamed = {
            t for t in stored["tags"]
            if t not in names and not t.startswith(recorded.MATH_PREFIX) and not t.endswith(recorded.VERSION_SUFFIX)
        }  # fmt: skip
        assert not unnamed, f"{stored['run_name']}: tags not in src/recorded.py: {sorted(unnamed)}"


def test_runs_with_and_without_nvlink_sharp_are_different_points():
    from src.run.job import nccl_settings_tag

    params = {"model.name": "gpt2", "model.d_model": "768", "batch_size": "12"}
    default = points.point_config(params, {"nccl_settings": nccl_settings_tag({})})
    off = points.point_config(params, {"nccl_settings": nccl_settings_tag({"NCCL_NVLS_ENABLE": "0"})})
    assert default != off
    assert dict(off)["tag:nccl_settings"] == "NCCL_NVLS_ENABLE=0"
    assert points.label("tag:nccl_settings") == "nccl_settings"
