"""What the store already holds of a published source, and what a re-import may not change.

A figure counts as imported once its run is FINISHED (its last write); a run with an import key
that never finished was left by a killed import and is deleted, to be written again.
"""

from __future__ import annotations

from pathlib import Path

from src import recorded, run_result

# what a re-import compares, as a person reads it
SHOWN_AS = {recorded.THROUGHPUT: recorded.THROUGHPUT, "gpu.count": "num_gpu", "gpu.tdp_w": "watt per GPU", "gpu.price_usd": "price per GPU"}


def import_key(source: str, precision: str, system: str, gpu_count: int, task: str) -> str:
    """A published figure's identity: one table may list a system at several GPU counts."""
    return f"{source}|{precision}|{system}|{gpu_count}|{task}"


def spec_params(result) -> dict[str, str]:
    """Per-GPU spec figures under the param names measured runs get from their gpu profile, as
    MLflow stores them (text): what a re-import compares."""
    return {
        "gpu.count": str(result.gpu_count),
        "gpu.tdp_w": str(result.watt / result.gpu_count if result.watt else None),
        "gpu.price_usd": str(result.price_usd / result.gpu_count if result.price_usd else None),
    }


def existing_figures(
    mlflow_client, experiment_id: str, source: str, still_running
) -> tuple[dict[str, run_result.RunResult], list[str]]:
    """(import_key -> the FINISHED run that holds the figure, the owner pids of runs another import
    still writes: `still_running(tags)`). A run with the key that never finished and whose import
    has gone is deleted: the figure is written again."""
    figures, writing, token = {}, [], None
    while True:
        page = mlflow_client.search_runs(
            [experiment_id],
            filter_string=f"tags.{recorded.SOURCE} = '{source}'",
            max_results=1000,
            page_token=token,
        )
        for result in map(run_result.read, page):
            if recorded.IMPORT_KEY not in result.tags:
                continue
            if result.status == "FINISHED":
                figures[result.tags[recorded.IMPORT_KEY]] = result
            elif result.status == "RUNNING" and still_running(result.tags):
                writing.append(result.tags[recorded.OWNER_PID])
            else:
                mlflow_client.delete_run(result.run_id)
        token = page.token
        if not token:
            return figures, writing


def changed_figures(path: Path, results: list, existing: dict, source: str, precision: str) -> list[str]:
    """Each figure the store holds for the same published row with another value (throughput, watt
    or price), as file:line and what differs."""
    changed = []
    for r in results:
        before = existing.get(import_key(source, precision, r.system, r.gpu_count, r.task))
        if before is None:
            continue
        now = {recorded.THROUGHPUT: f"{r.throughput:g}"} | spec_params(r)
        then = {k: before.params.get(k, v) for k, v in now.items()}
        if before.throughput is not None:
            then[recorded.THROUGHPUT] = f"{before.throughput:g}"
        differ = [f"{SHOWN_AS[k]}={now[k]} (imported before: {then[k]})" for k in now if now[k] != then[k]]
        if differ:
            changed.append(
                f"{path}:{r.line}: {r.task} for {r.system!r} x{r.gpu_count}: {', '.join(differ)}, "
                f"run {before.run_id}"
            )
    return changed
