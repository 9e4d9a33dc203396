"""Each job run of a store against its card's ceilings, with its step-time breakdown and what the
breakdown cost: the figures docs/performance.md gives per workload.

    python -m src.train -m gpu=h200 model=ssd300,resnet50,maskrcnn,txl_base,txl_large,gpt2,ceilings \
        precision=amp tracking.uri=sqlite:////tmp/h200/mlflow.db
    python benchmarks/explain_table.py /tmp/h200

One line per run: achieved TFLOP/s per GPU, MFU (spec sheet), share of the measured ceiling of the
math that ran, the five shares, the profiled step against the window's median step, and
`breakdown_s` (the seconds the profiled stretch added to the job, inside its rank_exit phase).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from common import job_runs, recorded

from src.compare.explain import matching_ceilings
from src.results import run_result
from src.results.recorded import SHARES
from src.run.ceiling_figures import summary as ceilings_summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", type=Path, help="folder holding mlflow.db")
    stored = job_runs(parser.parse_args().store, newest_first=False)
    runs = [run_result.read(r) for r in stored if r.info.status == "FINISHED"]
    runs = [r for r in runs if r.source == recorded.MEASURED]  # this project's runs, not imported ones
    ceilings = [r for r in runs if r.kind == recorded.CEILINGS]
    for c in ceilings:
        window = c.window.measured_window_s or 0
        print(f"ceilings {c.gpu_name} x{c.gpu_count} ({window:.1f} s): {ceilings_summary(c.ceilings)}")
    head = f"{'run':<28}{'TFLOP/s':>8}{'MFU':>6}{'ceil':>6}" + "".join(f"{s[:6]:>7}" for s in SHARES)
    print(f"\n{head}{'prof ms':>9}{'step ms':>9}{'cost s':>8}")
    for run in runs:
        if run.kind != recorded.TRAINING:
            continue
        card = matching_ceilings(ceilings, run)
        ceiling = card.ceilings.matmul_tflops.get(run.spec.peak_key) if card and run.spec.peak_key else None
        achieved = run.achieved_tflops_per_gpu
        share = f"{achieved / ceiling:.0%}" if achieved and ceiling else "-"
        shares = run.shares or {}
        cells = "".join(f"{shares[s]:>7.1%}" if shares.get(s) is not None else f"{'-':>7}" for s in SHARES)
        profiled = run.breakdown or recorded.Breakdown()
        print(
            f"{run.name:<28}{achieved or 0:>8.3g}{run.mfu or 0:>6.0%}{share:>6}{cells}"
            f"{profiled.step_ms or 0:>9.1f}{run.window.step_time_ms or 0:>9.1f}{profiled.seconds or 0:>8.2f}"
        )


if __name__ == "__main__":
    main()
