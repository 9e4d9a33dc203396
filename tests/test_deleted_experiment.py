"""An experiment deleted in MLflow (the UI's delete) keeps its name until `mlflow gc`: MLflow
refuses runs in it and hides its runs. Every command that writes to it or reads it says so in one
line naming the key, with how to restore it, before any work."""

from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

from src.errors import ConfigError
from src.tracking import store


def deleted(uri: str, name: str) -> str:
    client = MlflowClient(uri)
    experiment_id = client.create_experiment(name)
    client.delete_experiment(experiment_id)
    return experiment_id


def test_an_experiment_deleted_is_said_with_its_key_and_how_to_restore_it(tracking_uri):
    experiment_id = deleted(tracking_uri, "gpubench-published")

    with pytest.raises(ConfigError) as said:
        store.ensure_experiment(tracking_uri, "gpubench-published", "tracking.published_experiment")

    line = str(said.value)
    assert line.startswith("tracking.published_experiment='gpubench-published': deleted") and "\n" not in line
    assert f"mlflow experiments restore -x {experiment_id}" in line and tracking_uri in line


def test_an_import_into_a_deleted_published_experiment_writes_nothing(tmp_path, tracking_uri):
    from src.published.__main__ import import_table
    from tests.test_import_results import TABLE, import_cfg

    deleted(tracking_uri, "gpubench-published")
    table = tmp_path / "table.csv"
    table.write_text(TABLE)
    cfg = import_cfg("precision=fp32", "source=mine", f"file={table}", f"tracking.uri={tracking_uri}")

    with pytest.raises(ConfigError, match="tracking.published_experiment='gpubench-published': deleted"):
        import_table(cfg, table)


def test_compare_says_the_experiments_it_would_read_are_deleted(tracking_uri):
    from src.compare.runs import CompareError, search_finished

    deleted(tracking_uri, "gpubench")

    with pytest.raises(CompareError, match="tracking.experiment='gpubench': deleted"):
        search_finished(tracking_uri, ["gpubench", "gpubench-published"], "", "hint")
