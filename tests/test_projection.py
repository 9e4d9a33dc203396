"""The projection's arithmetic on small cases, each factor worked out by hand in the comments."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from src.projection.choose import OWN, SAME, choose, nearest_source
from src.projection.counts import MATMUL, OTHER, Counted, OpCounts
from src.projection.model import (
    Card,
    Ceilings,
    ProjectionRefused,
    SourcePoint,
    figures,
    measured_step_shares,
    project,
    ratio_band,
)
from src.projection.sentences import pair_sentence

SPEC = {"fp32": 60, "tf32": 500, "fp16": 1000}
BIG = Card("big", SPEC, 6000, 141, 64, 450, sm_count=100, boost_clock_mhz=2000)
# the source's ceilings run: tf32 400 of its 500 (80%), 5,000 GB/s of its 6,000
SOURCE = figures(BIG, Ceilings("ceil-run", {"fp32": 50, "tf32": 400, "fp16": 800}, 5000))
# measured fp16 150 of its spec 200 (75%): its tf32 is 100 x 75%, its clock 1,500 x 75%
SMALL = Card(
    "small",
    {"fp32": 40, "tf32": 100, "fp16": 200},
    1000,
    24,
    32,
    32,
    sm_count=50,
    boost_clock_mhz=1500,
    measured_tflops={"fp16": (150.0, "a table, 2025")},
)
TARGET = figures(SMALL, source=SOURCE)
VOLTA = figures(
    Card("volta", {"fp32": 14, "fp16": 112}, 900, 32, 16, 16, sm_count=80, boost_clock_mhz=1380),
    source=SOURCE,
)


def counts(*ops: tuple[str, str, float, float]) -> OpCounts:
    """Ops whose FLOPs and bytes per item are given: counted at batches 2 and 4, as a rank counts them."""
    at = {
        b: [Counted(name, kind, "fp32", flops * b, size * b) for name, kind, flops, size in ops]
        for b in (2, 4)
    }
    return OpCounts.fit((2, at[2]), (4, at[4]), "by hand")


# per item: a product of 4e11 FLOPs over 1e9 bytes, and an elementwise op over 5e9 bytes
STEP = counts(("mm", MATMUL, 4e11, 1e9), ("add", OTHER, 0, 5e9))


def point(**changes) -> SourcePoint:
    fields = dict(
        label="big x1 m tf32 [batch 10]",
        gpu="big",
        model="m",
        precision="tf32",
        math="tf32",
        gpu_count=1,
        batch=10,
        throughput=100.0,
        interval=(90.0, 110.0),
        shares={"matmul": 0.2, "other": 0.6, "comm": 0.0, "memcpy": 0.1, "idle": 0.1},
        flops_per_item=None,
        memory_gb=20.0,
        run_ids=("run-1",),
        counts=STEP,
        tf32=True,
        remeasure="python -m src.train gpu=big model=m precision=tf32 model.batch_size=10",
    )
    return SourcePoint(**(fields | changes))


def test_two_counts_become_lines_in_the_batch_and_a_loop_over_the_batch_becomes_kernels():
    """FLOPs 10 + 3 x batch (weights plus activations); one op more per two images at batch 4."""
    small = [Counted("conv", MATMUL, "fp16", 16, 2), Counted("add", OTHER, "fp16", 0, 8)]
    large = [
        Counted("conv", MATMUL, "fp16", 22, 2),
        Counted("nms", OTHER, "fp16", 0, 1),
        Counted("add", OTHER, "fp16", 0, 16),
    ]
    found = {r.name: r for r in OpCounts.fit((2, small), (4, large), "by hand").rows}
    assert found["conv"].at(10) == (1.0, 40.0, 2.0)  # 10 + 3 x 10 FLOPs, 2 bytes whatever the batch
    assert found["add"].at(10) == (1.0, 0.0, 40.0)
    assert found["nms"].at(2) == (0.0, 0.0, 1.0) and found["nms"].at(10) == (4.0, 0.0, 1.0)  # (10 - 2) / 2


def test_a_cards_figures_are_measured_before_spec_and_each_says_which():
    """small: fp16 measured; tf32 its spec x its own fp16 efficiency; bandwidth its spec x the
    source's measured efficiency (5,000 of 6,000); clock its boost x its fp16 efficiency."""
    assert TARGET.tensor["fp16"].value == 150 and TARGET.tensor["fp16"].said == "measured (a table, 2025)"
    assert TARGET.tensor["tf32"].value == pytest.approx(75)
    assert TARGET.tensor["tf32"].said == "spec 100 x 75%, its measured fp16 150 of spec 200"
    assert TARGET.bandwidth.value == pytest.approx(1000 * 5000 / 6000)
    assert TARGET.bandwidth.said == "spec 1000 x 83%, big's measured efficiency"
    assert (
        TARGET.issue.value == pytest.approx(50 * 1500 * 0.75)
        and TARGET.issue.said == "50 SMs x 1,125 MHz, boost 1,500 x 75%"
    )
    assert SOURCE.tensor["tf32"].said == "measured by ceilings run ceil-run"
    published = figures(replace(BIG, measured_tflops={"tf32": (420.0, "a table, 2025")}), SOURCE.ceilings)
    assert published.tensor["tf32"].value == 420  # the profile's published figure before its ceilings run's
    assert (
        figures(replace(SMALL, measured_tflops={})).tensor["tf32"].said == "spec"
    )  # nothing measured, no source


