"""Every value a run is given fits every backend MLflow supports: cut to the column's size, the
whole text kept as an artifact the cut value names. (sqlite keeps anything, so these tests read the
values back and measure them; tests/test_postgres_compare.py runs the real PostgreSQL.)"""

from __future__ import annotations

from omegaconf import OmegaConf

from src.tracking import job_run, store


def test_the_limits_are_those_of_the_installed_mlflow():
    from mlflow.store.tracking.dbmodels.models import SqlParam, SqlRun, SqlTag
    from mlflow.utils import validation

    assert job_run.TAG_VALUE_MAX == validation.MAX_TAG_VAL_LENGTH == SqlTag.value.type.length
    assert job_run.PARAM_VALUE_MAX == validation.MAX_PARAM_VAL_LENGTH <= SqlParam.value.type.length
    assert job_run.RUN_NAME_MAX == SqlRun.name.type.length


def test_long_tags_params_and_names_are_cut_to_fit_and_kept_whole_as_artifacts(tracking_uri, tmp_path):
    from mlflow.tracking import MlflowClient

    tracking = OmegaConf.create({"uri": tracking_uri, "experiment": "gpubench", "retries": 1, "backoff_s": 0})
    experiment_id = store.ensure_experiment(tracking_uri, "gpubench")
    note = "# a report\n" + "one line of a long report\n" * 2000  # 50,000 characters and more
    setting, error = "x" * 7000, "a reason " * 1000
    run = job_run.JobRun(tracking, experiment_id, "n" * 300, {"mlflow.note.content": note, "short": "kept"})
    run.log_params({"long.setting": setting, "batch_size": 8})
    run.set_tags({"error": error})
    run.end("FINISHED")

    client = MlflowClient(tracking_uri)
    stored = client.get_run(run.run_id)
    assert stored.info.run_name == "n" * job_run.RUN_NAME_MAX
    assert stored.data.tags["short"] == "kept" and stored.data.params["batch_size"] == "8"
    for value, kept, limit, kind, key in [
        (note, stored.data.tags["mlflow.note.content"], job_run.TAG_VALUE_MAX, "tags", "mlflow.note.content"),
        (error, stored.data.tags["error"], job_run.TAG_VALUE_MAX, "tags", "error"),
        (setting, stored.data.params["long.setting"], job_run.PARAM_VALUE_MAX, "params", "long.setting"),
    ]:
        artifact = f"{job_run.LONG_VALUES_DIR}/{kind}/{key}.txt"
        assert len(kept) <= limit and kept.endswith(
            f"{len(value):,} characters in all: the whole text is the run's artifact {artifact}]"
        )
        assert value.startswith(kept[: limit // 2])
        assert open(client.download_artifacts(run.run_id, artifact, str(tmp_path))).read() == value
