import json
import math
import statistics

import pytest

from src.results.reports import RankReport
from src.results.stats import percentile, relative_ci_halfwidth
from src.run.outcome import combine_ranks, summarize_step_times
from src.run.phases import phase_metrics
from tests.conftest import rank_report


def test_ci_halfwidth_matches_student_t():
    samples = [1.0, 1.1, 0.9, 1.05, 0.95]
    expected = 2.776 * statistics.stdev(samples) / math.sqrt(5) / statistics.fmean(samples)
    assert relative_ci_halfwidth(samples) == pytest.approx(expected)
    assert relative_ci_halfwidth([1.0]) == math.inf
    assert relative_ci_halfwidth([2.0] * 10) == 0


def test_percentile_interpolates():
    assert percentile([4, 1, 3, 2], 50) == 2.5
    assert percentile([1, 2, 3], 0) == 1 and percentile([1, 2, 3], 100) == 3
    assert summarize_step_times([0.1, 0.2, 0.3]).step_time_ms == pytest.approx(200)


def test_combine_ranks_uses_the_slowest_rank_per_step_and_all_items():
    out = combine_ranks([rank_report(1, [0.2, 0.1]), rank_report(0, [0.1, 0.3])], job_started=100.0)
    m = out.measured
    assert out.step_times_s == [0.2, 0.3]
    assert m.throughput == pytest.approx(64 / 0.25)
    assert m.throughput_per_gpu == pytest.approx(32 / 0.25)
    assert m.peak_memory_gb == 11.0 and m.peak_memory_gb_of_rank == {0: 10.0, 1: 11.0}
    assert m.batch_size == 8  # per GPU, logged as it ran
    assert (m.time_to_rank_start_s, m.time_to_first_step_s) == pytest.approx((3.0, 6.0))
    assert out.window == (110.0, 121.0)
    assert m.achieved_tflops_per_gpu == pytest.approx(1e9 * 64 / 0.25 / 2 / 1e12)


def test_phases_run_from_mark_to_mark_with_the_slowestrank_report():
    out = combine_ranks([rank_report(1, [0.2, 0.1]), rank_report(0, [0.1, 0.3])], job_started=100.0)
    marks = out.marks | {"job_entry": 98.0, "launch": 100.5, "outcome": 125.0, "logged": 126.0}
    phases = phase_metrics(90.0, marks)
    assert phases == pytest.approx(
        {
            "phase_config_s": 8.0,
            "phase_run_open_s": 2.5,
            "phase_agent_up_s": 0.5,
            "phase_ranks_up_s": 2.0,  # until the later rank (1) started
            "phase_model_build_s": 1.0,
            "phase_first_step_s": 2.0,
            "phase_warmup_s": 4.0,  # the window opens with the first rank (0) measuring
            "phase_measure_s": 11.0,
            "phase_rank_exit_s": 4.0,
            "phase_logging_s": 1.0,
        }
    )
    assert sum(phases.values()) == pytest.approx(126.0 - 90.0)  # nothing counted twice or left out


def test_a_report_reads_back_from_the_outcome_file_as_it_was_written():
    report = rank_report(1, [0.2, 0.1])
    assert RankReport.from_json(json.loads(json.dumps(report.to_json()))) == report
