"""Time to result: wall time from the command to the logged result, process start and warm-up
included, for one job or a whole sweep (arguments as on the suite's command line).

    python benchmarks/time_to_result.py model=resnet50 precision=amp              # target <= 45 s
    python benchmarks/time_to_result.py -m model=ssd300,resnet50,maskrcnn,txl_base,txl_large precision=fp32,amp
                                                                                   # target <= 600 s
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from common import job_runs, run_suite


def main() -> None:
    args = sys.argv[1:]
    with tempfile.TemporaryDirectory() as store:
        seconds = run_suite(args, Path(store), check=False)
        runs = job_runs(Path(store), newest_first=False)
        for run in runs:
            m = run.data.metrics
            print(
                f"{run.info.run_name:<28}{run.info.status:<10}{m.get('throughput', float('nan')):>14,.1f} "
                f"{run.data.tags.get('unit', ''):<10}steps {int(m.get('measured_steps', 0)):>4}  "
                f"ranks up {m.get('time_to_rank_start_s', float('nan')):5.1f} s, "
                f"first step {m.get('time_to_first_step_s', float('nan')):6.1f} s  "
                f"wall {(run.info.end_time - run.info.start_time) / 1e3:6.1f} s"
            )
    print(f"time to result: {seconds:.1f} s for {len(runs)} job(s): {' '.join(args)}")


if __name__ == "__main__":
    main()
