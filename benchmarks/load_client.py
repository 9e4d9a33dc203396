"""One load client: replays what a real job logs, through the job's own JobRun, against a server.

`JobTemplate` is the run of one real job read back from its store (tags, the whole config as
params, metrics, config.yaml, environment.json, step_times.csv), with the telemetry of a job of
`gpus` GPUs made by the telemetry module's own series and CSV functions. `replay` logs it in the
order src/run/job.py does and times each call; `count_landed` reads back what the server holds.
"""

from __future__ import annotations

import os
import random
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import OmegaConf

from src.hardware import telemetry
from src.results import recorded
from src.tracking import spool
from src.tracking.job_run import JobRun

CLIENT_TAG = "load_client"  # which client logged a run: one run per client must land
ARTIFACTS = ("config.yaml", "environment.json", "step_times.csv")
# A job writes three times: its run, its set-up (JobRun.flush) and its result (JobRun.end)
KINDS = ("create", "setup", "end")


@dataclass
class JobTemplate:
    tags: dict[str, str]
    later_tags: dict[str, str]
    params: dict[str, str]
    metrics: dict[str, float]
    texts: dict[str, str]  # artifact name -> content
    telemetry: list[tuple] = field(default_factory=list)  # (key, value, ms, step)

    @classmethod
    def from_run(cls, uri: str, run_id: str, gpus: int, duration_s: float) -> JobTemplate:
        """A real job's run, with the telemetry of `gpus` GPUs sampled for `duration_s`."""
        from mlflow.tracking import MlflowClient

        client = MlflowClient(uri)
        run = client.get_run(run_id)
        tags = {
            k: v for k, v in run.data.tags.items() if not k.startswith("mlflow.") and k != recorded.IDEMPOTENCY_KEY
        }
        # set once the job has run, as job.py does; the rest open the run
        later = {
            k: v for k, v in tags.items() if k == recorded.UNIT or k.startswith(recorded.MATH_PREFIX) or k.endswith(recorded.VERSION_SUFFIX)
        }
        with tempfile.TemporaryDirectory() as folder:
            texts = {
                name: Path(client.download_artifacts(run_id, name, folder)).read_text() for name in ARTIFACTS
            }
        rows = gpu_rows(gpus, duration_s)
        texts["telemetry.csv"] = telemetry.to_csv(rows)
        return cls(
            tags={k: v for k, v in tags.items() if k not in later},
            later_tags=later,
            params=dict(run.data.params),
            metrics={k: v for k, v in run.data.metrics.items() if not k.startswith("telemetry/")},
            texts=texts,
            telemetry=telemetry.series_points(rows),
        )

    def expected_metric_keys(self) -> set[str]:
        return set(self.metrics) | {p[0] for p in self.telemetry}


def gpu_rows(gpus: int, duration_s: float, interval_s: float = 0.1) -> dict[str, list[tuple]]:
    """Sampler rows (time, *fields) of the host and `gpus` busy GPUs, as telemetry.Sampler keeps them."""
    rng, start = random.Random(0), time.time() - duration_s
    stamps = [start + i * interval_s for i in range(int(duration_s / interval_s))]
    rows = {"host": [(t, rng.uniform(5, 20), 40.0) for t in stamps]}
    for i in range(gpus):
        rows[f"gpu{i}"] = [
            (t, rng.uniform(95, 100), rng.uniform(30, 60), 60.0, rng.uniform(550, 700), 1e6 + 650 * n * interval_s,
             rng.uniform(60, 75), 1980.0, 2619.0, 0, 200.0, 180.0)
            for n, t in enumerate(stamps)
        ]  # fmt: skip
    return rows


def client_process(job, url, experiment, index, spool_dir, gates, retries, backoff_s, results) -> None:
    """The body of one client process: replay, then hand the result to the parent's queue."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # N clients' "View run" lines would bury the table; errors come back as data
    os.dup2(devnull, 2)
    results.put(replay(job, url, experiment, index, spool_dir, gates, retries, backoff_s))


def replay(job: JobTemplate, url: str, experiment: str, index: int, spool_dir: Path, gates, retries: int,
           backoff_s: float) -> dict:  # fmt: skip
    """Log `job` as client `index` through JobRun; returns the seconds each call took, by kind.

    `gates` are two barriers: all clients start together, and meet again where training would run
    (the restart drill stops the server there). A call made after the server went away is not
    timed: JobRun only keeps it in its record, to spool and deliver at the end.
    """
    from mlflow.tracking import MlflowClient

    cfg = OmegaConf.create({"uri": url, "experiment": experiment, "retries": retries, "backoff_s": backoff_s})
    times: dict[str, list[float]] = {kind: [] for kind in KINDS}
    result = {"index": index, "times": times, "error": None, "spooled": False}
    run = None

    def timed(kind: str, call):
        started = time.perf_counter()
        value = call()
        if run is None or run.online:
            times[kind].append(time.perf_counter() - started)
        return value

    try:
        gates[0].wait(timeout=600)
        experiment_id = MlflowClient(url).get_experiment_by_name(experiment).experiment_id
        tags = {**job.tags, CLIENT_TAG: str(index)}
        run = timed("create", lambda: JobRun(cfg, experiment_id, f"load-{index}", tags, None, spool_dir))
        run.log_text(job.texts["environment.json"], "environment.json")
        run.log_params({k: v for k, v in job.params.items() if k != recorded.BATCH_SIZE})
        run.log_text(job.texts["config.yaml"], "config.yaml")
        timed("setup", run.flush)
        gates[1].wait(timeout=600)
        run.log_series(job.telemetry)
        run.log_text(job.texts["telemetry.csv"], "telemetry.csv")
        run.log_params({recorded.BATCH_SIZE: job.params[recorded.BATCH_SIZE]})
        run.log_metrics(job.metrics)
        run.set_tags(job.later_tags)
        run.log_text(job.texts["step_times.csv"], "step_times.csv")
        timed("end", lambda: run.end("FINISHED"))
        result["spooled"] = not run.online
    except Exception as exc:  # counted as an error of this client; the others go on
        result["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
    result["left_for_sync"] = (spool_dir / spool.RUN_FILE).exists()
    return result


def count_landed(url: str, experiment: str, job: JobTemplate, clients: int) -> dict:
    """Clients whose run the server holds complete (FINISHED, every param, metric, telemetry point
    and artifact), and runs beyond one per client (duplicates)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(url)
    experiment_id = client.get_experiment_by_name(experiment).experiment_id
    runs = client.search_runs([experiment_id], max_results=10 * clients + 100)
    by_client: dict[str, list] = {}
    for run in runs:
        by_client.setdefault(run.data.tags.get(CLIENT_TAG), []).append(run)
    probe = job.telemetry[-1][0]
    points = sum(1 for p in job.telemetry if p[0] == probe)
    names = set(job.texts)

    def complete(run) -> bool:
        return (
            run.info.status == "FINISHED"
            and run.data.params == job.params
            and set(run.data.metrics) == job.expected_metric_keys()
            and {a.path for a in client.list_artifacts(run.info.run_id)} == names
            and len(client.get_metric_history(run.info.run_id, probe)) == points
        )

    landed = sum(1 for i in range(clients) if any(complete(r) for r in by_client.get(str(i), [])))
    duplicates = sum(len(found) - 1 for found in by_client.values())
    return {"landed": landed, "duplicates": duplicates, "runs": len(runs)}
