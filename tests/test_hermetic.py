"""The test run ignores the caller's MLflow settings: users often export MLFLOW_TRACKING_URI."""

from __future__ import annotations

import os

from src.paths import PROJECT_ROOT
from tests.conftest import compose_cfg, pytest_configure


def test_callers_mlflow_variables_never_reach_the_tests(monkeypatch):
    # A user with a team server and a token exported starts the test run.
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow.example.org:5000")
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", "t0ken")
    pytest_configure(None)
    assert not [k for k in os.environ if k.startswith("MLFLOW_")]
    assert compose_cfg().tracking.uri == f"sqlite:///{PROJECT_ROOT}/mlruns/mlflow.db"