def test_each_class_of_step_time_is_scaled_by_what_bounds_it():
    """Step: 10 items / 100 items/s = 0.1 s. On big the product's roofline is 4e12 FLOPs / 400 TFLOP/s
    = 0.01 s (its 1e10 bytes take 0.002 s: tensor-bound) of the 0.02 s measured: 0.01 clock-bound.
    The add's 5e10 bytes at 5,000 GB/s take 0.01 s of the 0.07 s of other kernels and copies: 0.06
    clock-bound. On small: the product 4e12 / 75e12 = 0.0533 s (x5.33), the add 5e10 / 833.3e9 =
    0.06 s (x6.0), clock-bound work at 100 x 1,600 / (50 x 1,125) = x2.844, idle kept.
    Step ratio 0.1 x 5.333 + 0.1 x 6 + 0.7 x 2.844 + 0.1 = 3.2244."""
    p = project(point(), SOURCE, TARGET, model_error=0.1)
    assert {f.part: (round(f.share, 6), round(f.scale, 4)) for f in p.factors} == {
        "tensor-bound": (0.1, 5.3333),
        "bandwidth-bound": (0.1, 6.0),
        "clock-bound": (0.7, 2.8444),
        "communication": (0.0, 1.0),  # one GPU: nothing to scale
        "idle": (0.1, 1.0),
    }
    assert p.step_ratio == pytest.approx(3.22444, rel=1e-5) and p.throughput == pytest.approx(
        100 / 3.22444, rel=1e-5
    )
    assert p.projected and p.math == "tf32" and p.batch == 10 and p.ceilings.run_id == "ceil-run"


def test_a_profiled_step_longer_than_the_measured_one_gives_its_extra_time_to_the_host():
    """Measured step 0.1 s, 10% of the profiled step idle. Profiled 0.105 s: its kernels ran 0.0945
    s, which stand: each busy share x 1.05, and idle is the 0.0055 s the measured step leaves.
    Profiled 0.16 s: kernels 0.144 s, more than the measured step holds: they take all of it (x 1 /
    0.9), nothing idle. A profile no longer than the step, or none logged, leaves the shares."""
    shares = measured_step_shares(point(profiled_step_s=0.105))
    assert shares == pytest.approx(
        {"matmul": 0.21, "other": 0.63, "comm": 0.0, "memcpy": 0.105, "idle": 0.055}
    )
    held = measured_step_shares(point(profiled_step_s=0.16))
    assert held == pytest.approx(
        {"matmul": 0.2222222, "other": 0.6666667, "comm": 0.0, "memcpy": 0.1111111, "idle": 0.0}
    )
    assert measured_step_shares(point(profiled_step_s=0.08)) == point().shares
    assert measured_step_shares(point()) == point().shares  # a run that logged no profiled step
    # the projection keeps the measured step's idle, not the profile's: 5.5% instead of 10%
    p = project(point(profiled_step_s=0.105), SOURCE, TARGET, model_error=0.1)
    assert {f.part: round(f.share, 6) for f in p.factors}["idle"] == 0.055
    assert p.step_ratio > project(point(), SOURCE, TARGET, model_error=0.1).step_ratio  # more work scaled up


