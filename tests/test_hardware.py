"""Hardware profiles and selection, on fake hosts: which GPUs a job gets, and the error when it cannot."""

from __future__ import annotations

import os

import pytest
from conftest import compose_cfg
from fake_nvml import FakeGpu, FakeNvml, install, mixed_host

from src.config.finalise import finalize
from src.config.groups.gpu import SPEC_FIGURES
from src.errors import ConfigError
from src.hardware import devices, host
from src.run.prepare import prepare

PROFILES = devices.known_profiles()  # read once: each reads every profile's file
CUDA_PROFILES = sorted(PROFILES)


@pytest.fixture(autouse=True)
def all_gpus_visible(monkeypatch):
    """Whatever CUDA_VISIBLE_DEVICES the test process started with, the fake hosts show all."""
    monkeypatch.setattr(devices, "INHERITED_VISIBLE_DEVICES", None)


def test_devices_are_listed_in_pci_bus_order_with_their_uuids(monkeypatch):
    install(monkeypatch, FakeNvml(mixed_host()))
    found = devices.list_devices()
    assert [(d.name, d.index, d.uuid) for d in found] == [
        ("NVIDIA RTX A6000", 1, "GPU-a6000"),
        ("NVIDIA GeForce RTX 3090", 0, "GPU-3090"),
    ]
    assert found[1].memory_gb == pytest.approx(24.0)


@pytest.mark.parametrize(
    "visible, expected",
    [
        (None, ["GPU-a6000", "GPU-3090"]),
        ("1", ["GPU-3090"]),  # an index counts in bus order
        ("GPU-3090,GPU-a6000", ["GPU-3090", "GPU-a6000"]),  # in the order named
        ("GPU-30", ["GPU-3090"]),  # a unique UUID prefix, as CUDA takes it
        ("0,7,1", ["GPU-a6000"]),  # CUDA ignores everything from the first unknown entry on
        ("GPU-,1", []),  # an ambiguous prefix is unknown too
        ("", []),
    ],
)
def test_an_inherited_cuda_visible_devices_limits_the_choice(monkeypatch, visible, expected):
    install(monkeypatch, FakeNvml(mixed_host()))
    monkeypatch.setattr(devices, "INHERITED_VISIBLE_DEVICES", visible)
    assert [d.uuid for d in devices.list_devices()] == expected


def test_a_card_hidden_by_cuda_visible_devices_is_named_in_the_error(monkeypatch):
    install(monkeypatch, FakeNvml(mixed_host()))
    monkeypatch.setattr(devices, "INHERITED_VISIBLE_DEVICES", "1")
    with pytest.raises(ConfigError) as info:
        devices.select(compose_cfg(["gpu=a6000"]).gpu, devices.list_devices())
    assert str(info.value) == (
        "gpu=a6000 needs 1 x RTX A6000; this host has 1 x NVIDIA GeForce RTX 3090"
        " (limited by CUDA_VISIBLE_DEVICES=1)"
    )


def test_no_nvml_means_no_devices(monkeypatch):
    install(monkeypatch, FakeNvml([], init_error=12))
    assert devices.list_devices() == []


@pytest.mark.parametrize("profile, uuid", [("a6000", "GPU-a6000"), ("rtx3090", "GPU-3090")])
def test_each_profile_gets_only_its_own_card_on_a_mixed_host(monkeypatch, profile, uuid):
    install(monkeypatch, FakeNvml(mixed_host()))
    selection = devices.select(compose_cfg([f"gpu={profile}"]).gpu, devices.list_devices())
    assert selection.profile == profile
    assert selection.device_kind == "cuda"
    assert selection.cuda_visible_devices == uuid


def test_a_card_the_host_lacks_stops_the_job_naming_want_and_have():
    h200_host = [devices.Device(0, "NVIDIA H200", "00000000:18:00.0", "GPU-h200", 141.0)]
    with pytest.raises(ConfigError) as info:
        devices.select(compose_cfg(["gpu=a6000"]).gpu, h200_host)
    assert str(info.value) == "gpu=a6000 needs 1 x RTX A6000; this host has 1 x NVIDIA H200"


def test_too_few_cards_and_no_gpu_at_all_are_named(monkeypatch):
    install(monkeypatch, FakeNvml(mixed_host()))
    with pytest.raises(ConfigError) as info:
        devices.select(compose_cfg(["gpu=a6000", "gpu.count=2"]).gpu, devices.list_devices())
    assert str(info.value) == (
        "gpu=a6000 needs 2 x RTX A6000; this host has 1 x NVIDIA RTX A6000, 1 x NVIDIA GeForce RTX 3090"
    )
    with pytest.raises(ConfigError, match="gpu=h200 needs 1 x H200; this host has no GPU that NVML can see"):
        devices.select(compose_cfg(["gpu=h200"]).gpu, [])


