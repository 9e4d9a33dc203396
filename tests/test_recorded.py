"""What a run records, read back by one reader (src/results/recorded.py): versions, job kinds, names."""

from __future__ import annotations

import ast
from dataclasses import fields, replace

from src.hardware import system_metrics
from src.paths import PROJECT_ROOT
from src.rank.step_profiler import PHASES as PROFILE_PHASES
from src.results import recorded, run_result
from src.run import phases
from src.run.outcome import combine_ranks
from tests.conftest import rank_report, read_back

# what a CPU job cannot measure: its memory (the CPU reports none), a tiny MLP's FLOPs, and what needs
# a peak, a price or GPU power (the cpu profile has none)
NOT_ON_CPU = {
    recorded.PEAK_MEMORY_GB, recorded.FLOPS_PER_ITEM, recorded.ACHIEVED_TFLOPS_PER_GPU, recorded.MFU,
    recorded.THROUGHPUT_PER_WATT, recorded.THROUGHPUT_PER_KUSD,
}  # fmt: skip

# config keys that share a metric's name (model.batch_size, model.flops_per_item,
# benchmark.breakdown_steps): written as config keys, not as metric names
CONFIG_KEYS = {recorded.BATCH_SIZE, recorded.FLOPS_PER_ITEM, recorded.BREAKDOWN_STEPS}


def test_a_run_of_each_version_and_kind_reads_as_what_it_is():
    ceilings_v1 = read_back({"model": "ceilings", "gpu": "h200", "gpu_count": "1"})
    assert (ceilings_v1.schema_version, ceilings_v1.kind) == (1, recorded.CEILINGS)
    training = read_back({recorded.SCHEMA: "2", recorded.KIND: "training", "model": "gpt2"}, metrics={"throughput": 5.0})
    assert (training.schema_version, training.kind, training.throughput) == (2, recorded.TRAINING, 5.0)
    assert read_back({recorded.REPORT: "true"}).kind == recorded.REPORT_KIND
    assert read_back({recorded.SWEEP: "true"}).kind == recorded.SWEEP_KIND
    assert not read_back({recorded.SWEEP: "true"}).is_job


def test_a_ceilings_runs_figures_read_back_as_the_job_wrote_them():
    figures = recorded.CeilingFigures(
        memory_copy_gbs=4000.0, memory_read_gbs=4100.0, host_to_device_gbs=55.0, device_to_host_gbs=56.0,
        allreduce_busbw_gbs=300.0, matmul_tflops={"bf16": 760.0, "tf32": 400.0},
        matmul_shape={"bf16": (4096, 4096, 8192), "tf32": (8192, 4096, 4096)},
        allreduce_by_size={"0p25mb": 20.0, "64mb": 300.0},
        ci95_rel={"matmul_bf16_tflops": 0.004, "memory_copy_gbs": 0.001, "allreduce_busbw_gbs_64mb": 0.02},
    )  # fmt: skip
    logged = {k: float(v) for k, v in figures.metrics().items()}  # MLflow's floats
    assert len(logged) == 5 + 2 + 6 + 2 + 3  # every figure has a metric of its own
    run = read_back({recorded.KIND: "ceilings"}, metrics=logged)
    assert run.ceilings == figures and run.ceilings.matmul_shape["bf16"] == (4096, 4096, 8192)
    assert read_back(metrics={"throughput": 1.0}).ceilings == recorded.CeilingFigures()  # a training run's


def test_the_telemetry_summary_reads_back_as_the_job_wrote_it():
    telemetry = recorded.Telemetry(**{f.name: float(i + 1) for i, f in enumerate(fields(recorded.Telemetry))})
    telemetry = replace(telemetry, telemetry_samples_per_gpu=40)
    result = read_back(metrics={k: float(v) for k, v in telemetry.metrics().items()})
    assert result.telemetry == telemetry and isinstance(result.telemetry.telemetry_samples_per_gpu, int)
    assert read_back().telemetry == recorded.Telemetry()  # a run without telemetry: every figure None


def test_every_run_a_job_opens_carries_the_schema_version(tracking_uri):
    from omegaconf import OmegaConf

    from src.tracking import job_run, store

    tracking = OmegaConf.create({"uri": tracking_uri, "experiment": "e", "retries": 1, "backoff_s": 0.0})
    run = job_run.JobRun(tracking, store.ensure_experiment(tracking_uri, "e"), "name", {"model": "gpt2"})
    run.end("FINISHED")
    stored = run_result.read(store.client(tracking_uri).get_run(run.run_id))
    assert stored.schema_version == recorded.SCHEMA_VERSION and stored.kind == recorded.TRAINING