def test_at_another_batch_each_class_grows_with_its_counted_ops():
    """At batch 20 every op's FLOPs and bytes double: the tensor- and bandwidth-bound parts take
    twice their time at 10 (x10.667, x12), the clock-bound part grows with the work (x5.689), idle
    with the kernels (x1). Step ratio 1.0667 + 1.2 + 3.9822 + 0.1 = 6.3489 for twice the items."""
    p = project(point(), SOURCE, TARGET, model_error=0.1, batch=20)
    assert p.step_ratio == pytest.approx(6.34889, rel=1e-5)
    assert p.throughput == pytest.approx(100 * 2 / 6.34889, rel=1e-5)


def test_measured_time_the_counts_overexplain_is_all_bound_by_them():
    """Counted bytes beyond the measured time (0.2 s of adds in 0.07 s): nothing is clock-bound and
    the bandwidth-bound part is the measured time, scaled by the bytes' ratio."""
    p = project(point(counts=counts(("mm", MATMUL, 4e11, 1e9), ("add", OTHER, 0, 1e11))), SOURCE, TARGET, 0.1)
    parts = {f.part: f for f in p.factors}
    assert parts["bandwidth-bound"].share == pytest.approx(0.7) and parts[
        "bandwidth-bound"
    ].scale == pytest.approx(6.0)
    assert parts["clock-bound"].share == pytest.approx(0.1)  # the product's unexplained 0.01 s only


def test_a_card_projected_onto_itself_is_the_point():
    p = project(point(), SOURCE, SOURCE, model_error=0.1)
    assert p.step_ratio == pytest.approx(1.0) and p.throughput == pytest.approx(100.0)


def test_communication_scales_by_the_gpu_link_above_one_gpu():
    shares = {"matmul": 0.2, "other": 0.5, "comm": 0.2, "memcpy": 0.0, "idle": 0.1}
    p = project(point(gpu_count=8, shares=shares), SOURCE, TARGET, 0.1)
    assert {f.part: f.scale for f in p.factors}["communication"] == pytest.approx(450 / 32)


def test_a_card_without_tf32_runs_tf32_products_at_its_fp32_rate():
    """Volta: fp32 14 x the source's measured fp32 efficiency (50 of 60) against big's 400."""
    p = project(point(), SOURCE, VOLTA, 0.1)
    assert p.math == "fp32" and p.factors[0].scale == pytest.approx(400 / (14 * 50 / 60))


def test_the_band_adds_the_measurements_interval_and_the_models_error_on_the_log_scale():
    """Measured: the wider side of (90, 110) around 100 is ln(100/90); the model's 10% on a ratio is
    ln(1.1), half its variance on each card: ln(1.1) / sqrt(2)."""
    p = project(point(), SOURCE, TARGET, model_error=0.1)
    half = math.hypot(math.log(100 / 90), math.log(1.1) / math.sqrt(2))
    assert p.interval == pytest.approx((p.throughput * math.exp(-half), p.throughput * math.exp(half)))


