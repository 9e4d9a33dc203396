"""Input gpubench cannot use is said in one line with the exit status docs/failures.md gives it,
never a traceback: a malformed store address in every entry point, a run whose schema_version this
gpubench cannot read, names that would become metric keys or file names."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import compose_cfg

from src.paths import PROJECT_ROOT
from src.results.recorded import SCHEMA_VERSION

MALFORMED = "http://[::1"  # an IPv6 address without its closing bracket
LATER = str(SCHEMA_VERSION + 1)  # "3": a later gpubench's run
SAID = f"tracking.uri='{MALFORMED}': not an address (Invalid IPv6 URL); must be sqlite:////"


def entry_point(args: list[str], env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=PROJECT_ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize(
    "args, status",
    [
        (["src.train", "gpu=cpu", "benchmark=smoke"], 2),
        (["src.train", "-m", "gpu=cpu", "benchmark=smoke"], 2),
        (["src.compare", "baseline=rtx3090"], 2),
        (["src.published", "source=lambda-2021"], 2),
        (["src.doctor", "gpu=cpu"], 1),  # a check failed: its FAIL line says what
    ],
)
@pytest.mark.slow  # a real process per entry point
def test_a_malformed_address_in_the_environment_is_one_line_in_every_entry_point(args, status):
    done = entry_point(args, {"MLFLOW_TRACKING_URI": MALFORMED})
    assert done.returncode == status, done.stderr[-3000:]
    assert "Traceback" not in done.stdout + done.stderr
    assert SAID in done.stdout + done.stderr


def test_a_malformed_address_is_taken_by_the_credentials_and_named_by_the_checks():
    from src import doctor
    from src.tracking import credentials

    assert credentials.adopt_uri_credentials(MALFORMED) == MALFORMED
    check = doctor.check_tracking(compose_cfg([f'tracking.uri="{MALFORMED}"']))
    assert check.status == "FAIL" and check.text.startswith(SAID)


@pytest.mark.parametrize(
    "main, argv, said",
    [
        ("src.sync", ["--uri", MALFORMED], f"--uri={MALFORMED}: not an address (Invalid IPv6 URL)"),
        (
            "src.server",
            ["--backend-store-uri", "postgresql://[::1"],
            "--backend-store-uri=postgresql://[::1: not a",
        ),
    ],
)
def test_a_malformed_address_is_bad_arguments_to_sync_and_server(main, argv, said, capsys):
    import importlib

    module = importlib.import_module(main)
    with pytest.raises(SystemExit) as exited:
        (module.parse_args if main == "src.server" else module.main)(argv)
    assert exited.value.code == 2
    assert said in capsys.readouterr().err


@pytest.fixture
def runs_of_versions(tracking_uri):
    """A finished run per schema_version value (none: a version-1 run), in the `gpubench` experiment."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    experiment = client.create_experiment("gpubench")

    def run(version: str | None):
        tags = {"gpu": "h200", "gpu_count": "1", "model": "resnet50", "precision": "amp"}
        if version is not None:
            tags["schema_version"] = version
        created = client.create_run(experiment, tags=tags, run_name=f"version {version}")
        client.log_metric(created.info.run_id, "throughput", 100.0)
        client.set_terminated(created.info.run_id, "FINISHED")
        return client.get_run(created.info.run_id)

    return run


def test_runs_of_the_versions_gpubench_reads_are_read(runs_of_versions):
    from src.results import recorded, run_result

    assert run_result.read(runs_of_versions(None)).schema_version == recorded.FIRST_SCHEMA
    now = str(recorded.SCHEMA_VERSION)
    assert run_result.read(runs_of_versions(now)).schema_version == recorded.SCHEMA_VERSION


@pytest.mark.parametrize(
    "version, why",
    [("two", "no gpubench wrote it"), ("2.0", "no gpubench wrote it"), (LATER, "a later gpubench wrote it")],
)
def test_a_run_of_a_version_gpubench_cannot_read_is_refused_in_one_line(runs_of_versions, version, why):
    from src.errors import ConfigError
    from src.results import run_result

    run = runs_of_versions(version)
    with pytest.raises(ConfigError) as refused:
        run_result.read(run)
    assert str(refused.value) == (
        f"run {run.info.run_id} (version {version}): schema_version={version!r}: this gpubench reads "
        f"versions 1 to {SCHEMA_VERSION}; {why}{': upgrade to read it' if version == LATER else ''}, or move "
        "the run to another experiment"
    )


@pytest.mark.slow  # a compare process
def test_compare_over_a_run_it_cannot_read_exits_2_in_one_line(runs_of_versions, tracking_uri, tmp_path):
    runs_of_versions("two")
    done = entry_point(
        ["src.compare", "baseline=h200", f"out={tmp_path}/out", f"tracking.uri={tracking_uri}"]
    )
    assert done.returncode == 2, done.stderr[-3000:]
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: run ") and "schema_version='two'" in line


@pytest.mark.parametrize(
    "override",
    [
        "model.name=../../etc",
        "model.name=resnet50/amp",
        "gpu.name=a:b",
        "benchmark.name=",
        f"model.name={'x' * 65}",
    ],
)
def test_a_name_that_becomes_a_metric_key_or_file_name_is_checked_before_the_job(override):
    from src.config.finalise import finalize
    from src.errors import ConfigError

    key, _, value = override.partition("=")
    with pytest.raises(ConfigError) as refused:
        finalize(compose_cfg(["gpu=cpu", "model=resnet50", "benchmark=smoke", override]))
    assert f"{key}={value!r}: must be a name of up to 64 letters, digits, '_', '-' and '.'" in str(
        refused.value
    )


@pytest.mark.slow  # a job process
def test_a_job_named_outside_its_folder_stops_before_it_trains(tracking_uri, tmp_path):
    from conftest import read_runs

    done = entry_point(
        [
            "src.train",
            "gpu=cpu",
            "benchmark=smoke",
            "model.name=../../etc",
            f"tracking.uri={tracking_uri}",
            f"hydra.run.dir={tmp_path}/job",
        ]
    )
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stderr.strip().splitlines()[-1].startswith("  model.name='../../etc': must be a name")
    assert read_runs(tracking_uri) == [] and not (tmp_path / "job" / "ranks").exists()  # nothing trained
