"""What src.compare and src.published say of themselves: --help gives their own usage (not the
training job's groups, which they refuse), and a group they do not take is refused without
Hydra's `+group=` hint, which would add a group they never read."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import HydraException

from src.config.cli import composition_error
from src.config.schema import register_configs
from src.paths import PROJECT_ROOT
from tests.conftest import CONF_DIR


@pytest.mark.parametrize(
    ("module", "usage"),
    [
        ("src.published", "python -m src.published FILE precision=fp32|amp source=NAME"),
        ("src.compare", "python -m src.compare experiment=lambda_a6000_vs_3090"),
    ],
)
def test_help_gives_the_commands_own_usage(module, usage):
    shown = subprocess.run(
        [sys.executable, "-m", module, "--help"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0 and usage in shown.stdout
    assert "model: bert_large" not in shown.stdout and "powered by Hydra" not in shown.stdout


@pytest.mark.parametrize("config", ["compare", "import_results"])
def test_a_group_the_command_does_not_take_is_refused_naming_it_without_the_plus_hint(config):
    register_configs()
    with (
        initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"),
        pytest.raises(HydraException) as error,
    ):
        compose(config, overrides=["model=resnet50"])

    line = composition_error(error.value)

    assert line.startswith("model=resnet50: not a setting of this command") and "use +model" not in line
