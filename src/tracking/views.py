"""Saved views of an experiment's runs page in the MLflow UI, as its own Views menu saves them.

MLflow 3.17 keeps a saved view as the experiment tag `mlflow.sharedViewState.<key>`: JSON of
{name, createdAt, updatedAt, state}, where state is the runs page's state as a JSON string. The
Views menu lists them by name; `...#/experiments/<id>/runs?viewStateShareKey=<key>` opens one.
Which of table and chart view shows is not part of a view: the address says it (`compareRunsMode`).
Two views:

- `runs`: the table with the columns that say what a run measured (gpu, model, precision, GPU
  count, throughput and its spread), newest first; every run shown in the charts;
- `by-gpu`: the same, grouped by the `gpu` and `source` tags (a publisher's generations never
  pool), in the chart view, its charts narrowed to the per-workload throughput keys
  (`throughput/<model>/<precision>/x<count>`, src/tracking/tags.py): one chart per model,
  precision and GPU count, one bar per gpu. The plain `throughput` is left out of it: averaged
  over a group it mixes images/s and tokens/s of different models. Every group drawn (the UI's
  default draws the first 10 runs or groups only).

A view with a search filter in the address is not loaded (the UI then takes the address's filter):
the filter is typed in the search box once the view is open.
"""

from __future__ import annotations

import json
import time

from src.results import recorded

TAG_PREFIX = "mlflow.sharedViewState."
RUNS, BY_GPU = "gpubench-runs", "gpubench-by-gpu"
NAMES = {RUNS: "gpubench: what each run measured", BY_GPU: "gpubench: throughput by gpu, per workload"}
MODES = {RUNS: "TABLE", BY_GPU: "CHART"}  # the address's compareRunsMode for each
COLUMNS = [
    *(f"tags.`{tag}`" for tag in (recorded.GPU, recorded.MODEL, recorded.PRECISION, recorded.GPU_COUNT, recorded.UNIT)),
    *(
        f"metrics.`{metric}`"
        for metric in (recorded.THROUGHPUT, recorded.THROUGHPUT_PER_GPU, recorded.STEP_TIME_CI95_REL, recorded.MFU)
    ),
    *(f"tags.`{tag}`" for tag in (recorded.BENCHMARK, recorded.STOP_REASON, recorded.SOURCE, recorded.ANOMALY)),
]
GROUP_BY_GPU = {
    "aggregateFunction": "average",
    "groupByKeys": [{"mode": "tag", "groupByData": recorded.GPU}, {"mode": "tag", "groupByData": recorded.SOURCE}],
}
WORKLOAD_CHARTS = f"{recorded.THROUGHPUT}/"  # the chart filter: the per-workload keys only


def state(key: str) -> dict:
    """The runs page's state for one of the two views."""
    view = {
        "searchFilter": "",
        "orderByKey": "attributes.start_time",
        "orderByAsc": False,
        "selectedColumns": COLUMNS,
        "runsHiddenMode": "SHOW_ALL",
        "hideEmptyCharts": True,
        "useGroupedValuesInCharts": True,
        "groupBy": None,
    }
    if key == BY_GPU:
        view |= {"groupBy": GROUP_BY_GPU, "chartsSearchFilter": WORKLOAD_CHARTS}
    return view


def save(client, experiment_id: str) -> None:
    """Write both views onto the experiment (again each time: a newer release may change them)."""
    now = int(time.time() * 1000)
    for key, name in NAMES.items():
        envelope = {"name": name, "createdAt": now, "updatedAt": now, "state": json.dumps(state(key))}
        client.set_experiment_tag(experiment_id, TAG_PREFIX + key, json.dumps(envelope))
