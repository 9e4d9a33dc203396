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

from src.compare.explain import SHARES, ceilings_runs, matching_ceilings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", type=Path, help="folder holding mlflow.db")
    stored = job_runs(parser.parse_args().store, newest_first=False)
    runs = [recorded.read(r) for r in stored if r.info.status == "FINISHED"]
    runs = [r for r in runs if r.source == recorded.MEASURED]  # this project's runs, not imported ones
    ceilings = ceilings_runs(runs)
    window = {r.run_id: r.metrics.get(recorded.MEASURED_WINDOW_S, 0) for r in runs}
    for c in ceilings:
        figures = ", ".join(
            f"{k} {v:,.4g}" for k, v in sorted(c.figures.items()) if not k.endswith(("_ci95_rel", "_shape"))
        )
        print(f"ceilings {c.gpu_name} x{c.gpu_count} ({window[c.run_id]:.1f} s): {figures}")
    head = f"{'run':<28}{'TFLOP/s':>8}{'MFU':>6}{'ceil':>6}" + "".join(f"{s[:6]:>7}" for s in SHARES)
    print(f"\n{head}{'prof ms':>9}{'step ms':>9}{'cost s':>8}")
    for run in runs:
        if run.kind != recorded.TRAINING:
            continue
        m = run.metrics
        card = matching_ceilings(ceilings, run)
        ceiling = card.matmul(run.spec.peak_key) if card and run.spec.peak_key else None
        achieved = run.achieved_tflops_per_gpu
        share = f"{achieved / ceiling:.0%}" if achieved and ceiling else "-"
        cells = "".join(f"{run.shares[s]:>7.1%}" if run.shares and run.shares[s] is not None else f"{'-':>7}"
                        for s in SHARES)  # fmt: skip
        print(
            f"{run.name:<28}{achieved or 0:>8.3g}{run.mfu or 0:>6.0%}{share:>6}{cells}"
            f"{m.get(recorded.BREAKDOWN_STEP_MS, 0):>9.1f}{m.get(recorded.STEP_TIME_MS, 0):>9.1f}"
            f"{m.get(recorded.BREAKDOWN_S, 0):>8.2f}"
        )


if __name__ == "__main__":
    main()
