"""Derive reference/lambda/v0-pytorch-train-runs.csv from Lambda's 2020-21 training logs.

Lambda's compiled v0 tables give one figure per cell: the mean of the cell's runs, truncated to a
whole number. The logs behind them (lambdal/deeplearning-benchmark, pytorch/results, commit
aa5addb6) hold one throughput per run, and some cells have two runs (October 2020 and
February 2021). This script reads the throughput line of every run of the study's five tasks for
the RTX 3090 and RTX A6000 systems (1, 2 and 8 GPUs) and writes one row per run, so that an
imported figure carries the spread of the runs behind it. It checks each cell against the compiled
table and says where the runs do not give the published figure.

    python scripts/lambda_v0_runs.py LOGS_DIR [--out reference/lambda/v0-pytorch-train-runs.csv]

LOGS_DIR holds the folders `3090/`, `A6000/`, `2x3090/`, ... of pytorch/results and Lambda's
compiled v0 tables `v0-pytorch-train-throughput-{fp32,fp16}.csv`.
"""

from __future__ import annotations

import argparse
import csv
import math
import re
import statistics
import sys
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT_ROOT))  # the suite's own modules

from src.results import recorded  # noqa: E402

OUT = PROJECT_ROOT / "reference" / "lambda" / "v0-pytorch-train-runs.csv"
SYSTEMS = {  # results folder -> (name_gpu as the compiled tables spell it, num_gpu)
    "3090": ("RTX 3090", 1),
    "2x3090": ("2x RTX 3090", 2),
    "8x3090": ("8x RTX 3090", 8),
    "A6000": ("RTX A6000", 1),
    "2xA6000": ("2x RTX A6000", 2),
    "8xA6000": ("8x RTX A6000", 8),
}
# (task column, the compiled table's precision) -> the results folder it is compiled from. The fp16
# ResNet-50 figure is the pure-fp16 run (static loss scale 256), not the AMP one.
FOLDERS = {
    ("ssd", "fp32"): "PyTorch_SSD_FP32",
    ("ssd", "fp16"): "PyTorch_SSD_AMP",
    ("resnet50", "fp32"): "PyTorch_resnet50_FP32",
    ("resnet50", "fp16"): "PyTorch_resnet50_FP16",
    ("maskrcnn", "fp32"): "PyTorch_maskrcnn_FP32",
    ("maskrcnn", "fp16"): "PyTorch_maskrcnn_FP16",
    ("transformerxlbase", "fp32"): "PyTorch_transformerxlbase_FP32",
    ("transformerxlbase", "fp16"): "PyTorch_transformerxlbase_FP16",
    ("transformerxllarge", "fp32"): "PyTorch_transformerxllarge_FP32",
    ("transformerxllarge", "fp16"): "PyTorch_transformerxllarge_FP16",
}
# The run's whole-system throughput, the last such line of its log (multi-GPU logs print every
# rank's figure first). SSD on one GPU of October 2020 printed only its rank's average.
PATTERNS = {
    "ssd": [r"Training performance = ([\d.]+) FPS", r"Average images/sec: ([\d.]+)"],
    "resnet50": [r"Summary: train\.loss : \S+\s+train\.total_ips : ([\d.]+) img/s"],
    "maskrcnn": [r"Training perf is: ([\d.]+) FPS"],
    "transformerxlbase": [r"Training throughput: ([\d.]+) tok/s"],
    "transformerxllarge": [r"Training throughput: ([\d.]+) tok/s"],
}
# as the importer (src/published/__main__.py) reads them
COLUMNS = ("name_gpu", "num_gpu", "task", "precision", "run", recorded.THROUGHPUT)


def run_throughput(log: Path, task: str) -> float | None:
    text = log.read_text(errors="replace")
    for pattern in PATTERNS[task]:
        found = re.findall(pattern, text)
        if found:
            return float(found[-1])
    return None


def compiled_figures(logs: Path) -> dict[tuple, float]:
    """(name_gpu, task, precision) -> the compiled table's figure."""
    figures = {}
    for precision in ("fp32", "fp16"):
        with open(logs / f"v0-pytorch-train-throughput-{precision}.csv", newline="") as handle:
            for row in csv.DictReader(handle):
                for task, _ in FOLDERS:
                    figures[(row["name_gpu"], task, precision)] = float(row[task])
    return figures


def derive(logs: Path) -> tuple[list[dict], list[str]]:
    rows, problems = [], []
    compiled = compiled_figures(logs)
    for folder, (system, count) in SYSTEMS.items():
        for (task, precision), task_folder in FOLDERS.items():
            values = []
            for log in sorted((logs / folder / task_folder).glob("*.txt")):
                value = run_throughput(log, task)
                if value is None:
                    problems.append(f"{log}: no throughput line")
                    continue
                values.append(value)
                rows.append(dict(zip(COLUMNS, (system, count, task, precision, log.stem, value), strict=True)))
            published = compiled.get((system, task, precision))
            if values and published is not None and math.trunc(statistics.fmean(values)) != published:
                problems.append(
                    f"{system} {task} {precision}: runs {values} give {statistics.fmean(values):.2f}, "
                    f"the compiled table {published:g}"
                )
    return rows, problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logs", type=Path, help="folder with 3090/, A6000/, 2x3090/, ... and the v0 tables")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    rows, problems = derive(args.logs)
    with open(args.out, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    print(f"{len(rows)} runs written to {args.out}")
    for problem in problems:
        print(f"differs: {problem}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
