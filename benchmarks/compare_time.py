"""How long compare takes on the golden stores (tests/golden_store.py), charts and all, for each
checkout named: its GPU comparison (with a capacity split and a projection) and its by=torch
comparison. Each is timed two ways, in fresh processes, the checkouts taken in turn so that they
share the host's load: `python -m src.compare` from the command to its exit, and `run_compare` alone
in a process that has composed the config and opened the store first (compare's own work, without
the interpreter's start, MLflow's import and the store's opening, which every entry point pays).
Prints the median of each.

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
IN_PROCESS = """
import sys, time
from pathlib import Path
from hydra import compose, initialize_config_dir
from src.config.schema import register_configs
from src.paths import PROJECT_ROOT
register_configs()
with initialize_config_dir(config_dir=str(PROJECT_ROOT / "conf"), version_base="1.3"):
    cfg = compose("compare", overrides=sys.argv[2:])
from src.compare.pipeline import run_compare
from src.tracking import store
store.client(cfg.tracking.uri)  # MLflow imported and the store opened, as every entry point does
started = time.perf_counter()
run_compare(cfg, Path(sys.argv[1]))
print(time.perf_counter() - started)
"""


def golden_store(folder: Path) -> Path:
    """The golden store, made once: its runs as the job and the importer write them."""
    from mlflow.tracking import MlflowClient

    from tests.golden_store import build

    database = folder / "golden.db"
    MlflowClient(f"sqlite:///{database}").search_experiments()
    build(f"sqlite:///{database}", folder)
    return database


def seconds(checkout: Path, database: Path, folder: Path, case: str, in_process: bool) -> float:
    """One compare of a copy of the store (compare tags its runs) in a fresh process of `checkout`."""
    store, out = folder / f"{checkout.name}-{case}.db", Path(tempfile.mkdtemp(dir=folder))
    shutil.copyfile(database, store)
    overrides = [f"tracking.uri=sqlite:///{store}", f"out={out}", *CASES[case]]
    command = ["-c", IN_PROCESS, str(out), *overrides] if in_process else ["-m", "src.compare", *overrides]
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *command],
        cwd=checkout,
        env={**os.environ, "PYTHONPATH": str(checkout)},
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"{checkout} {case}: compare exited {done.returncode}: {done.stderr[-1000:]}")
    return float(done.stdout.split()[-1]) if in_process else time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkouts", nargs="*", type=Path, default=[ROOT])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    ways = {"python -m src.compare": False, "run_compare": True}
    found = {(c, case, way): [] for c in args.checkouts for case in CASES for way in ways}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        database = golden_store(folder)
        for _ in range(args.repeats):
            for checkout, case, way in found:
                found[checkout, case, way].append(
                    seconds(checkout.resolve(), database, folder, case, ways[way])
                )
    print(f"{'checkout':<32}{'case':<10}{'timed':<24}{'median s':>9}   runs (s)")
    for (checkout, case, way), times in found.items():
        runs = " ".join(f"{s:.1f}" for s in times)
        print(f"{str(checkout):<32}{case:<10}{way:<24}{statistics.median(times):>9.1f}   {runs}")


if __name__ == "__main__":
    main()
