"""What a run records, read back by one reader (src/recorded.py): versions, job kinds, names."""

from __future__ import annotations

import ast

from src import recorded
from src.paths import PROJECT_ROOT
from tests.conftest import run_result

# config keys that share a metric's name (model.batch_size, model.flops_per_item,
# benchmark.breakdown_steps): written as config keys, not as metric names
CONFIG_KEYS = {recorded.BATCH_SIZE, recorded.FLOPS_PER_ITEM, recorded.BREAKDOWN_STEPS}


def test_a_run_of_each_version_and_kind_reads_as_what_it_is():
    ceilings_v1 = run_result({"model": "ceilings", "gpu": "h200", "gpu_count": "1"})
    assert (ceilings_v1.schema_version, ceilings_v1.kind) == (1, recorded.CEILINGS)
    training = run_result({recorded.SCHEMA: "2", recorded.KIND: "training", "model": "gpt2"}, metrics={"throughput": 5.0})
    assert (training.schema_version, training.kind, training.throughput) == (2, recorded.TRAINING, 5.0)
    assert run_result({recorded.REPORT: "true"}).kind == recorded.REPORT_KIND
    assert run_result({recorded.SWEEP: "true"}).kind == recorded.SWEEP_KIND
    assert not run_result({recorded.SWEEP: "true"}).is_job


def test_a_ceilings_run_reads_its_figures_by_math():
    run = run_result({recorded.KIND: "ceilings"}, metrics={"ceiling_matmul_bf16_tflops": 700.0, "ceiling_memory_copy_gbs": 4000.0})
    assert run.ceiling_matmul("bf16") == 700.0 and run.ceilings[recorded.MEMORY_COPY_GBS] == 4000.0


def test_every_run_a_job_opens_carries_the_schema_version(tracking_uri):
    from omegaconf import OmegaConf

    from src.tracking import job_run, store

    tracking = OmegaConf.create({"uri": tracking_uri, "experiment": "e", "retries": 1, "backoff_s": 0.0})
    run = job_run.JobRun(tracking, store.ensure_experiment(tracking_uri, "e"), "name", {"model": "gpt2"})
    run.end("FINISHED")
    stored = recorded.read(store.client(tracking_uri).get_run(run.run_id))
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
        if path != PROJECT_ROOT / "src" / "recorded.py"
        for line, name in quoted_names(path.read_text(), names)
    ]
    assert not found, "metric names written outside src/recorded.py:\n" + "\n".join(found)
