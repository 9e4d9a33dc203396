"""The job process: resolves the hardware, opens the MLflow run, launches the ranks, combines their
reports, logs. It never imports torch (tests/test_cli.py checks): torch lives in src/rank/, which
it starts as processes, and inside the model builders."""
