"""The suite beside peer benchmark tools on the same GPU, in one call: each peer's figure, the
suite's figure of the same thing, and their ratio. The peers are other projects' scripts, run
from a folder you name (they are never part of gpubench):

    python benchmarks/peers.py PEERS_FOLDER [--only mamf,timm,nanogpt]

- mamf: stas00's mamf-finder.py (ml-engineering), bf16 and fp16 over m, n, k in 4096..16384
  step 4096: its best shape's mean TFLOP/s against the ceilings job's `ceiling_matmul_<math>_tflops`
  (target: within 3%, the ceilings job <= 30 s);
- timm: pytorch-image-models' benchmark.py training ResNet-50 (amp, channels_last, batch 256)
  against `model=resnet50 precision=amp` at the same settings;
- nanogpt: nanoGPT's bench.py (GPT-2 124M, bf16, compiled, batch 12; the folder holds bench.py as
  nanogpt_bench.py beside its model.py and configurator.py) against `model=gpt2 precision=bf16
  benchmark.compile=true` at batch 12 without dropout, as step times.

Prints a table; docs/performance.md ("The suite beside peer tools") holds the figures.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import job_runs, recorded, run_suite

from src.results import run_result

TOLERANCE = 0.03
MAMF_RANGE = ["4096", "16385", "4096"]  # start, stop, step: 4, 8, 12 and 16 thousand
MAMF_DTYPES = {"bf16": "bfloat16", "fp16": "float16"}


def run_peer(command: list[str], cwd: Path) -> tuple[str, float]:
    """A peer's command, its output echoed and returned, with its wall time."""
    print("$", " ".join(command), flush=True)
    started = time.perf_counter()
    proc = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=True)
    print(proc.stdout[-2000:], flush=True)
    return proc.stdout, time.perf_counter() - started


def mamf(peers: Path, store: Path) -> list[tuple]:
    rows = []
    for math_, dtype in MAMF_DTYPES.items():
        ranges = [arg for dim in "mnk" for arg in (f"--{dim}_range", *MAMF_RANGE)]
        out, wall = run_peer(
            [sys.executable, "mamf-finder.py", *ranges, "--dtype", dtype, "--num_iterations", "50",
             "--num_warmup_iterations", "10", "--output_file", str(store / f"mamf-{math_}.out")],
            peers,
        )  # fmt: skip
        best = re.search(r"^mean:\s+([\d.]+) TFLOPS @ (\S+)", out, re.M)
        rows.append((f"matmul {math_}, best mean (TFLOP/s)", float(best[1]), best[2], wall))
    wall = run_suite(["model=ceilings", "gpu=auto", "experiment=none"], store)
    job = run_result.read(job_runs(store)[0])
    suite = []
    for (label, figure, shape, _), math_ in zip(rows, MAMF_DTYPES, strict=True):
        ours = "x".join(f"{d:g}" for d in job.ceilings.matmul_shape[math_])
        spread = f"+/-{job.ceilings.ci95_rel[recorded.matmul_figure(math_)]:.1%} @ {ours}"
        suite.append((label, figure, shape, job.ceilings.matmul_tflops[math_], spread))
    print(f"ceilings job: {wall:.1f} s from the command, {job.window.measured_window_s:.1f} s measuring")
    return suite


def timm(peers: Path, store: Path) -> list[tuple]:
    out, _ = run_peer(
        [sys.executable, "timm_benchmark.py", "--bench", "train", "--model", "resnet50", "--amp",
         "--channels-last", "-b", "256"],
        peers,
    )  # fmt: skip
    peer = json.loads(out[out.index("--result") + len("--result") :])["train_samples_per_sec"]
    run_suite(
        ["gpu=auto", "experiment=none", "model=resnet50", "precision=amp", "benchmark.channels_last=true",
         "model.batch_size=256"],
        store,
    )  # fmt: skip
    suite = job_runs(store)[0].data.metrics[recorded.THROUGHPUT]
    return [("resnet50 amp train (images/s)", peer, "batch 256", suite, "batch 256")]


def nanogpt(peers: Path, store: Path) -> list[tuple]:
    out, _ = run_peer(
        [sys.executable, "nanogpt_bench.py", "--real_data=False", "--compile=True", "--batch_size=12"], peers
    )
    peer = float(re.findall(r"time per iteration: ([\d.]+)ms", out)[-1])
    run_suite(
        ["gpu=auto", "experiment=none", "model=gpt2", "precision=bf16", "benchmark.compile=true",
         "model.batch_size=12", "model.dropout=0"],
        store,
    )  # fmt: skip
    suite = job_runs(store)[0].data.metrics[recorded.STEP_TIME_MS]
    return [("gpt2 bf16 compiled, step (ms)", peer, "batch 12", suite, "median step")]


PEERS = {"mamf": mamf, "timm": timm, "nanogpt": nanogpt}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("peers", type=Path, help="the folder holding the peers' scripts")
    parser.add_argument("--only", default=",".join(PEERS), help="comma-separated: " + ", ".join(PEERS))
    parser.add_argument("--store", type=Path, help="keep the suite's runs (and the peers' outputs) here")
    args = parser.parse_args()
    rows = []
    for name in args.only.split(","):
        if name not in PEERS:
            parser.error(f"--only: {name!r} is not one of {', '.join(PEERS)}")
        with tempfile.TemporaryDirectory() as scratch:
            store = args.store / name if args.store else Path(scratch)
            store.mkdir(parents=True, exist_ok=True)
            rows += PEERS[name](args.peers.resolve(), store.resolve())
    print(f"\n{'figure':<36}{'peer':>10}  {'':<16}{'suite':>10}  {'':<28}{'ratio':>7}")
    for label, peer, peer_note, suite, suite_note in rows:
        ratio = suite / peer
        mark = (
            ""
            if not label.startswith("matmul")
            else (" within" if abs(ratio - 1) <= TOLERANCE else " beyond")
        )
        print(
            f"{label:<36}{peer:>10,.1f}  {peer_note:<16}{suite:>10,.1f}  {suite_note:<28}{ratio:>7.3f}{mark}"
        )


if __name__ == "__main__":
    main()
