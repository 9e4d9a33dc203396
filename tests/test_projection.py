"""The projection's arithmetic on small cases, each factor worked out by hand in the comments."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from src.projection.choose import OWN, SAME, choose, nearest_source
from src.projection.model import Card, Ceilings, ProjectionRefused, SourcePoint, project, ratio_band
from src.projection.sentences import pair_sentence

SOURCE = Card("big", {"fp32": 60, "tf32": 500, "fp16": 1000}, 5000, 141, 64, 450)
TARGET = Card("small", {"fp32": 40, "tf32": 50, "fp16": 100}, 1000, 24, 32, 32)
VOLTA = Card("volta", {"fp32": 14, "fp16": 112}, 900, 32, 16, 16)
CEILINGS = Ceilings("ceil-run", {"fp32": 50, "tf32": 400, "fp16": 800})


def point(**changes) -> SourcePoint:
    fields = dict(
        label="big x1 m tf32 [batch 10]", gpu="big", model="m", precision="tf32", math="tf32", gpu_count=1,
        batch=10, throughput=100.0, interval=(90.0, 110.0),
        shares={"matmul": 0.5, "other": 0.3, "comm": 0.0, "memcpy": 0.1, "idle": 0.1},
        flops_per_item=1e12, memory_gb=20.0, run_ids=("run-1",),
        remeasure="python -m src.train gpu=big model=m precision=tf32 model.batch_size=10",
    )  # fmt: skip
    return SourcePoint(**(fields | changes))


def test_each_class_is_scaled_by_the_ratio_that_governs_it():
    """Step 10 items / 100 items/s = 0.1 s; 10 x 1e12 FLOPs at the measured 400 TFLOP/s = 0.025 s,
    half of the 0.05 s of matmul: 0.25 of the step tensor-bound, 0.25 waiting on memory.
    Target tf32 rate: 50 spec x (400 / 500 measured efficiency) = 40 -> x10; memory 5000 / 1000 -> x5;
    host link 64 / 32 -> x2; idle x1. Step ratio 0.25x10 + 0.25x5 + 0.3x5 + 0.1x2 + 0.1 = 5.55."""
    p = project(point(), SOURCE, CEILINGS, TARGET, model_error=0.1)
    scales = {f.part: (round(f.share, 6), round(f.scale, 6)) for f in p.factors}
    assert scales == {
        "matmul, tensor-bound": (0.25, 10.0),
        "matmul, waiting on memory": (0.25, 5.0),
        "other compute": (0.3, 5.0),
        "copies": (0.1, 2.0),
        "communication": (0.0, 1.0),  # one GPU: nothing to scale
        "idle": (0.1, 1.0),
    }
    assert p.step_ratio == pytest.approx(5.55)
    assert p.throughput == pytest.approx(100 / 5.55)
    assert p.projected and p.math == "tf32" and p.ceilings.run_id == "ceil-run"


def test_the_band_adds_the_measurements_interval_and_the_models_error_on_the_log_scale():
    """Measured: the wider side of (90, 110) around 100 is ln(100/90); the model's 10% on a ratio is
    ln(1.1), half its variance on each card: ln(1.1) / sqrt(2)."""
    p = project(point(), SOURCE, CEILINGS, TARGET, model_error=0.1)
    half = math.hypot(math.log(100 / 90), math.log(1.1) / math.sqrt(2))
    assert p.interval == pytest.approx((p.throughput * math.exp(-half), p.throughput * math.exp(half)))


def test_without_flops_the_whole_matmul_time_is_tensor_bound():
    p = project(point(flops_per_item=None), SOURCE, CEILINGS, TARGET, model_error=0.1)
    assert [(f.part, f.share, f.scale) for f in p.factors[:1]] == [("matmul, tensor-bound", 0.5, 10.0)]
    assert p.step_ratio == pytest.approx(0.5 * 10 + 0.3 * 5 + 0.1 * 2 + 0.1)


def test_communication_scales_by_the_gpu_link_above_one_gpu():
    shares = {"matmul": 0.5, "other": 0.2, "comm": 0.2, "memcpy": 0.0, "idle": 0.1}
    p = project(point(gpu_count=8, shares=shares, flops_per_item=None), SOURCE, CEILINGS, TARGET, 0.1)
    assert {f.part: f.scale for f in p.factors}["communication"] == pytest.approx(450 / 32)


def test_a_card_without_tf32_runs_fp32_at_its_own_rate_times_the_sources_fp32_efficiency():
    """Volta: fp32 14 x (50 / 60) = 11.67 TFLOP/s against the source's measured tf32 400."""
    p = project(point(flops_per_item=None), SOURCE, CEILINGS, VOLTA, 0.1)
    assert p.math == "fp32"
    assert p.factors[0].scale == pytest.approx(400 / (14 * 50 / 60))