def test_auto_takes_the_first_card_and_tags_its_profile(monkeypatch):
    install(monkeypatch, FakeNvml(mixed_host()))
    selection = devices.select(compose_cfg(["gpu=auto"]).gpu, devices.list_devices())
    assert (selection.profile, selection.gpu_name) == ("a6000", "NVIDIA RTX A6000")
    assert selection.cuda_visible_devices == "GPU-a6000"


def test_auto_never_mixes_models_in_one_job(monkeypatch):
    install(monkeypatch, FakeNvml(mixed_host()))
    with pytest.raises(ConfigError) as info:
        devices.select(compose_cfg(["gpu=auto", "gpu.count=2"]).gpu, devices.list_devices())
    assert str(info.value).startswith("gpu=auto gpu.count=2 needs 2 x NVIDIA RTX A6000")


def test_auto_on_a_card_without_profile_uses_its_name_and_on_no_gpu_the_cpu(monkeypatch):
    install(monkeypatch, FakeNvml([FakeGpu("NVIDIA L40S", "00000000:18:00.0", "GPU-l40s")] * 2))
    selection = devices.select(compose_cfg(["gpu=auto", "gpu.count=2"]).gpu, devices.list_devices())
    assert (selection.profile, selection.gpu_name, len(selection.devices)) == ("l40s", "NVIDIA L40S", 2)
    assert devices.select(compose_cfg(["gpu=auto"]).gpu, []).device_kind == "cpu"


def test_auto_runs_with_the_found_profiles_spec_sheet(monkeypatch):
    install(monkeypatch, FakeNvml(mixed_host()))
    cfg = compose_cfg(["model=gpt2"])
    found, _ = prepare(cfg)
    assert (found.gpu.name, found.gpu.device, found.gpu.peak_tflops.fp32) == ("a6000", "cuda", 38.7)
    assert prepare(cfg, found=[])[0].gpu.precisions == ["fp32", "bf16"]  # cpu's


# NVML device names -> the one profile that must claim it (None: no profile may)
NVML_NAMES = {
    "NVIDIA RTX A6000": "a6000",
    "NVIDIA RTX 6000 Ada Generation": None,
    "NVIDIA GeForce RTX 3090": "rtx3090",
    "NVIDIA GeForce RTX 3090 Ti": None,
    "NVIDIA A100-SXM4-80GB": "a100",
    "NVIDIA A100-SXM4-40GB": "a100_40gb",
    "NVIDIA A100 80GB PCIe": "a100_pcie",
    "NVIDIA A100-PCIE-40GB": "a100_40gb_pcie",
    "NVIDIA H100 80GB HBM3": "h100",
    "NVIDIA H100 PCIe": "h100_pcie",
    "NVIDIA GeForce RTX 4090": "rtx4090",
    "NVIDIA GeForce RTX 4090 D": None,
    "Tesla V100-PCIE-32GB": "v100",
    "Tesla V100-PCIE-16GB": None,
    "Tesla V100-SXM2-16GB": "v100_sxm2",
    "Tesla V100-SXM2-32GB": None,
    "NVIDIA H100 NVL": None,
    "NVIDIA H200": "h200",
    "NVIDIA H200 NVL": None,
    "NVIDIA GH200 480GB": None,
}


@pytest.mark.parametrize("name, expected", NVML_NAMES.items())
def test_each_device_name_matches_at_most_its_own_profile(name, expected):
    claimed = [p for p, data in PROFILES.items() if devices.matches(data, name)]
    assert claimed == ([expected] if expected else [])


@pytest.mark.parametrize("profile", CUDA_PROFILES)
def test_every_cuda_profile_composes_with_a_complete_spec_sheet(profile):
    """Typed by GpuConfig (a wrong key fails here); its sources and units: tests/test_gpu_profiles.py."""
    gpu = compose_cfg([f"gpu={profile}"]).gpu
    for key in ("interconnect", *(k for k in SPEC_FIGURES if k != "price_usd")):  # price: not always published
        assert gpu[key] is not None, f"gpu/{profile}.yaml: {key} missing"
    assert {"fp32", "fp16"} <= set(gpu.peak_tflops)


def test_a_cuda_profile_without_match_is_rejected():
    with pytest.raises(ConfigError, match=r"gpu.match=\[\]: must be a non-empty list"):
        finalize(compose_cfg(["gpu=h200", "gpu.match=[]", "model=gpt2"]))


def test_cpu_ranks_share_the_cores_this_process_may_use_not_the_whole_machines():
    """Under a cpuset (Slurm's --cpus-per-task, a container) os.cpu_count() still counts every
    core: threads sized by it oversubscribe the cores the job has. benchmark.cpu_threads wins."""
    allowed = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(allowed)})
    try:
        assert host.threads_per_rank(1) == 1
        assert host.threads_per_rank(2) == 1  # never none
        assert host.threads_per_rank(1, requested=3) == 3
    finally:
        os.sched_setaffinity(0, allowed)
    assert host.threads_per_rank(1) == len(allowed)
