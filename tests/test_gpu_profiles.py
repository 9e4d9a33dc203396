"""The cards' spec sheets (conf/gpu/): every figure states where it is published, and its size
fits its unit (a figure in GB/s where MB/s was meant, MHz where GHz was, fails here)."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from src.config.groups.gpu import SPEC_FIGURES
from src.paths import PROJECT_ROOT

CARDS = sorted(
    path.stem
    for path in (PROJECT_ROOT / "conf" / "gpu").glob("*.yaml")
    if OmegaConf.load(path).get("match")  # a card, not `auto` or `cpu`
)
# What a figure in its unit can be for a training GPU of 2017-2026
PLAUSIBLE = {
    "memory_gb": (8, 300),
    "memory_bandwidth_gbs": (300, 10_000),
    "tdp_w": (70, 1_500),
    "price_usd": (300, 100_000),
    "sm_count": (20, 200),
    "boost_clock_mhz": (900, 3_200),
    "l2_cache_mb": (1, 256),
    "host_link_gbs": (15, 130),
    "gpu_link_gbs": (15, 1_000),
}
PCIE_X16_GBS = {15.75: "3.0", 31.5: "4.0", 63: "5.0"}  # each way
FP32_FLOPS_PER_SM_CLOCK = (128, 256)  # 64 FMA lanes (Volta, GA100) or 128 (GA102, Ada, Hopper)


def profile(name: str) -> dict:
    return OmegaConf.to_container(OmegaConf.load(PROJECT_ROOT / "conf" / "gpu" / f"{name}.yaml"))


def test_the_projected_cards_have_profiles():
    assert {"rtx3090", "a6000", "a100", "a100_40gb", "a100_pcie", "a100_40gb_pcie", "h100", "h100_pcie",
            "rtx4090", "v100"} <= set(CARDS)  # fmt: skip


@pytest.mark.parametrize("card", CARDS)
def test_every_figure_states_its_source(card):
    p = profile(card)
    stated = [k for k in SPEC_FIGURES if p.get(k) is not None] + ["peak_tflops"] * bool(p.get("peak_tflops"))
    sources = p.get("sources", {})
    assert [k for k in stated if not str(sources.get(k, "")).strip()] == [], f"{card}: figures without a source"
    assert set(sources) <= set(stated), f"{card}: a source for a figure it does not state"


@pytest.mark.parametrize("card", CARDS)
def test_every_figure_is_plausible_in_its_unit(card):
    p = profile(card)
    for key, (low, high) in PLAUSIBLE.items():
        assert low <= p[key] <= high if p.get(key) is not None else True, f"{card}: {key}={p.get(key)}"
    assert p["host_link_gbs"] in PCIE_X16_GBS, f"{card}: host_link_gbs is not a PCIe x16 link's rate each way"
    assert p["gpu_link_gbs"] >= p["host_link_gbs"], f"{card}: its GPUs talk at least as fast as over PCIe"
    # peak FP32 = SMs x clock x lanes: the three figures agree in their units
    per_sm_clock = p["peak_tflops"]["fp32"] * 1e12 / (p["sm_count"] * p["boost_clock_mhz"] * 1e6)
    assert any(abs(per_sm_clock / lanes - 1) < 0.03 for lanes in FP32_FLOPS_PER_SM_CLOCK), f"{card}: {per_sm_clock:.0f}"


@pytest.mark.parametrize("card", CARDS)
def test_tensor_rates_are_dense_with_fp32_accumulate(card):
    """TF32 does half the FP16 rate, BF16 the FP16 rate, none below plain FP32: a figure with
    sparsity (twice the dense one) or FP16-accumulate (twice the GeForce FP32-accumulate one) in
    one column and not the other breaks these."""
    peaks = profile(card)["peak_tflops"]
    assert peaks["fp16"] > peaks["fp32"]
    if "tf32" in peaks:
        assert peaks["fp32"] <= peaks["tf32"] and abs(peaks["fp16"] / peaks["tf32"] - 2) < 0.02
    if "bf16" in peaks:
        assert peaks["bf16"] == peaks["fp16"]


@pytest.mark.parametrize("card", CARDS)
def test_every_measured_figure_names_its_source_date_and_method_and_stays_near_its_spec_sheet(card):
    """A published measurement of dense matmul: a source a reader can open, when, how; no more than
    the spec's rate by the margin a card's boost above its rated clock allows (the RTX 3090's 108%)."""
    found = profile(card)
    for math_, figure in (found.get("measured") or {}).get("matmul_tflops", {}).items():
        assert all(str(figure[said]).strip() for said in ("source", "date", "method")), (card, math_)
        assert 0 < figure["value"] <= 1.1 * found["peak_tflops"][math_], (card, math_)


def test_the_studys_cards_carry_measured_matmul_and_a_figure_without_its_source_is_refused():
    from src.config.finalise import finalize
    from src.errors import ConfigError
    from tests.conftest import compose_cfg

    measured = profile("a6000")["measured"]["matmul_tflops"]
    assert {"bf16", "fp16"} <= set(measured) <= set(profile("a6000")["peak_tflops"])
    assert profile("rtx3090")["measured"]["matmul_tflops"]["bf16"]["value"] == 76.58
    with pytest.raises(ConfigError, match=r"gpu.measured.matmul_tflops.bf16.source='': must be non-empty"):
        finalize(compose_cfg(["gpu=a6000", "gpu.measured.matmul_tflops.bf16.source=''"]))