def test_a_point_without_breakdown_or_ceilings_is_refused_with_the_run_to_make():
    with pytest.raises(ProjectionRefused, match="no step-time breakdown; measure it with one: python -m src.train gpu=big"):
        project(point(shares=None), SOURCE, CEILINGS, TARGET, 0.1)
    with pytest.raises(ProjectionRefused, match="python -m src.train model=ceilings gpu=big gpu.count=1$"):
        project(point(), SOURCE, None, TARGET, 0.1)
    with pytest.raises(ProjectionRefused, match="has no bf16 math"):
        project(point(precision="bf16", math="bf16"), SOURCE, CEILINGS, VOLTA, 0.1)
    with pytest.raises(ProjectionRefused, match="ceilings run ceil-run has no fp32 matmul figure"):
        project(point(), SOURCE, Ceilings("ceil-run", {"tf32": 400}), VOLTA, 0.1)


def test_a_profile_without_the_figures_is_refused_naming_them():
    with pytest.raises(ProjectionRefused, match=r"gpu=odd: its profile states no host_link_gbs, gpu_link_gbs"):
        Card.from_profile({"name": "odd", "peak_tflops": {"fp32": 1}, "memory_bandwidth_gbs": 1, "memory_gb": 1})


def test_the_target_gets_its_profiles_batch_else_its_largest_that_fits_or_the_same_batch_when_asked():
    curve = [point(batch=4, memory_gb=24.0), point(batch=16, memory_gb=48.0), point(batch=32, memory_gb=60.0)]

    def own(memory: float, batches: dict | None = None) -> list:
        return choose(curve, Card("c", {}, 1, memory, 1, 1, batch_sizes=batches or {}), OWN)

    assert [[c.point.batch for c in own(m)] for m in (24, 48, 80)] == [[4], [16], [32]]
    assert all(c.note == "" for m in (24, 48, 80) for c in own(m))
    [profiled] = own(80, {"m": {"tf32": 16}})  # the profile's batch, measured: it, not the largest
    assert (profiled.point.batch, profiled.note) == (16, "")
    [unmeasured] = own(48, {"m": {"tf32": 8}})
    assert unmeasured.point.batch == 16 and unmeasured.note == (
        "c m tf32: its profile runs it at batch 8, not measured on big; projected at batch 16, the largest "
        "measured that fits its 48 GB; measure it: python -m src.train gpu=big model=m precision=tf32 "
        "gpu.count=1 model.batch_size=8"
    )
    [small] = own(16)
    assert small.point.batch == 4 and small.note.endswith(
        "no measured batch fits its 16 GB: projected at batch 4 (needs 24 GB); measure it: python -m src.train "
        "gpu=big model=m precision=tf32 gpu.count=1 gpu.memory_limit_gb=16 model.batch_size=auto"
    )
    assert [c.point.batch for c in choose(curve, TARGET, SAME)] == [4, 16, 32]
    unlogged = [replace(p, memory_gb=None) for p in curve]  # a host that reports no peak memory
    [unknown] = choose(unlogged, Card("c", {}, 1, 16, 1, 1, batch_sizes={}), OWN)
    assert unknown.point.batch == 4 and "(needs" not in unknown.note and unknown.note.startswith(
        "c m tf32: no run logged its peak memory, so whether a batch fits its 16 GB is not known: "
        "projected at batch 4, the smallest measured; measure it: "
    )


