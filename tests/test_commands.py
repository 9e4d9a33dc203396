"""The console commands of [project.scripts]: each runs its module as `python -m` does, from any folder."""

from __future__ import annotations

import functools
import os
import subprocess
import sys

import pytest

from src import commands
from src.paths import PROJECT_ROOT

tomllib = pytest.importorskip("tomllib")  # Python 3.11+
SCRIPTS = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"]["scripts"]


def _call(target: str, args: list[str], cwd) -> subprocess.CompletedProcess:
    """What pip's script wrapper does: import the target, set argv, call it (this checkout's
    package first, as an install of it would be)."""
    module, _, name = target.partition(":")
    code = f"import sys; from {module} import {name}; sys.argv = sys.argv[1:]; {name}()"
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    return subprocess.run(
        [sys.executable, "-c", code, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


@functools.cache  # two scripts run src.train with the same arguments: what it prints is asked once
def _python_m(module: str, args: tuple[str, ...]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", module, *args], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300
    )


def test_every_script_names_a_command_here():
    assert set(SCRIPTS) == {"gpubench", "gpubench-train", "gpubench-compare", "gpubench-doctor"}
    for target in SCRIPTS.values():
        module, _, name = target.partition(":")
        assert callable(getattr(__import__(module, fromlist=[name]), name))


@pytest.mark.parametrize(
    ("script", "args", "module"),
    [
        ("gpubench-train", ["--cfg", "job", "gpu=cpu", "model=gpt2"], "src.train"),
        ("gpubench", ["train", "--cfg", "job", "gpu=cpu", "model=gpt2"], "src.train"),
        ("gpubench-compare", ["--cfg", "job", "baseline=a6000"], "src.compare"),
    ],
)
def test_a_script_prints_what_python_m_prints_from_any_folder(script, args, module, tmp_path):
    done = _call(SCRIPTS[script], [script, *args], cwd=tmp_path)
    expected = _python_m(module, tuple(a for a in args if a != "train"))
    assert done.returncode == expected.returncode == 0, done.stderr
    assert done.stdout == expected.stdout
    assert "name: gpt2" in done.stdout if module == "src.train" else "baseline: a6000" in done.stdout


def test_gpubench_lists_its_commands_and_refuses_an_unknown_one(tmp_path):
    listed = _call(SCRIPTS["gpubench"], ["gpubench", "--help"], cwd=tmp_path)
    assert listed.returncode == 0
    assert [line.split()[0] for line in listed.stdout.splitlines()[1:]] == list(commands.COMMANDS)
    wrong = _call(SCRIPTS["gpubench"], ["gpubench", "trian"], cwd=tmp_path)
    assert wrong.returncode == 2
    assert wrong.stderr.strip() == (
        "error: gpubench 'trian': no such command; one of train, compare, doctor, import, sync, server"
    )


def test_gpubench_doctor_takes_its_arguments(tmp_path):
    done = _call(SCRIPTS["gpubench"], ["gpubench", "doctor", "--help"], cwd=tmp_path)
    assert done.returncode == 0
    assert done.stdout.startswith("Entry point: `python -m src.doctor [key=value ...]`")


def test_an_install_without_the_projects_configs_says_so_in_one_line(monkeypatch, tmp_path, capsys):
    """A wheel holds the code but not conf/ and reference/, which stay in the checkout: a command run
    from such an install says what to install instead, before anything runs."""
    from src import paths

    monkeypatch.setattr(paths, "PROJECT_ROOT", tmp_path / "site-packages")  # where a wheel puts src/
    monkeypatch.setattr(sys, "argv", ["gpubench-doctor"])

    with pytest.raises(SystemExit) as exited:
        commands.doctor()

    said = capsys.readouterr().err
    assert exited.value.code == 2 and said.count("\n") == 1
    assert said.startswith(f"error: gpubench: no conf/ at {tmp_path / 'site-packages' / 'conf'}")
    assert "pip install -e" in said
