"""How many jobs at once one tracking server takes, on sqlite and on PostgreSQL, losing nothing.

    python benchmarks/tracking_load.py                                  # sqlite, postgresql x N 4 16 64
    python benchmarks/tracking_load.py --backends postgresql --clients 64 --workers 1 4
    python benchmarks/tracking_load.py --restart --clients 16           # the server dies under load

One real CPU smoke job is run first; its run (the whole config as params, tags, metrics, config.yaml,
environment.json, step_times.csv) plus the telemetry of a `--gpus`-GPU job of `--job-seconds` is what
each client logs, through the job's own JobRun, in the job's order. N client processes start
together against one `python -m src.server` (a fresh store per server; PostgreSQL is a throw-away
cluster on 127.0.0.1). What jobs left in their spool folders is delivered by `python -m src.sync`,
as a user would; then every run is read back and checked complete, once. `--restart` kills the
server (SIGKILL) once the clients are logging and starts it again after `--outage-s`. Everything stays on the loopback
interface and under `--work` (default: a folder in multirun/, removed after unless --keep).
The clients' own output (MLflow's "View run" lines) is dropped; their errors are counted.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a file from anywhere

from benchmarks import load_client  # noqa: E402
from benchmarks.common import ROOT, job_runs, run_suite, tracking_uri  # noqa: E402
from tests import services  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--backends", nargs="+", choices=("sqlite", "postgresql"), default=["sqlite", "postgresql"]
    )
    parser.add_argument("--clients", nargs="+", type=int, default=[4, 16, 64], help="N concurrent clients")
    parser.add_argument("--workers", nargs="+", type=int, default=[1, 4], help="server workers (uvicorn)")
    parser.add_argument("--gpus", type=int, default=1, help="GPUs whose telemetry each job logs")
    parser.add_argument("--job-seconds", type=float, default=120, help="length of that telemetry")
    parser.add_argument("--restart", action="store_true", help="kill and restart the server under load")
    parser.add_argument("--outage-s", type=float, default=20, help="how long the server stays down")
    parser.add_argument("--retries", type=int, default=4, help="tracking.retries of each job")
    parser.add_argument("--backoff-s", type=float, default=2.0, help="tracking.backoff_s of each job")
    parser.add_argument("--timeout-s", type=float, default=900, help="bound on one round of N clients")
    parser.add_argument("--work", type=Path, help="folder for stores, spool and logs")
    parser.add_argument("--keep", action="store_true", help="keep --work afterwards")
    args = parser.parse_args(argv)
    if min(args.clients) < 1 or min(args.workers) < 1 or args.gpus < 0:
        parser.error("--clients, --workers: whole numbers >= 1; --gpus: >= 0")
    return args


def template_job(work: Path, args: argparse.Namespace) -> load_client.JobTemplate:
    """One real CPU smoke job, run into its own store and read back as what every client logs.

    A template already in --work (from a run with --keep) is reused."""
    store = work / "template"
    if not (store / "mlflow.db").exists():
        run_suite(["gpu=cpu", "benchmark=smoke", "model=resnet50"], store)
    run_id = job_runs(store)[0].info.run_id
    return load_client.JobTemplate.from_run(tracking_uri(store), run_id, args.gpus, args.job_seconds)


@contextlib.contextmanager
def backend_store(backend: str):
    """The server's --backend-store-uri: a fresh PostgreSQL cluster, or None (sqlite in its folder)."""
    if backend == "postgresql":
        with services.local_postgres() as uri:
            yield uri
    else:
        yield None


