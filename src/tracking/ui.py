"""Where a person looks at the runs: the MLflow UI address of an experiment's runs table.

MLflow 3 opens an experiment on its GenAI overview (traces) unless the address asks for the
classic runs table with `workflowType=machine_learning`. The address also names a saved view
(src/tracking/views.py) that sets the table's columns, or groups the runs by gpu and charts their
throughput. The embedded sqlite store has no server: `mlflow ui` serves it on 127.0.0.1:5000.
"""

from __future__ import annotations

from src.tracking import views
from src.tracking.credentials import redact

LOCAL_UI = "http://127.0.0.1:5000"


def runs_url(uri: str, experiment_id: str, view: str | None = None) -> str:
    base = uri.rstrip("/") if uri.startswith(("http://", "https://")) else LOCAL_UI
    shared = f"&viewStateShareKey={view}&compareRunsMode={views.MODES[view]}" if view else ""
    return redact(f"{base}/#/experiments/{experiment_id}/runs?workflowType=machine_learning{shared}")


def _save_views(uri: str, experiment_id: str) -> bool:
    from src.tracking import store

    try:
        views.save(store.client(uri), experiment_id)
    except Exception:  # an address without the view still opens the runs table
        return False
    return True


def how_to_open(uri: str, experiment_id: str) -> str:
    """The runs table's address (and the command that serves it where no server does), then the
    address of the runs grouped by gpu with their throughput charted; saves both views first."""
    if not _save_views(uri, experiment_id):
        url, grouped = runs_url(uri, experiment_id), ""
    else:
        url = runs_url(uri, experiment_id, views.RUNS)
        grouped = f"\nby gpu, throughput charted: {runs_url(uri, experiment_id, views.BY_GPU)}"
    if uri.startswith(("http://", "https://")):
        return f"MLflow UI (runs table): {url}{grouped}"
    return f"MLflow UI: `mlflow ui --backend-store-uri {redact(uri)}`, then open {url}{grouped}"
