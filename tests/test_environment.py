"""The environment record: GPU links, limits and clocks through a fake NVML; never the whole process env."""

from __future__ import annotations

import json

import pytest
from fake_nvml import FakeGpu, FakeNvml, install, mixed_host

from src.hardware import devices, environment

SWITCH, GPU = 2, 0


@pytest.fixture(autouse=True)
def no_package_versions(monkeypatch):
    """Importing torch and transformers for their versions is slow and beside the point here."""
    monkeypatch.setattr(environment, "software_versions", lambda: {})


def sxm_pair() -> list[FakeGpu]:
    a = FakeGpu("NVIDIA H200", "00000000:18:00.0", "GPU-a", power_limit_w=700.0)
    b = FakeGpu("NVIDIA H200", "00000000:2A:00.0", "GPU-b", power_limit_w=700.0)
    return [a, b]


def test_gpu_details_and_direct_nvlinks(monkeypatch):
    a, b = sxm_pair()
    a.nvlinks = {0: (b.bus_id, GPU), 1: (b.bus_id, GPU)}
    b.nvlinks = {0: (a.bus_id, GPU), 1: (a.bus_id, GPU)}
    install(monkeypatch, FakeNvml([a, b]))
    env = environment.capture(devices.list_devices())
    assert (env["driver"], env["cuda_driver"]) == ("550.54.15", "12.4")
    first = env["devices"][0]
    assert first["uuid"] == "GPU-a"
    assert (first["pcie_gen"], first["pcie_width"], first["power_limit_w"]) == (4, 16, 700.0)
    assert (first["ecc_enabled"], first["max_sm_clock_mhz"], first["max_mem_clock_mhz"]) == (True, 2100, 8001)
    assert [link["remote_pci_bus_id"] for link in first["nvlinks"]] == ["00000000:2a:00.0"] * 2
    assert env["topology"] == {"gpu0-gpu1": {"pcie": "PCIe host bridge", "nvlink": "2 direct links"}}


def test_nvswitch_topology(monkeypatch):
    a, b = sxm_pair()
    a.nvlinks = {i: ("00000000:c0:00.0", SWITCH) for i in range(18)}
    b.nvlinks = {i: ("00000000:c1:00.0", SWITCH) for i in range(18)}
    install(monkeypatch, FakeNvml([a, b]))
    env = environment.capture(devices.list_devices())
    assert len(env["devices"][0]["nvlinks"]) == 18
    assert env["topology"]["gpu0-gpu1"]["nvlink"] == "through NVSwitch"


def test_a_card_lacking_queries_still_gives_the_rest(monkeypatch):
    unsupported = {"nvmlDeviceGetEccMode", "nvmlDeviceGetNvLinkState", "nvmlDeviceGetTopologyCommonAncestor"}
    fake = install(
        monkeypatch,
        FakeNvml(mixed_host(), missing={"nvmlSystemGetCudaDriverVersion_v2"}, unsupported=unsupported),
    )
    env = environment.capture(devices.list_devices())
    assert env["cuda_driver"] == "12.4"  # from the older function
    assert [g["ecc_enabled"] for g in env["devices"]] == [None, None]
    assert [g["nvlinks"] for g in env["devices"]] == [[], []]
    assert env["topology"] == {"gpu0-gpu1": {"pcie": None, "nvlink": "none"}}
    assert fake.calls["nvmlDeviceGetNvLinkState"] == 2  # one try per card, not one per possible link
    assert env["devices"][1]["power_limit_w"] == 300.0


def test_only_allow_listed_environment_variables_are_recorded(monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "do-not-record")
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    env = environment.capture([])
    assert env["env"]["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert set(env["env"]) <= set(environment.ENV_ALLOWLIST)
    assert "do-not-record" not in json.dumps(env)
    assert (env["driver"], env["devices"]) == ("none", [])


def test_communication_settings_are_the_environment_over_nccls_files(monkeypatch, tmp_path):
    """NCCL's order: the environment wins, then the user's file, then the system's; debug output and
    variables of other libraries are not settings."""
    system, user = tmp_path / "system.conf", tmp_path / "user.conf"
    system.write_text("NCCL_ALGO=Tree\nNCCL_PROTO=LL\n# NCCL_NVLS_ENABLE=0\nNCCL_IB_DISABLE=1\n")
    user.write_text("NCCL_PROTO=Simple\nNCCL_ALGO=Ring\n")
    monkeypatch.setattr(environment, "NCCL_SYSTEM_CONF", system)
    environ = {
        "NCCL_CONF_FILE": str(user),
        "NCCL_ALGO": "NVLS",
        "NCCL_DEBUG": "INFO",
        "NVSHMEM_DISABLE_NVLS": "1",
        "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
        "OMP_NUM_THREADS": "4",
    }
    assert environment.communication_settings(environ) == {
        "NCCL_ALGO": "NVLS",
        "NCCL_IB_DISABLE": "1",
        "NCCL_PROTO": "Simple",
        "NVSHMEM_DISABLE_NVLS": "1",
        "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    }
    monkeypatch.setenv("HOME", str(tmp_path))  # without NCCL_CONF_FILE: ~/.nccl.conf
    (tmp_path / ".nccl.conf").write_text("NCCL_P2P_LEVEL=NVL\n")
    assert environment.communication_settings({})["NCCL_P2P_LEVEL"] == "NVL"
