"""compare under faults, tried as a hostile user or a bad day would: a report folder whose record of
files names paths outside it, a compare killed or failed midway, a full disk, an address that is no
MLflow server or one that never answers, Ctrl-C and SIGTERM during the study's import. Each is one
line and an exit status that means what docs/failures.md says, nothing is deleted outside the folder,
and the next compare into the folder goes on."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from src.compare.folder import WRITTEN
from src.errors import ConfigError, TrackingUnavailable
from src.paths import PROJECT_ROOT
from tests.conftest import run_cli, store_copy
from tests.test_compare import run, runs_store

EXPERIMENT = "gpubench"


@pytest.fixture(scope="module")
def store(tmp_path_factory, empty_store) -> str:
    return runs_store(tmp_path_factory.mktemp("faults"), empty_store)[0]


def test_a_record_naming_files_outside_its_folder_deletes_nothing_there(store, tmp_path):
    """Anyone who can write a shared report folder can write its record: `..`, an absolute path and a
    link to a file outside are never followed; compare removes only the files of its own folder."""
    folder, victims = tmp_path / "shared", [tmp_path / "victim.txt", tmp_path / "elsewhere" / "absolute.txt"]
    for victim in victims:
        victim.parent.mkdir(exist_ok=True)
        victim.write_text("keep me")
    folder.mkdir()
    (folder / "report.md").symlink_to(tmp_path / "victim.txt")  # a link where compare writes report.md
    names = ["../victim.txt", str(victims[1]), "report.md", "../elsewhere/absolute.txt"]
    (folder / WRITTEN).write_text("".join(f"{name}\n" for name in names))
    result = run(store, folder, "models=[ssd300]", "tag_runs=false")
    assert [victim.read_text() for victim in victims] == ["keep me", "keep me"]
    assert (
        not (folder / "report.md").is_symlink()
        and "# Training throughput" in (folder / "report.md").read_text()
    )
    assert sorted((folder / WRITTEN).read_text().split()) == sorted(p.name for p in result.files)


@pytest.mark.slow  # a real compare killed outright: CI's slow set (README)
def test_a_compare_killed_midway_never_blocks_the_next_one_into_its_folder(store, tmp_path):
    folder = tmp_path / "report"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "src.compare", f"tracking.uri={store}", f"out={folder}", "all=true"]
    killed = subprocess.Popen(
        [*command, "tag_runs=false"], cwd=PROJECT_ROOT, env=env, stdout=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 120
    while not (folder / "summary.csv").exists() and time.monotonic() < deadline:  # its CSVs, then charts
        time.sleep(0.02)
    killed.send_signal(signal.SIGKILL)
    assert killed.wait(30) == -signal.SIGKILL
    assert (folder / "summary.csv").exists() and not (folder / "report.md").exists()  # killed midway
    again = run(store, folder, "models=[ssd300]", "tag_runs=false")  # not refused: it wrote those
    assert sorted(p.name for p in folder.iterdir() if p.name != WRITTEN) == sorted(
        p.name for p in again.files
    )


def tiny_disk(folder, size: str):
    """A tmpfs of `size` mounted at `folder` (root only): where a PNG finds the disk full."""
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"a tmpfs cannot be mounted here (root only): {mounted.stderr.decode().strip()}")


def test_a_full_disk_under_out_is_one_line_and_leaves_the_folder_open_to_the_next_compare(store, tmp_path):
    folder = tmp_path / "full"
    tiny_disk(folder, "96k")  # the CSVs and report.md fit, the charts do not
    try:
        with pytest.raises(ConfigError) as full:
            run(store, folder, "all=true", "charts=true", "tag_runs=false")
        (line,) = str(full.value).splitlines()
        assert line == f"out={str(folder)!r}: cannot be written (No space left on device); nothing was logged"
        assert os.listdir(folder) == []  # what it wrote went, and its record with it
        again = run(store, folder, "all=true", "tag_runs=false")  # without charts it fits
        assert (folder / "report.md").exists() and again.report_run_id
    finally:
        subprocess.run(["umount", str(folder)], check=False)


class NotMLflow(BaseHTTPRequestHandler):
    """An http:// address that answers, but not with MLflow's API (a proxy's login page, a wiki)."""

    def do_GET(self):
        body = b"<html><body>Sign in</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def not_mlflow():
    server = HTTPServer(("127.0.0.1", 0), NotMLflow)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


@pytest.fixture
def silent():
    """A port that takes connections and never answers."""
    listener = socket.create_server(("127.0.0.1", 0))
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    listener.close()


@pytest.mark.parametrize("address", ["not_mlflow", "silent"])
def test_an_address_that_is_no_mlflow_server_or_never_answers_is_one_line(
    address, tmp_path, monkeypatch, request
):
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "1")  # the user's settings win over compare's
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    uri = request.getfixturevalue(address)
    with pytest.raises(TrackingUnavailable) as away:
        run(uri, tmp_path / "out")
    (line,) = str(away.value).splitlines()
    assert line.startswith(f"tracking.uri='{uri}': the tracking store cannot be reached (")
    assert not (tmp_path / "out").exists()  # a compare that fails leaves no folder behind


@pytest.mark.slow  # a real compare process: CI's slow set (README)
def test_the_cli_says_a_store_that_is_no_mlflow_server_in_one_line(not_mlflow, tmp_path):
    done = run_cli([f"out={tmp_path}/out"], tmp_path, not_mlflow, module="src.compare")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: tracking.uri=") and "the tracking store cannot be reached" in line


def study_import(tmp_path, empty_store):
    """`python -m src.compare experiment=lambda_a6000_vs_3090` on an empty store, in a process group
    of its own, once the study's import has written its first run."""
    from mlflow.tracking import MlflowClient

    uri = store_copy(empty_store, tmp_path / "mlruns")
    command = [sys.executable, "-m", "src.compare", "experiment=lambda_a6000_vs_3090", f"tracking.uri={uri}"]
    proc = subprocess.Popen(
        [*command, f"out={tmp_path}/out"],
        cwd=PROJECT_ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    client, deadline = MlflowClient(uri), time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        published = client.get_experiment_by_name("gpubench-published")
        if published and client.search_runs([published.experiment_id], max_results=1):
            return proc
        time.sleep(0.05)
    proc.kill()
    pytest.fail("the study's import never began: " + proc.communicate()[1][-2000:])


@pytest.mark.slow  # the study's import interrupted in a real process: CI's slow set (README)
def test_ctrl_c_during_the_studys_import_exits_130_with_the_runs_written_whole(tmp_path, empty_store):
    proc = study_import(tmp_path, empty_store)
    os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C reaches the whole foreground group
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert line.startswith("error: interrupted (SIGINT)")  # between two runs' writes, or between two tables


@pytest.mark.slow  # the study's import stopped in a real process: CI's slow set (README)
def test_sigterm_to_compare_during_the_studys_import_leaves_no_process_behind(tmp_path, empty_store):
    proc = study_import(tmp_path, empty_store)
    proc.send_signal(signal.SIGTERM)  # a scheduler's, to compare's own process
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, err[-2000:]
    time.sleep(1)
    with pytest.raises(ProcessLookupError):  # nothing of its process group runs on: no import
        os.killpg(proc.pid, 0)
