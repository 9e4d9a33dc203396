"""gpu.memory_limit_gb: what is refused before any work, the point and hash it makes, the rank's share."""

from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf

from src.config import points
from src.config.finalise import finalize
from src.errors import ConfigError
from src.hardware import devices
from src.rank import autobatch
from src.rank.memory_cap import GIB, cap_fraction, cap_note
from src.run.prepare import adopt_profile, prepare
from src.run.resume import config_hash
from tests.conftest import compose_cfg, hash_before


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["gpu=rtx3090", "gpu.memory_limit_gb=30"],
            "gpu.memory_limit_gb=30.0: must be at most 24 GB, the memory of gpu=rtx3090",
        ),
        (["gpu=h200", "gpu.memory_limit_gb=0"], "gpu.memory_limit_gb=0.0: must be a positive number of GB"),
        (["gpu=h200", "gpu.memory_limit_gb=-8"], "gpu.memory_limit_gb=-8.0: must be a positive number of GB"),
        (["gpu=cpu", "gpu.memory_limit_gb=8"], "gpu.memory_limit_gb=8.0: must be null on a CPU"),
    ],
)
def test_a_cap_the_card_cannot_hold_is_refused_in_one_line(overrides, message):
    with pytest.raises(ConfigError) as info:
        finalize(compose_cfg(overrides))
    assert [line.strip() for line in str(info.value).splitlines() if "memory_limit_gb" in line] == [
        line.strip() for line in str(info.value).splitlines() if line.strip().startswith(message)
    ]
    assert message in str(info.value)


def test_caps_up_to_the_cards_memory_are_accepted():
    assert finalize(compose_cfg(["gpu=h200", "gpu.memory_limit_gb=24"])).gpu.memory_limit_gb == 24
    assert finalize(compose_cfg(["gpu=rtx3090", "gpu.memory_limit_gb=24"])).gpu.memory_limit_gb == 24


def test_auto_on_a_card_no_profile_knows_is_held_to_its_detected_memory():
    cfg = compose_cfg(["gpu=auto", "gpu.memory_limit_gb=60"])
    l40s = devices.Device(
        0, "NVIDIA L40S", "00000000:18:00.0", "GPU-l40s", 48.3
    )  # GB as NVML counts them (1e9)
    selection = devices.Selection("l40s", "cuda", [l40s], "NVIDIA L40S")
    with pytest.raises(
        ConfigError, match=r"gpu.memory_limit_gb=60.0: must be at most 45 GB, the memory of NVIDIA L40S"
    ):
        adopt_profile(cfg, selection)
    capped = OmegaConf.merge(cfg, {"gpu": {"memory_limit_gb": 40}})
    try:  # a card without a profile fails later for want of a match rule; not for its cap
        finalize(adopt_profile(capped, selection))
    except ConfigError as exc:
        assert "memory_limit_gb" not in str(exc)
    with pytest.raises(ConfigError, match="must be null on a CPU"):  # auto on a host with no GPU
        prepare(cfg, found=[])


def test_the_cap_is_part_of_the_point_and_old_runs_keep_their_hash():
    plain = finalize(compose_cfg(["gpu=h200", "model=txl_base"]))
    assert config_hash(plain) == hash_before(plain, "gpu.memory_limit_gb")
    capped = finalize(compose_cfg(["gpu=h200", "model=txl_base", "gpu.memory_limit_gb=24"]))
    assert config_hash(capped) != config_hash(plain)
    assert points.setting_tags(capped)["memory_limit_gb"] == 24
    assert "memory_limit_gb" not in points.setting_tags(plain)
    params = {"gpu.memory_limit_gb": "24.0", "gpu.memory_gb": "141", "batch_size": "16"}
    assert ("gpu.memory_limit_gb", "24.0") in points.point_config(params)
    assert dict(points.point_config({**params, "gpu.memory_limit_gb": "None"})).keys() == {"batch_size"}
    assert points.label("gpu.memory_limit_gb") == "memory_limit_gb"


def test_the_rank_holds_the_share_of_the_device_the_cap_is():
    h200 = 143771 * 2**20  # what an H200 reports, in bytes
    assert cap_fraction(24, h200) == pytest.approx(24 * GIB / h200)
    assert cap_fraction(141, h200) == 1.0  # the spec sheet's rounded 141 GB is the whole card
    assert cap_note({"gpu": {"memory_limit_gb": 24.0}}) == " under gpu.memory_limit_gb=24"
    assert cap_note({"gpu": {"memory_limit_gb": None}}) == ""


def test_a_model_that_does_not_fit_the_cap_at_batch_one_fails_naming_the_cap(monkeypatch):
    monkeypatch.setattr(autobatch, "trains", lambda *args, **kwargs: False)
    with pytest.raises(autobatch.NothingFits) as info:
        autobatch.find_batch_size(
            {"name": "txl_large"}, None, torch.device("cuda"), 1, " under gpu.memory_limit_gb=2"
        )
    assert str(info.value) == (
        "model.batch_size=auto: even a batch of 1 runs out of memory under gpu.memory_limit_gb=2: "
        "model=txl_large needs more memory than that to start; raise gpu.memory_limit_gb"
    )
