"""What the store already holds of a published source, who is writing it, and what a re-import may
not change.

One import per source per store, whatever runs at once: an import holds the source's lock while it
reads what is there and writes what is not (SourceLock). The lock lives in the store itself, as a
RUNNING run tagged `import_lock=<source>`, so it binds every process that shares the store, on any
host: a file lock binds one host only, and a team's MLflow server serves many. MLflow offers no
compare-and-set, so an import takes the lock by creating its lock run and then looking: another
live lock run of the source means another import holds it or is taking it too, and it deletes its
own and tries again after a random pause. Of two imports taking it at once, the one that looks
second sees the other's run, so at most one goes on. A lock run is dead when its process on this
host has gone, or when its heartbeat (a count the import raises every HEARTBEAT_S while it writes)
has not moved for LEASE_S as seen from here (a process of another host killed hard): it is deleted.

A figure counts as imported once its run is FINISHED (its last write); a run with an import key
that never finished was left by a killed import and is deleted, to be written again. A figure held
by two FINISHED runs (left by imports that ran at once before the lock) keeps its first run; the
others are deleted where they hold the same figure, and named where they do not.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path

from src import console
from src.results import recorded, run_result
from src.tracking import store

HEARTBEAT_S, LEASE_S, RETRY_S = 15.0, 120.0, 1.0
# what a re-import compares, as a person reads it
SHOWN_AS = {
    recorded.THROUGHPUT: recorded.THROUGHPUT,
    "gpu.count": "num_gpu",
    "gpu.tdp_w": "watt per GPU",
    "gpu.price_usd": "price per GPU",
}


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


@dataclass
class Repairs:
    """What the store held that an import put right; each said in a line."""

    duplicates: int = 0  # FINISHED runs of a figure an earlier run holds alike: deleted
    half_written: int = 0  # runs a stopped import never finished: deleted, their figures written again
    dead_locks: int = 0  # lock runs of imports that had stopped: deleted
    corrected: int = 0  # figures imported as a truncated cell whose logged runs' mean is the figure
    sized: int = 0  # figures imported before their model's sizes were logged: the sizes added

    def __add__(self, other: Repairs) -> Repairs:
        return Repairs(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(Repairs)))

    def lines(self, source: str) -> list[str]:
        said = (
            f"removed {self.duplicates} duplicate run(s) of source={source}: figures that imports run at "
            "once had written twice; each is kept once, in its first run",
            f"deleted {self.half_written} run(s) of source={source} that a stopped import left "
            "half-written; their figures are written again",
            f"released {self.dead_locks} lock(s) on source={source} held by imports that had stopped",
            f"corrected {self.corrected} figure(s) of source={source} imported as the table's whole number: "
            f"each is written again as the mean of the runs logged behind it (the cell kept as the tag "
            f"{recorded.PUBLISHED_CELL})",
            f"added the model's sizes to {self.sized} figure(s) of source={source} imported before they "
            "were logged: compare now sets them only against points of those sizes",
        )
        counts = (self.duplicates, self.half_written, self.dead_locks, self.corrected, self.sized)
        return [line for count, line in zip(counts, said, strict=True) if count]


class SourceLock:
    """`with SourceLock(...)`: this process alone imports `source` into the experiment until the end
    of the block; waits (saying once for whom) while another import holds it."""

    def __init__(self, mlflow_client, experiment_id: str, source: str, owner: dict, vanished: Callable):
        self.client, self.experiment_id, self.source = mlflow_client, experiment_id, source
        self.owner, self.vanished = owner, vanished  # this process's owner tags; whether tags' owner is gone
        self.run_id: str | None = None
        self.dead = 0
        self.beats, self.renewed = 0, 0.0
        self.seen: dict[str, tuple[str | None, float]] = {}  # lock run -> (its heartbeat, first seen at)

    def __enter__(self) -> SourceLock:
        waiting = False
        while True:
            if not (others := self._live()):
                tags = {recorded.IMPORT_LOCK: self.source, recorded.IMPORT_HEARTBEAT: "0", **self.owner}
                mine = self.client.create_run(
                    self.experiment_id, run_name=f"import lock: {self.source}", tags=tags
                )
                if not self._live(besides=mine.info.run_id):
                    self.run_id, self.renewed = mine.info.run_id, time.monotonic()
                    return self
                self.client.delete_run(mine.info.run_id)  # taken at the same moment: both step back
            elif not waiting:
                holder = others[0].data.tags
                console.note(
                    f"source={self.source}: another import (host {holder.get(recorded.OWNER_HOST)}, pid "
                    f"{holder.get(recorded.OWNER_PID)}) is writing it; waiting for it to end"
                )
                waiting = True
            time.sleep(RETRY_S * random.uniform(0.5, 1.5))

    def renew(self) -> None:
        """Show that this import lives: called between writes, it raises the heartbeat now and then."""
        if time.monotonic() - self.renewed >= HEARTBEAT_S:
            self.beats += 1
            self.client.set_tag(self.run_id, recorded.IMPORT_HEARTBEAT, str(self.beats))
            self.renewed = time.monotonic()

    def __exit__(self, *exc) -> None:
        self.client.delete_run(self.run_id)

    def _live(self, besides: str | None = None) -> list:
        """The live lock runs of the source but `besides`; dead ones are deleted and counted."""
        found = self.client.search_runs(
            [self.experiment_id],
            filter_string=f"tags.{recorded.IMPORT_LOCK} = '{self.source}'",
            max_results=1000,
        )
        live = []
        for run in found:
            if run.info.run_id == besides:
                continue
            if run.info.status == "RUNNING" and not self._dead(run):
                live.append(run)
            else:  # its import stopped (another command may have ended its run)
                self.client.delete_run(run.info.run_id)
                self.dead += 1
        return live

    def _dead(self, run) -> bool:
        if self.vanished(run.data.tags):
            return True
        beat, now = run.data.tags.get(recorded.IMPORT_HEARTBEAT), time.monotonic()
        seen = self.seen.get(run.info.run_id)
        if seen is None or seen[0] != beat:
            self.seen[run.info.run_id] = (beat, now)
            return False
        return now - seen[1] > LEASE_S


def existing_figures(mlflow_client, experiment_id: str, source: str) -> tuple[dict, Repairs, list[str]]:
    """(import_key -> the FINISHED run that holds the figure, what was put right, a line for each
    figure that two runs hold with different values). Under the source's lock: a run with a key
    that never finished is a stopped import's and is deleted; a second FINISHED run of a figure
    that holds the same values is deleted."""
    held: dict[str, list[run_result.RunResult]] = {}
    repairs = Repairs()
    of_source = store.every_run(mlflow_client, [experiment_id], f"tags.{recorded.SOURCE} = '{source}'")
    for result in map(run_result.read, of_source):
        if recorded.IMPORT_KEY not in result.tags:
            continue
        if result.status == "FINISHED":
            held.setdefault(result.tags[recorded.IMPORT_KEY], []).append(result)
        else:
            mlflow_client.delete_run(result.run_id)
            repairs.half_written += 1
    figures, differ = {}, []
    for key, runs in held.items():
        first, *others = sorted(runs, key=lambda r: (r.started_ms, r.run_id))
        figures[key] = first
        for other in others:
            if _values(other) == _values(first):
                mlflow_client.delete_run(other.run_id)
                repairs.duplicates += 1
            else:
                differ.append(
                    f"{key}: runs {first.run_id} ({_said(_values(first))}) and {other.run_id} "
                    f"({_said(_values(other))}) hold one published figure"
                )
    return figures, repairs, differ


def _values(result: run_result.RunResult, default: dict | None = None) -> dict[str, str]:
    """The figure a run holds as a re-import compares it (a param it lacks: `default`'s)."""
    default = default or {}
    values = {k: result.params.get(k, default.get(k)) for k in SHOWN_AS if k != recorded.THROUGHPUT}
    throughput = (
        f"{result.throughput:g}" if result.throughput is not None else default.get(recorded.THROUGHPUT)
    )
    return {recorded.THROUGHPUT: throughput} | values


def _said(values: dict[str, str]) -> str:
    return ", ".join(f"{SHOWN_AS[k]}={v}" for k, v in values.items())


def corrected(before: run_result.RunResult, result) -> bool:
    """Whether the store holds a figure as its table's truncated cell where the importer now takes the
    mean of the runs logged behind it (imported before it read them): a known correction, made by
    writing the figure again, not a change that a re-import refuses."""
    return (
        result.cell is not None
        and recorded.PUBLISHED_CELL not in before.tags
        and _values(before)[recorded.THROUGHPUT] == f"{result.cell:g}"
    )


def add_sizes(mlflow_client, before: run_result.RunResult, sizes: dict[str, str]) -> bool:
    """Log on a figure's run the model sizes it lacks (imported before they were logged); whether it lacked any."""
    from mlflow.entities import Param

    missing = [Param(key, value) for key, value in sizes.items() if key not in before.params]
    if missing:
        mlflow_client.log_batch(before.run_id, params=missing)
    return bool(missing)


def logged_means(source: str, count: int) -> str:
    """What compare's report and the projection check say of figures that are their logged runs' mean."""
    return (
        f"{source}: {count} figure(s) are the mean of the runs logged behind their table cell, which the "
        f"table truncates to a whole number (each run keeps its cell as the tag {recorded.PUBLISHED_CELL})"
    )


def changed_figures(path: Path, results: list, existing: dict, source: str, precision: str) -> list[str]:
    """Each figure the store holds for the same published row with another value (throughput, watt
    or price), as file:line and what differs; a known correction (`corrected`) is no change."""
    changed = []
    for r in results:
        before = existing.get(import_key(source, precision, r.system, r.gpu_count, r.task))
        if before is None or corrected(before, r):
            continue
        now = {recorded.THROUGHPUT: f"{r.throughput:g}"} | spec_params(r)
        then = _values(before, now)
        differ = [f"{SHOWN_AS[k]}={now[k]} (imported before: {then[k]})" for k in now if now[k] != then[k]]
        if differ:
            changed.append(
                f"{path}:{r.line}: {r.task} for {r.system!r} x{r.gpu_count}: {', '.join(differ)}, "
                f"run {before.run_id}"
            )
    return changed