def quoted_names(source: str, names: set[str]) -> list[tuple[int, str]]:
    """(line, name) of each string literal in `source` that is one of `names`; docstrings and
    comments are prose, not names."""
    tree = ast.parse(source)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in names and id(node) not in docstrings
    ]


def test_quoted_names_are_string_literals_only():
    source = '"""throughput in a docstring"""\n# "throughput" in a comment\nx = m["throughput"]\ny = "mfu is prose"\n'
    assert quoted_names(source, {"throughput", "mfu"}) == [(3, "throughput")]


def test_each_metric_name_is_written_in_one_module():
    derived = {recorded.share_metric(s) for s in recorded.SHARES} | {
        name for f in recorded.CEILING_FIGURES for name in (f, recorded.ceiling_metric(f))
    }
    names = (set(recorded.METRICS) | derived) - CONFIG_KEYS
    found = [
        f"{path.relative_to(PROJECT_ROOT)}:{line}: {name!r}"
        for folder in ("src", "benchmarks", "scripts")
        for path in sorted((PROJECT_ROOT / folder).rglob("*.py"))
        if path != PROJECT_ROOT / "src" / "results" / "recorded.py"
        for line, name in quoted_names(path.read_text(), names)
    ]
    assert not found, "metric names written outside src/results/recorded.py:\n" + "\n".join(found)


def test_the_typed_figures_read_back_as_the_job_wrote_them():
    ranks = [rank_report(1, [0.2, 0.1]), rank_report(0, [0.1, 0.3])]
    window = replace(combine_ranks(ranks, job_started=100.0).measured, mfu=0.4, throughput_per_watt=2.0,
                     throughput_per_kusd=3.0)  # fmt: skip
    assert None not in [getattr(window, f.name) for f in fields(window)]  # every figure goes round
    breakdown = recorded.Breakdown(
        shares=dict(zip(recorded.SHARES, (0.5, 0.2, 0.1, 0.1, 0.1), strict=True)),
        steps=2, step_ms=12.5, seconds=3.5, phase_seconds={"steps": 2.0, "parse": 1.5},
        bounds=dict(zip(recorded.BOUNDS, (0.3, 0.4, 0.1), strict=True)),
    )  # fmt: skip
    logged = {k: float(v) for k, v in (window.metrics() | breakdown.metrics()).items()}  # MLflow's floats
    result = read_back(metrics=logged)
    assert result.window == window and result.breakdown == breakdown
    assert isinstance(result.window.measured_steps, int) and isinstance(result.breakdown.steps, int)
    assert (result.throughput, result.mfu, result.per_watt) == (window.throughput, 0.4, 2.0)
    assert result.batch_size == 8 and result.shares == breakdown.shares  # read through the typed figures
    assert read_back(metrics={"throughput": 1.0}).breakdown is None


def test_a_jobs_metrics_are_the_typed_figures_and_the_names_recorded_declares(tiny_runs):
    """A real CPU smoke job (conftest's clean run): every metric it logs is one recorded names, and
    the figures read back write the same metrics again."""
    _, run, _ = tiny_runs
    logged, result = run.data.metrics, run_result.read(run)
    window, breakdown, telemetry = result.window.metrics(), result.breakdown.metrics(), result.telemetry.metrics()
    assert set(window) == set(recorded.Window.metric_names()) - NOT_ON_CPU
    profiled = {recorded.breakdown_phase_metric(p) for p in PROFILE_PHASES}
    assert set(breakdown) == {recorded.share_metric(s) for s in recorded.SHARES} | profiled | {
        recorded.BREAKDOWN_STEPS, recorded.BREAKDOWN_STEP_MS, recorded.BREAKDOWN_S,
    }  # fmt: skip
    assert {k: logged[k] for k in window | breakdown | telemetry} == window | breakdown | telemetry
    workload = recorded.workload_metric("tiny", "fp32", 1)
    assert logged[workload] == logged[recorded.THROUGHPUT]
    series = {k for k in logged if k.startswith(("telemetry/", system_metrics.PREFIX))}  # over the whole job
    rest = set(logged) - set(window) - set(breakdown) - set(telemetry) - series - {workload}
    job_phases = {recorded.phase_metric(name) for name, _ in phases.PHASES}
    assert rest <= job_phases and recorded.phase_metric("measure") in rest