def test_a_point_without_breakdown_counts_or_math_is_refused_with_the_run_to_make():
    with pytest.raises(
        ProjectionRefused, match="no step-time breakdown; measure it with one: python -m src.train gpu=big"
    ):
        project(point(shares=None), SOURCE, TARGET, 0.1)
    with pytest.raises(
        ProjectionRefused, match="its step's ops were not counted .*; measure it again: python -m"
    ):
        project(point(counts=None), SOURCE, TARGET, 0.1)
    with pytest.raises(ProjectionRefused, match="has no bf16 math"):
        project(point(precision="bf16", math="bf16"), SOURCE, VOLTA, 0.1)


def test_a_profile_without_the_figures_is_refused_naming_them():
    with pytest.raises(
        ProjectionRefused, match=r"gpu=odd: its profile states no host_link_gbs, gpu_link_gbs"
    ):
        Card.from_profile(
            {"name": "odd", "peak_tflops": {"fp32": 1}, "memory_bandwidth_gbs": 1, "memory_gb": 1}
        )
    with pytest.raises(
        ProjectionRefused, match=r"gpu=small: its profile states no sm_count or boost_clock_mhz"
    ):
        figures(replace(SMALL, sm_count=None))


def test_a_card_runs_its_profiles_batch_else_its_largest_that_fits_else_it_is_refused():
    curve = [point(batch=4, memory_gb=24.0), point(batch=16, memory_gb=48.0), point(batch=32, memory_gb=60.0)]

    def own(memory: float, batches: dict | None = None) -> list:
        return choose(curve, replace(SMALL, memory_gb=memory, batch_sizes=batches or {}), OWN)

    assert [[(c.point.batch, c.batch, c.note, c.refused) for c in own(m)] for m in (24, 48, 80)] == [
        [(4, 4, "", "")],
        [(16, 16, "", "")],
        [(32, 32, "", "")],
    ]
    [profiled] = own(80, {"m": {"tf32": 16}})  # the profile's batch, measured: it, not the largest
    assert (profiled.point.batch, profiled.batch, profiled.note) == (16, 16, "")
    [counted] = own(48, {"m": {"tf32": 8}})  # not measured: from the nearest batch, through the counts
    assert (counted.point.batch, counted.batch) in {(4, 8), (16, 8)} and counted.note == (
        f"small m tf32: at batch 8, its profile's, from big's batch {counted.point.batch} through the counted ops; "
        "measure it: python -m src.train gpu=big model=m precision=tf32 gpu.count=1 model.batch_size=8"
    )
    [small] = own(16)
    assert small.refused == (
        "small m tf32: no measured batch fits its 16 GB (batch 4 needs 24 GB); measure one that does: python -m "
        "src.train gpu=big model=m precision=tf32 gpu.count=1 gpu.memory_limit_gb=16 model.batch_size=auto"
    )
    assert [(c.point.batch, c.batch) for c in choose(curve, SMALL, SAME)] == [(4, 4), (16, 16), (32, 32)]
    [unknown] = choose([replace(p, memory_gb=None) for p in curve], replace(SMALL, memory_gb=16), OWN)
    assert unknown.batch == 4 and unknown.note.startswith(
        "small m tf32: no run logged its peak memory, so whether batch 4 fits its 16 GB is not known; measure it: "
    )


def test_a_ratio_of_two_cards_projected_from_one_point_carries_the_models_error_once():
    """One source point: its interval cancels; two points: both intervals and the model's error."""
    a = project(point(), SOURCE, TARGET, 0.1)
    b = project(point(), SOURCE, VOLTA, 0.1)
    b_same = project(a.source, SOURCE, VOLTA, 0.1)
    ratio = a.throughput / b_same.throughput
    assert ratio_band(a, b_same, 0.1) == pytest.approx((ratio / 1.1, ratio * 1.1))
    half = math.hypot(math.hypot(math.log(100 / 90), math.log(100 / 90)), math.log(1.1))
    assert ratio_band(a, b, 0.1) == pytest.approx((ratio * math.exp(-half), ratio * math.exp(half)))