def test_a_ratio_of_two_cards_projected_from_one_point_carries_the_models_error_once():
    """One source point: its interval cancels; two points: both intervals and the model's error."""
    a = project(point(), SOURCE, CEILINGS, TARGET, 0.1)
    b = project(point(), SOURCE, CEILINGS, VOLTA, 0.1)
    b_same = project(a.source, SOURCE, CEILINGS, VOLTA, 0.1)
    ratio = a.throughput / b_same.throughput
    assert ratio_band(a, b_same, 0.1) == pytest.approx((ratio / 1.1, ratio * 1.1))
    half = math.hypot(math.hypot(math.log(100 / 90), math.log(100 / 90)), math.log(1.1))
    assert ratio_band(a, b, 0.1) == pytest.approx((ratio * math.exp(-half), ratio * math.exp(half)))


def test_the_sentence_says_what_the_ratio_is_made_of_and_where_the_source_was_power_bound():
    """double has twice small's tensor rate, the same bandwidth and links: on small's step (5.55 of
    the source's) the tensor-bound part is 2.5 (45%), memory 2.75 (50%), host link 0.2 (4%), idle
    0.1 (2%, under the 2% shown); double's step is 4.3: 5.55 / 4.3 = 1.29x."""
    double = Card("double", {"fp32": 40, "tf32": 100, "fp16": 200}, 1000, 24, 32, 32)
    for power_bound, said in ((None, ""), (0.95, " big ran at its power limit in 95% of the window: each card's "
                                                   "tensor rate assumes it loses as much to its own.")):  # fmt: skip
        p = point(power_bound=power_bound)
        a, b = (project(p, SOURCE, CEILINGS, card, 0.1) for card in (double, TARGET))
        assert pair_sentence(a, b, 0.1) == (
            "double over small, m tf32 x1 (projected from big): 1.00x memory bandwidth on 50%, 2.00x tensor "
            "rate on 45%, 1.00x host link on 4% of the small's step = 1.29x at batch 10 [1.17-1.42]." + said
        )


def test_one_workload_projected_from_two_cards_stands_once_from_the_nearer():
    """`big` is 5.55x slower a step on `small`; `near` (a card like `small`) about 1.1x: its point
    stands, the other is said beside it. Another workload (fp16) and another target keep theirs."""
    near = Card("near", {"fp32": 40, "tf32": 60, "fp16": 110}, 1100, 24, 32, 32)
    far = project(point(group=(("tag:torch", "2.11"),)), SOURCE, CEILINGS, TARGET, model_error=0.1)
    close = project(point(gpu="near", group=(("tag:torch", "2.12"),)), near, CEILINGS, TARGET, model_error=0.1)
    other_model = project(point(precision="fp16", math="fp16"), SOURCE, CEILINGS, TARGET, model_error=0.1)
    other_target = project(point(), SOURCE, CEILINGS, VOLTA, model_error=0.1)
    kept, said = nearest_source([far, close, other_model, other_target], noted=set())
    assert kept == [close, other_model, other_target]
    assert said == {id(close): (
        f"small m tf32 x1: projected from near (step time x{close.step_ratio:.2f}), the nearer card; from big "
        f"(x5.55) it would be 18 [16-20], {far.throughput / close.throughput:.2f}x of that"
    )}  # fmt: skip
    # one at the card's own batch stands before one nearer that is not
    kept, _ = nearest_source([far, close], noted={id(close)})
    assert kept == [far]
