"""The step-time breakdown: kernel names to categories, overlapping intervals counted once, and the
profiled stretch running after the measured window (src/rank/step_profiler.py, src/rank/worker.py)."""

from __future__ import annotations

import json

import pytest

from src.rank.step_profiler import PHASES, category, shares, steps_within_budget
from src.rank.worker import train_rank
from tests.test_worker import rank_cfg

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("nvjet_tst_256x128_64x4_2x1_v_bz_coopB_TNT", "matmul"),  # cuBLASLt on Hopper
        ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1", "matmul"),
        ("sm80_xmma_fprop_implicit_gemm_indexed_f16f16_f16f32_f32_nhwckrsc_nhwc", "matmul"),
        ("void cudnn::cnn::wgrad2d_grouped_direct_kernel<float>", "matmul"),
        ("void flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128>>", "matmul"),
        ("aten::mm", "matmul"),
        ("aten::mkldnn_convolution", "matmul"),
        ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "comm"),
        ("gloo:all_reduce", "comm"),
        ("Memcpy DtoD (Device -> Device)", "memcpy"),
        ("Memset (Device)", "memcpy"),
        ("void cudnn::bn_fw_tr_1C11_kernel_NCHW<__half, float, 512, true, 1>", "other"),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::float16_copy_kernel_cuda>", "other"),
        ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>", "other"),
        ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<FusedAdamMathFunctor>", "other"),
        ("void at::native::unrolled_elementwise_kernel<convert_to_half>", "other"),  # convert is no conv
    ],
)
def test_kernel_names_fall_in_their_category(name, expected):
    assert category(name) == expected


def test_overlapping_kernels_count_once_for_the_first_busy_category_and_gaps_are_idle():
    # matmul 0-10 with communication 5-15 beside it, nothing 15-20, other compute 20-30
    found, span = shares([(0, 10, "matmul"), (5, 15, "comm"), (20, 30, "other")])
    assert span == 30
    assert found == pytest.approx(
        {"matmul": 1 / 3, "comm": 1 / 6, "idle": 1 / 6, "other": 1 / 3, "memcpy": 0}
    )
    nested, _ = shares([(0, 10, "other"), (2, 4, "matmul"), (3, 6, "matmul")])  # CPU operators nest
    assert nested == pytest.approx({"matmul": 0.4, "other": 0.6, "comm": 0, "memcpy": 0, "idle": 0})


def test_the_profiled_steps_follow_the_window_and_leave_it_as_it_was():
    [report] = train_rank(rank_cfg("model.name=tiny", "benchmark.breakdown_steps=2"))
    assert len(report.step_times_s) == 2  # smoke's max_steps: the profiled steps are not in it
    breakdown = report.breakdown
    assert breakdown["steps"] == 2 and breakdown["kernels"] > 0
    assert set(breakdown["phase_seconds"]) == set(PHASES) and min(breakdown["phase_seconds"].values()) >= 0
    assert breakdown["phase_seconds"]["steps"] > 0
    assert sum(breakdown["shares"].values()) == pytest.approx(1.0)
    assert breakdown["shares"]["matmul"] > 0  # its linear layers
    assert {k["category"] for k in breakdown["top_kernels"]} <= {"matmul", "other", "comm", "memcpy"}
    [off] = train_rank(rank_cfg("model.name=tiny", "benchmark.breakdown_steps=0"))
    assert off.breakdown is None


@pytest.mark.parametrize(
    ("asked", "step_s", "expected"),
    [(3, 0.042, 3), (3, 0.35, 2), (3, 0.54, 1), (3, 2.5, 1), (1, 0.01, 1), (5, 0.25, 4)],
)
def test_long_steps_are_profiled_fewer_times_but_never_none(asked, step_s, expected):
    # about 1 s of profiled steps: Mask R-CNN's 540 ms steps once, ResNet-50's 42 ms three times
    assert steps_within_budget(asked, step_s) == expected


def test_the_rank_counts_its_steps_ops_and_the_job_splits_its_step_by_what_bounds_it():
    """The tiny MLP (16 -> 16 -> 4, batch b): its products' FLOPs are 2 x b x (16 x 16 + 16 x 4) forward
    and, backward, the same for the weights' gradients plus the second layer's input gradient (the
    first layer's input needs none): 2 x b x (2 x 320 + 64) = 1,408 x b."""
    from omegaconf import OmegaConf

    from src.projection.counts import MATMUL, OpCounts
    from src.run import profile_figures
    from src.run.outcome import combine_ranks
    from tests.conftest import compose_cfg

    [report] = train_rank(rank_cfg("model.name=tiny", "benchmark.breakdown_steps=2"))
    counts = OpCounts.from_json(report.breakdown["op_counts"])
    flops = sum(n * f for n, f, _ in (r.at(8) for r in counts.rows if r.kind == MATMUL))
    assert counts.batches == (2, 4) and flops == 1408 * 8
    outcome = combine_ranks([report], report.rank_started)
    assert outcome.breakdown.counts == report.breakdown["op_counts"]
    on_h200 = compose_cfg(["gpu=h200", "precision=fp32"])
    h200, fp32 = (OmegaConf.to_container(group, resolve=True) for group in (on_h200.gpu, on_h200.precision))
    split = profile_figures.bounded(outcome.breakdown, outcome.measured, h200, fp32)
    busy = 1 - split.shares["idle"] - split.shares["comm"]
    assert set(split.bounds) == {"tensor", "bandwidth", "clock"}
    assert sum(split.bounds.values()) == pytest.approx(busy)
    metrics = split.metrics()
    assert {f"breakdown_{b}_bound_share" for b in ("tensor", "bandwidth", "clock")} <= set(metrics)
    assert profile_figures.files([], split)["op_counts.json"] == json.dumps(report.breakdown["op_counts"])
    assert profile_figures.bounded(outcome.breakdown, outcome.measured, {"name": "cpu"}, fp32).bounds == {}
