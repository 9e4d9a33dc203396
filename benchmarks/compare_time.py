"""How long `python -m src.compare` takes on the golden stores (tests/golden_store.py), charts and all,
for each checkout named: its GPU comparison (with a capacity split and a projection) and its
by=torch comparison, in fresh processes, the checkouts taken in turn so that they share the host's
load; prints the median wall time of each.

    python benchmarks/compare_time.py [CHECKOUT ...] [--repeats 3]     (default: this checkout)
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CASES = {  # as tests/test_compare_golden.py runs them
    "gpus": ("baseline=rtx3090", "capacity_split=[h200@48,h200@24]", "project=[a6000]"),
    "by_torch": ("by=torch",),
}


def golden_store(folder: Path) -> Path:
    """The golden store, made once: its runs as the job and the importer write them."""
    from mlflow.tracking import MlflowClient

    from tests.golden_store import build

    database = folder / "golden.db"
    MlflowClient(f"sqlite:///{database}").search_experiments()
    build(f"sqlite:///{database}", folder)
    return database


def compare_seconds(checkout: Path, database: Path, folder: Path, case: str) -> float:
    """One compare of a copy of the store (compare tags its runs) in a fresh process of `checkout`."""
    store = folder / f"{checkout.name}-{case}.db"
    shutil.copyfile(database, store)
    out = Path(tempfile.mkdtemp(dir=folder))
    command = [sys.executable, "-m", "src.compare", f"tracking.uri=sqlite:///{store}", f"out={out}", *CASES[case]]
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    started = time.perf_counter()
    done = subprocess.run(command, cwd=checkout, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{checkout} {case}: compare exited {done.returncode}: {done.stderr[-1000:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkouts", nargs="*", type=Path, default=[ROOT])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        database = golden_store(folder)
        seconds = {(c, case): [] for c in args.checkouts for case in CASES}
        for _ in range(args.repeats):
            for checkout in args.checkouts:
                for case in CASES:
                    seconds[checkout, case].append(compare_seconds(checkout.resolve(), database, folder, case))
    print(f"{'checkout':<40}{'case':<10}{'median s':>10}{'runs':>18}")
    for (checkout, case), found in seconds.items():
        runs = " ".join(f"{s:.1f}" for s in found)
        print(f"{str(checkout):<40}{case:<10}{statistics.median(found):>10.1f}{runs:>18}")


if __name__ == "__main__":
    main()