def test_the_sentence_says_what_the_ratio_is_made_of_and_what_the_batch_adds():
    """double has twice small's tensor rate, the same bandwidth and clock: on small's step (3.2244 of
    the source's) the tensor-bound part is 0.5333 (17%), bandwidth 0.6 (19%), clock 1.991 (62%),
    idle 0.1 (3%); double's step is 2.9578: 1.09x. At batch 20 every part but idle (per kernel
    launched) doubles: 2 x 2.8578 + 0.1 = 5.8156 for twice the items, 1.02x from the batch."""
    double = figures(
        replace(
            SMALL,
            name="double",
            peak_tflops={"fp32": 40, "tf32": 200, "fp16": 400},
            measured_tflops={"fp16": (300.0, "a table, 2025")},
        ),
        source=SOURCE,
    )
    one = point()
    a, b = (project(one, SOURCE, card, 0.1) for card in (double, TARGET))
    assert pair_sentence(a, b, 0.1) == (
        "double over small, m tf32 x1 (projected from big): 1.00x SMs x clock on 62%, 1.00x memory bandwidth "
        "on 19%, 2.00x tensor rate on 17%, 1.00x kept on 3% of the small's step = 1.09x at batch 10 [0.99-1.20]."
    )
    larger = project(one, SOURCE, double, 0.1, batch=20)
    said = pair_sentence(larger, b, 0.1)
    assert said.startswith("double over small, m tf32 x1 (projected from big): 1.00x SMs x clock on 62%")
    assert said.endswith(
        f"= 1.09x at batch 10; 1.02x from the batch (20 against 10) = {larger.throughput / b.throughput:.2f}x "
        f"[{ratio_band(larger, b, 0.1)[0]:.2f}-{ratio_band(larger, b, 0.1)[1]:.2f}]."
    )


def test_a_pair_projected_from_two_cards_at_one_batch_says_what_its_own_point_adds():
    """A from `near`'s point, B from `big`'s, both at batch 10: the speed part is A projected from
    B's point; the rest is A's own point, not a batch (both ran 10), and the figure is the table's."""
    near = figures(replace(SMALL, name="near"), Ceilings("near-ceil", {"tf32": 75, "fp16": 150}, 833.3))
    a = project(point(gpu="near"), near, SOURCE, model_error=0.1)
    b = project(point(), SOURCE, TARGET, model_error=0.1)
    said = pair_sentence(a, b, 0.1)
    assert said.startswith("big over small, m tf32 x1 (projected from big): ")
    assert f"x from big's own point (near's, at batch 10) = {a.throughput / b.throughput:.2f}x" in said


def test_one_workload_projected_from_two_cards_stands_once_from_the_nearer():
    """`big` is 3.2x slower a step on `small`; `near` (a card like `small`) about 1x: its point
    stands, the other is said beside it. Another workload (fp16) and another target keep theirs."""
    near_card = replace(SMALL, name="near")
    near = figures(near_card, Ceilings("near-ceil", {"tf32": 75, "fp16": 150}, 833.3))
    far = project(point(group=(("tag:torch", "2.11"),)), SOURCE, TARGET, model_error=0.1)
    close = project(point(gpu="near", group=(("tag:torch", "2.12"),)), near, TARGET, model_error=0.1)
    other_model = project(point(precision="fp16", math="fp16"), SOURCE, TARGET, model_error=0.1)
    other_target = project(point(), SOURCE, VOLTA, model_error=0.1)
    kept, said = nearest_source([far, close, other_model, other_target], noted=set())
    assert kept == [close, other_model, other_target]
    assert said == {
        id(close): (
            f"small m tf32 x1: projected from near (step time x{close.step_ratio:.2f}), the nearer card; from big "
            f"(x{far.step_ratio:.2f}) it would be {far.throughput:,.0f} [{far.interval[0]:,.0f}-{far.interval[1]:,.0f}], "
            f"{far.throughput / close.throughput:.2f}x of that"
        )
    }
    kept, _ = nearest_source([far, close], noted={id(close)})  # one at the card's own batch stands first
    assert kept == [far]
