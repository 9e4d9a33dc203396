"""Where a person looks at the runs: the MLflow UI address of an experiment's runs table.

MLflow 3 opens an experiment on its GenAI overview (traces) unless the address asks for the
classic runs table with `workflowType=machine_learning`; the UI then keeps that choice in the
browser. The embedded sqlite store has no server: `mlflow ui` serves it on 127.0.0.1:5000.
"""

from __future__ import annotations

from src.credentials import redact

LOCAL_UI = "http://127.0.0.1:5000"


def runs_url(uri: str, experiment_id: str) -> str:
    base = uri.rstrip("/") if uri.startswith(("http://", "https://")) else LOCAL_UI
    return redact(f"{base}/#/experiments/{experiment_id}/runs?workflowType=machine_learning")


def how_to_open(uri: str, experiment_id: str) -> str:
    """One line: the runs table's address, and the command that serves it where no server does."""
    url = runs_url(uri, experiment_id)
    if uri.startswith(("http://", "https://")):
        return f"MLflow UI (runs table): {url}"
    return f"MLflow UI: `mlflow ui --backend-store-uri {redact(uri)}`, then open {url}"