def client_context():
    """Clients are forked from a clean process that has MLflow imported: fast to start, and no
    HTTP connection of this process is shared with them."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["mlflow.tracking", "benchmarks.load_client"])
    return ctx


def run_clients(
    ctx, job, server, n: int, experiment: str, spool_root: Path, args
) -> tuple[list[dict], float]:
    """N client processes logging at once; with --restart, the server dies under them."""
    gates = (ctx.Barrier(n + 1), ctx.Barrier(n + 1))  # this process meets them too
    results = ctx.Queue()
    procs = [
        ctx.Process(
            target=load_client.client_process,
            args=(
                job,
                server.url,
                experiment,
                i,
                spool_root / f"client{i}" / "spool",
                gates,
                args.retries,
                args.backoff_s,
                results,
            ),  # fmt: skip
            daemon=True,
        )
        for i in range(n)
    ]
    for proc in procs:
        proc.start()
    deadline = time.monotonic() + args.timeout_s
    gates[0].wait(timeout=args.timeout_s)  # every client is up: the clock starts
    started = time.perf_counter()
    gates[1].wait(timeout=args.timeout_s)
    if args.restart:
        time.sleep(0.5)  # while the telemetry batches are in flight
        server.stop(signal.SIGKILL)
        time.sleep(args.outage_s)
        server.start()
    found = []
    for _ in procs:
        with contextlib.suppress(Exception):
            found.append(results.get(timeout=max(1.0, deadline - time.monotonic())))
    elapsed = time.perf_counter() - started
    for proc in procs:
        proc.join(timeout=max(1.0, deadline - time.monotonic()))
        if proc.is_alive():
            proc.kill()
    missing = {r["index"] for r in found} ^ set(range(n))
    found += [{"index": i, "times": {}, "error": "timed out", "spooled": False} for i in missing]
    return found, elapsed


def sync(spool_root: Path, url: str, passes: int = 3) -> int:
    """`python -m src.sync` over the clients' spool folders, as a user would run it afterwards, and
    again while it exits 1 (something still undelivered); returns how many runs it took, or 0
    when it never finished. What it could not deliver is printed."""
    command = [sys.executable, "-m", "src.sync", str(spool_root), "--uri", url]
    for attempt in range(1, passes + 1):
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
        if done.returncode == 0:
            return attempt
        for line in (done.stdout + done.stderr).splitlines():
            if "not delivered" in line:
                print(f"  sync pass {attempt}: {line.strip()[:150]}", flush=True)
    return 0


def one_round(ctx, job, server, n: int, work: Path, args) -> dict:
    from mlflow.tracking import MlflowClient

    experiment = f"load-{n}-{time.time_ns()}"  # a fresh experiment per round
    MlflowClient(server.url).create_experiment(experiment)
    spool_root = work / experiment
    results, elapsed = run_clients(ctx, job, server, n, experiment, spool_root, args)
    left = sum(1 for r in results if r.get("left_for_sync"))
    syncs = sync(spool_root, server.url) if left else None  # what a user runs after an outage
    landed = load_client.count_landed(server.url, experiment, job, n)
    # a client errs when a call raised, or failed so that JobRun went on into its spool
    errors = [
        r["error"] or "a call failed: the run was spooled" for r in results if r["error"] or r["spooled"]
    ]
    for error in sorted(set(errors)):
        print(f"  error x{errors.count(error)}: {error}", flush=True)
    times = {kind: [t for r in results for t in r["times"].get(kind, [])] for kind in load_client.KINDS}
    return {
        "n": n, "wall_s": elapsed, **landed, "lost": n - landed["landed"], "errors": len(errors),
        "spooled": sum(1 for r in results if r["spooled"]), "left": left, "syncs": syncs, "times": times,
    }  # fmt: skip


def percentile(values: list[float], q: float) -> float | None:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)] if ordered else None


def print_tables(rows: list[dict]) -> None:
    print(
        "\nruns: landed = complete on the server, after src.sync where jobs left a spool; err = clients"
        "\nwith a failed call (then spooled, delivered by the job's retries or by src.sync); syncs ="
        "\nsrc.sync runs until it exited 0 (it exits 1 while something is left; 0 = never)"
    )
    print(
        f"{'backend':<10} {'N':>3} {'wrk':>3} {'wall s':>7} {'exp':>4} {'landed':>6} {'lost':>4} "
        f"{'dup':>3} {'err':>3} {'to sync':>7} {'syncs':>5}"
    )
    for r in rows:
        print(
            f"{r['backend']:<10} {r['n']:>3} {r['workers']:>3} {r['wall_s']:>7.1f} {r['n']:>4} "
            f"{r['landed']:>6} {r['lost']:>4} {r['duplicates']:>3} {r['errors']:>3} {r['left']:>7} "
            f"{'-' if r['syncs'] is None else r['syncs']:>5}"
        )
    print("\nlatency per call, ms: p50/p99 (calls made while the server answered)")
    print(f"{'backend':<10} {'N':>3} {'wrk':>3} " + " ".join(f"{k:>9}" for k in load_client.KINDS))
    for r in rows:
        cells = []
        for kind in load_client.KINDS:
            p50, p99 = percentile(r["times"][kind], 0.5), percentile(r["times"][kind], 0.99)
            cells.append(f"{p50 * 1e3:.0f}/{p99 * 1e3:.0f}" if p50 is not None else "-")
        print(f"{r['backend']:<10} {r['n']:>3} {r['workers']:>3} " + " ".join(f"{c:>9}" for c in cells))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    work = (args.work or ROOT / "multirun" / "tracking_load" / time.strftime("%Y%m%d-%H%M%S")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    os.environ["MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"] = "false"
    ctx = client_context()
    rows = []
    try:
        job = template_job(work, args)
        print(
            f"each client logs: {len(job.params)} params, {len(job.tags) + len(job.later_tags)} tags, "
            f"{len(job.metrics)} metrics, {len(job.telemetry)} telemetry points ({args.gpus} GPUs, "
            f"{args.job_seconds:.0f} s), {len(job.texts)} artifacts "
            f"({sum(map(len, job.texts.values())) / 1e6:.1f} MB)",
            flush=True,
        )
        for backend in args.backends:
            for workers in args.workers:
                with backend_store(backend) as uri:
                    folder = work / f"{backend}-w{workers}"
                    with services.TrackingServer(folder, uri, workers) as server:
                        for n in args.clients:
                            print(f"{backend}, {workers} worker(s), {n} clients ...", flush=True)
                            rows.append(
                                {"backend": backend, "workers": workers}
                                | one_round(ctx, job, server, n, work, args)
                            )
    finally:
        if rows:
            print_tables(rows)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 1 if any(r["lost"] or r["duplicates"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
