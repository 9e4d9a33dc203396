"""One MLflow tracking server for a team: `python -m src.server [--host ADDR] [--port N] ...`.

Runs are kept in an SQL database (sqlite under mlruns/server/ by default, PostgreSQL for a busy
team) and artifacts under one root that the server proxies, so machines need only its URL:
`export MLFLOW_TRACKING_URI=http://HOST:PORT` (or `tracking.uri=http://HOST:PORT`) on each.
It binds 127.0.0.1 unless told otherwise: MLflow's server has no login of its own.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from src import credentials
from src.paths import PROJECT_ROOT

SERVER_DIR = PROJECT_ROOT / "mlruns" / "server"  # apart from the embedded store: its own runs
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m src.server",
        description="Run one MLflow tracking server that every machine of a team logs to.",
        epilog="Arguments after `--` go to `mlflow server` unchanged (e.g. -- --workers 8 "
        "--allowed-hosts mlflow.example.org).",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=5000, help="port to listen on (default: 5000)")
    parser.add_argument(
        "--backend-store-uri",
        default=f"sqlite:///{SERVER_DIR / 'mlflow.db'}",
        help="SQL database of runs: sqlite:///abs/path.db (default: mlruns/server/mlflow.db) or "
        "postgresql://USER:PASSWORD@DBHOST:5432/DB (pip install -e '.[server]' brings its driver)",
    )
    parser.add_argument(
        "--artifacts-destination",
        default=str(SERVER_DIR / "artifacts"),
        help="where the server stores artifacts it receives: a folder or s3://... "
        "(default: mlruns/server/artifacts)",
    )
    parser.add_argument("mlflow_args", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not 0 < args.port < 65536:
        parser.error(f"--port={args.port}: must be a port number from 1 to 65535")
    problem = store_problem(args.backend_store_uri)
    if problem:
        parser.error(f"--backend-store-uri={credentials.redact(args.backend_store_uri)}: {problem}")
    return args


def store_problem(uri: str) -> str | None:
    """Why the server could not open this database URI here (bad form, no driver), else None.

    Checked before MLflow starts: its own failure is a long traceback from inside a worker.
    """
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    try:
        make_url(uri).get_dialect().import_dbapi()
    except (ArgumentError, NoSuchModuleError):
        return "not a database URI (sqlite:///abs/path.db or postgresql://USER:PASSWORD@HOST:PORT/DB)"
    except ImportError as exc:
        return f"its database driver is missing ({exc}); PostgreSQL's comes with pip install -e '.[server]'"
    return None


def server_command(args: argparse.Namespace) -> list[str]:
    return [
        sys.executable,
        "-m",
        "mlflow",
        "server",
        "--host",
        args.host,
        "--port",
        str(args.port),
        "--backend-store-uri",
        args.backend_store_uri,
        "--serve-artifacts",  # clients upload through the server: no shared disk or cloud keys
        "--artifacts-destination",
        args.artifacts_destination,
        *args.mlflow_args,
    ]


def prepare_local_paths(args: argparse.Namespace) -> None:
    """Create the sqlite folder and the artifact folder when they are local paths."""
    if args.backend_store_uri.startswith("sqlite:///"):
        Path(args.backend_store_uri.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    if "://" not in args.artifacts_destination:
        Path(args.artifacts_destination).mkdir(parents=True, exist_ok=True)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    prepare_local_paths(args)
    url_host = f"[{args.host}]" if ":" in args.host else args.host
    if args.host in ("0.0.0.0", "::"):
        url_host = "<this machine's address>"
    store = credentials.redact(args.backend_store_uri)  # the console may be a shared log
    print(f"MLflow tracking server: runs in {store}, artifacts in {args.artifacts_destination}")
    print(f"On every machine: export MLFLOW_TRACKING_URI=http://{url_host}:{args.port}")
    if args.host not in LOOPBACK:
        print(
            f"warning: bound to {args.host}: anyone who reaches this port can read and change runs "
            "(MLflow has no login here); keep it on a trusted network or behind a proxy",
            file=sys.stderr,
        )
    sys.stdout.flush()
    # Tracking needs none of MLflow's background job runners (GenAI jobs): fewer processes to host.
    os.environ.setdefault("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false")
    command = server_command(args)
    os.execv(command[0], command)


if __name__ == "__main__":
    main()
