"""Upload the results that jobs kept on disk while the tracking server was away.

    python -m src.sync                     # every spool folder under multirun/
    python -m src.sync multirun/2026-05-01 --uri http://mlflow.internal:5000

Each job's run is completed (or created, if it never was) without duplicates, then each sweep's
parent run is ended from its children's statuses. A delivered spool folder is removed, so running
sync again finds nothing. Then, in every store it delivered to (or --uri, or the default store),
runs left RUNNING by a process of this host that has gone are ended KILLED (src/tracking/owner.py).
Exit code 1 while something is still undelivered.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from src import console
from src.config.groups.tracking import uri_problem
from src.errors import TrackingUnavailable, first_line
from src.paths import PROJECT_ROOT, SQLITE_PREFIX
from src.run.sweep import finish_parent
from src.tracking import credentials, owner, spool, store


def sync(roots: list[Path], uri: str | None = None) -> int:
    """Deliver every spool folder under `roots`, then close runs whose owner vanished; returns how
    many spool folders are left undelivered."""
    runs, parents = spool.pending(roots)
    named = [credentials.with_credentials(spool.load(f).uri) for f in runs] + [
        credentials.with_credentials(json.loads((f / spool.PARENT_FILE).read_text())["uri"]) for f in parents
    ]
    stores = {uri} if uri else {*named, _default_store()}
    left = _deliver_all(runs, parents, uri) if runs or parents else 0
    if not runs and not parents:
        console.note(f"nothing to deliver under {', '.join(map(str, roots))}")
    for store_uri in sorted(s for s in stores if s):
        _close_vanished(store_uri)
    return left


def _default_store() -> str | None:
    """The store jobs use when tracking.uri is not given (conf/tracking/default.yaml), if it exists."""
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return os.environ["MLFLOW_TRACKING_URI"]
    database = PROJECT_ROOT / "mlruns" / "mlflow.db"
    return f"{SQLITE_PREFIX}{database}" if database.exists() else None


def _close_vanished(uri: str) -> None:
    try:
        owner.close_vanished(uri)
    except TrackingUnavailable as exc:
        console.warning(f"runs of vanished processes not checked: {first_line(exc)}")


def _deliver_all(runs: list[Path], parents: list[Path], uri: str | None) -> int:
    left = 0
    for folder in runs:  # children first: a parent's status is read from its children
        record = spool.load(folder)
        target = uri or credentials.with_credentials(record.uri)
        left += not _deliver(folder, target, record.run_name, lambda c, f=folder: spool.deliver(c, f))
    for folder in parents:
        sweep_dir = folder.parent
        if spool.pending([sweep_dir])[0]:
            console.warning(f"the parent run of {sweep_dir} waits until its jobs are delivered")
            left += 1
            continue
        data = json.loads((folder / spool.PARENT_FILE).read_text())

        def end_parent(client, data=data, sweep_dir=sweep_dir):
            finish_parent(client, data["run_id"], data["interrupted"], sweep_dir)
            return data["run_id"]

        left += not _deliver(folder, uri or credentials.with_credentials(data["uri"]), f"the parent run of {sweep_dir}", end_parent)
    return left


def _deliver(folder: Path, uri: str, what: str, action) -> bool:
    try:
        run_id = action(store.client(uri))
    except Exception as exc:
        console.warning(f"{what}: not delivered ({store.away(exc) or first_line(exc)}); kept in {folder}")
        return False
    spool.remove(folder)
    console.note(f"delivered {what} -> run {run_id}")
    return True


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m src.sync", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "folders",
        nargs="*",
        type=Path,
        default=[PROJECT_ROOT / "multirun"],
        help="where to look (default: multirun/)",
    )
    parser.add_argument("--uri", help="tracking URI to deliver to (default: the one each job used)")
    args = parser.parse_args(argv)
    missing = [str(f) for f in args.folders if not f.is_dir() and f != PROJECT_ROOT / "multirun"]
    if missing:  # a typo would otherwise report "nothing to deliver" and exit 0
        parser.error(f"{', '.join(missing)}: no such folder (a sweep's or job's folder, or multirun/)")
    if args.uri and (problem := uri_problem(args.uri)):
        parser.error(f"--uri={credentials.redact(args.uri)}: {problem}")
    uri = credentials.adopt_uri_credentials(args.uri) if args.uri else None
    sys.exit(1 if sync(args.folders, uri) else 0)


if __name__ == "__main__":
    main()
