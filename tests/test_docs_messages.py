"""The error messages the docs quote are the ones the code prints: every `key=value: ...` quoted in
README.md and docs/ is parsed out and produced from the code with the input it names."""

from __future__ import annotations

import re

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import OverrideParseException

from src.compare.analysis import check_comparable, relative_table
from src.compare.runs import CompareError
from src.config.cli import composition_error
from src.config.finalise import finalize
from src.errors import ConfigError
from src.paths import PROJECT_ROOT
from tests.conftest import compose_cfg
from tests.test_compare import measurement

# `model.batch_size=0: must be ...`, `error: baseline=h200: no FINISHED run ...`; a quote that
# ends in "..." stands for the message's beginning.
QUOTE = re.compile(r"`((?:error: )?[a-z_.]+=[^`\s]*: [^`]+)`")
PAGES = [PROJECT_ROOT / "README.md", *sorted((PROJECT_ROOT / "docs").glob("*.md"))]


def job_error(*overrides: str) -> str:
    with pytest.raises(ConfigError) as error:
        finalize(compose_cfg(["gpu=cpu", *overrides]))
    return str(error.value)


def compare_error(baseline: str, *gpus: str) -> str:
    measurements = [measurement(gpu, "resnet50", 100.0) for gpu in gpus]
    with pytest.raises(CompareError) as error:
        check_comparable(measurements, relative_table(measurements, baseline), baseline, "")
    return f"error: {error.value}"  # as exit_with_error prints it


def study_error(*overrides: str) -> str:
    """What compare prints for an option that changes a study's question."""
    from src.compare.pipeline import validate_compare
    from tests.test_compare import compare_cfg

    study = "experiment=lambda_a6000_vs_3090"
    cfg = compare_cfg("sqlite:////tmp/unused/mlflow.db", "/tmp/unused", study, *overrides)
    with pytest.raises(ConfigError) as error:
        validate_compare(cfg)
    return f"error: {error.value}"


def override_error(override: str) -> str:
    """What a command line Hydra cannot parse prints (src.train and src.compare alike)."""
    with pytest.raises(OverrideParseException) as error:
        OverridesParser.create().parse_overrides([override])
    return f"error: {composition_error(error.value)}"


def nothing_fits_under_a_cap() -> str:
    from unittest import mock

    import torch

    from src.rank import autobatch

    with (
        mock.patch.object(autobatch, "trains", return_value=False),
        pytest.raises(autobatch.NothingFits) as error,
    ):
        autobatch.find_batch_size(
            {"name": "txl_large"}, None, torch.device("cuda"), 1, " under gpu.memory_limit_gb=2"
        )
    return str(error.value)


def reserve_error(reserve_gb: float) -> str:
    from unittest import mock

    from src.hardware import host
    from src.run.prepare import check_reserve

    memory = {"MemTotal": 64 * 10**9, "MemAvailable": 40 * 10**9}
    with mock.patch.object(host, "meminfo", return_value=memory), pytest.raises(ConfigError) as error:
        check_reserve(reserve_gb)
    return str(error.value)


def import_error(*overrides: str) -> str:
    from src.published.__main__ import validate_import
    from tests.test_import_results import import_cfg

    with pytest.raises(ConfigError) as error:
        validate_import(import_cfg("precision=fp32", f"file={PROJECT_ROOT / 'README.md'}", *overrides))
    return str(error.value)


def deleted_experiment_error() -> str:
    from types import SimpleNamespace

    from src.tracking import store

    gone = SimpleNamespace(name="gpubench", experiment_id="1")
    return store.deleted_experiment("sqlite:////srv/mlruns/mlflow.db", "tracking.experiment", gone)


# What makes each quoted message, by the key=value it starts with.
PRODUCERS = {
    "model.batch_size=0": lambda: job_error("model.batch_size=0"),
    "precision='bf16'": lambda: job_error(
        "gpu.name=v100", "gpu.precisions=[fp32,tf32,amp]", "precision=bf16"
    ),
    "tracking.uri='sqlite:///rel.db'": lambda: job_error("tracking.uri=sqlite:///rel.db"),
    "model.image_size=3": lambda: job_error("model.image_size=3"),
    "baseline=h200": lambda: compare_error("h200", "a6000", "rtx3090"),
    "gpus=[cpu,": lambda: override_error("gpus=[cpu,"),
    "gpu.memory_limit_gb=30.0": lambda: job_error("gpu=rtx3090", "gpu.memory_limit_gb=30"),
    "benchmark.cpu_threads=1": lambda: job_error("gpu=h200", "benchmark.cpu_threads=1"),
    "model.batch_size=auto": lambda: nothing_fits_under_a_cap(),
    "launcher.host_memory_reserve_gb=500.0": lambda: reserve_error(500.0),
    "model.name='../../etc'": lambda: job_error("model.name=../../etc"),
    "source=lambda-2021": lambda: import_error("source=lambda-2021"),
    "baseline=a6000": lambda: study_error("baseline=a6000"),
    "tracking.experiment='gpubench'": deleted_experiment_error,
}


def quoted_messages() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        for number, line in enumerate(page.read_text().splitlines(), start=1):
            found += [(f"{page.relative_to(PROJECT_ROOT)}:{number}", quote) for quote in QUOTE.findall(line)]
    return found


def key_of(quote: str) -> str:
    return quote.removeprefix("error: ").split(": ", 1)[0]


def test_the_docs_quote_messages():
    """The parser finds the quotes (a change of the docs' markup must not turn the test off)."""
    keys = {key_of(quote) for _, quote in quoted_messages()}
    assert {"model.batch_size=0", "baseline=h200"} <= keys


@pytest.mark.parametrize("where, quote", quoted_messages())
def test_a_quoted_message_is_what_the_code_prints(where, quote):
    assert key_of(quote) in PRODUCERS, f"{where}: no producer for the quoted message {quote!r}; add one"
    printed = [line.strip() for line in PRODUCERS[key_of(quote)]().splitlines()]
    if quote.endswith("..."):
        assert any(line.startswith(quote.removesuffix("...")) for line in printed), (where, printed)
    else:
        assert quote in printed, (where, printed)
