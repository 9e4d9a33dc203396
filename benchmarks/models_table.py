"""Every model at its default size on one GPU, through the real CLI, as a table read from MLflow.

    python benchmarks/models_table.py                 # gpu=h200, every model, ~15 minutes
    python benchmarks/models_table.py --models resnet50 --dry-run
    python benchmarks/models_table.py --model-defaults    # the 24 GB defaults: do they fit?
    python benchmarks/models_table.py --override model.batch_size=auto   # the largest batches

Runs `python -m src.train -m ...` sweeps: every model at amp and bf16, plus tf32 for resnet50,
ssd300 (both have a published Lambda TF32 figure) and the Transformer-XLs, plus resnet50 amp
compiled; vision models with channels_last. Then prints model, precision, batch, throughput, peak memory, achieved TFLOP/s and MFU of the runs it made,
and for ResNet-50 and SSD the ratio to Lambda's published H200 figures (target: >= 1.3x).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

from common import ROOT, recorded

VISION = ["resnet50", "ssd300", "maskrcnn", "vit_b16"]
LANGUAGE = ["txl_base", "txl_large", "bert_large", "gpt2", "llama"]
TF32_TOO = ["resnet50", "ssd300", "txl_base", "txl_large"]
PRECISIONS = ["amp", "bf16", "tf32"]
# Lambda's published single-H200 PyTorch training throughput (images/s), from their GPU benchmark tables:
# their "fp32" (TF32 math) compares with our tf32, their "fp16" (AMP) with our amp.
LAMBDA_H200 = {
    ("resnet50", "tf32"): 2259,
    ("resnet50", "amp"): 3079,
    ("ssd300", "tf32"): 683,
    ("ssd300", "amp"): 946,
}


def jobs(models: list[str], only: list[str] = PRECISIONS) -> list[tuple[str, str, tuple[str, ...]]]:
    """(model, precision, extra overrides) for every row of the table, limited to `only` precisions."""
    out = []
    for model in models:
        knobs = ("benchmark.channels_last=true",) if model in VISION else ()
        precisions = ["amp", "bf16"] + (["tf32"] if model in TF32_TOO else [])
        out += [(model, precision, knobs) for precision in precisions if precision in only]
        if model == "resnet50" and "amp" in only:
            out.append((model, "amp", (*knobs, "benchmark.compile=true")))
    return out


def model_default_batch(model: str, precision: str) -> int:
    """The model's own per-precision default (sized for a 24 GB card), read from its yaml."""
    from omegaconf import OmegaConf

    return OmegaConf.load(ROOT / "conf" / "model" / f"{model}.yaml").batch_sizes[precision]


def sweeps(
    models: list[str], gpu: str, common: list[str], model_defaults: bool, only: list[str] = PRECISIONS
) -> list[list[str]]:
    """`python -m src.train -m` argument lists: one sweep per (precision, knobs) over the models;
    with `model_defaults`, one job per row with the model's 24 GB default batch set explicitly."""
    base = [f"gpu={gpu}", *common]
    if model_defaults:
        return [
            [*base, f"model={m}", f"precision={p}", *knobs, f"model.batch_size={model_default_batch(m, p)}"]
            for m, p, knobs in jobs(models, only)
        ]
    groups: dict[tuple, list[str]] = {}
    for model, precision, knobs in jobs(models, only):
        groups.setdefault((precision, knobs), []).append(model)
    return [
        [*base, f"model={','.join(group)}", f"precision={precision}", *knobs]
        for (precision, knobs), group in groups.items()
    ]


def run_sweeps(arg_lists: list[list[str]], dry_run: bool) -> None:
    for args in arg_lists:
        command = [sys.executable, "-m", "src.train", "-m", *args]
        print("$", " ".join(command[1:]), flush=True)
        if not dry_run:
            # A failed job fails its sweep's exit code but not the others: the table shows it.
            subprocess.run(command, cwd=ROOT, check=False)


def read_table(uri: str, experiment: str, since_ms: int) -> list[dict]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return []
    runs = client.search_runs([exp.experiment_id], filter_string=f"attributes.start_time >= {since_ms}")
    rows = []
    for run in runs:
        tags, metrics = run.data.tags, run.data.metrics
        if tags.get(recorded.SWEEP) == "true":
            continue
        model, precision = tags.get(recorded.MODEL), tags.get(recorded.PRECISION)
        throughput = metrics.get(recorded.THROUGHPUT)
        reference = LAMBDA_H200.get((model, precision))
        rows.append(
            {
                "model": model,
                "precision": precision,
                "compile": tags.get("compile"),
                "channels_last": tags.get("channels_last"),
                "batch": metrics.get(recorded.BATCH_SIZE),
                recorded.THROUGHPUT: throughput,
                "unit": tags.get(recorded.UNIT, ""),
                "ci95": metrics.get(recorded.STEP_TIME_CI95_REL),
                recorded.PEAK_MEMORY_GB: metrics.get(recorded.PEAK_MEMORY_GB),
                "tflops": metrics.get(recorded.ACHIEVED_TFLOPS_PER_GPU),
                recorded.MFU: metrics.get(recorded.MFU),
                "vs_lambda": throughput / reference if throughput and reference else None,
                "status": run.info.status if run.info.status != "FINISHED" else "",
                "error": tags.get(recorded.ERROR, "")[:80],
            }
        )
    order = {m: i for i, m in enumerate(VISION + LANGUAGE)}
    return sorted(rows, key=lambda r: (order.get(r["model"], 99), r["precision"], r["compile"]))


def print_table(rows: list[dict]) -> None:
    def fmt(value, spec):
        return "-" if value is None else format(value, spec)

    header = "model       precision compile batch   throughput unit          ci95   peak GB  TFLOP/s   MFU  vs Lambda"
    print(header)
    print("-" * len(header))
    for r in rows:
        print(
            f"{r['model']:<11} {r['precision']:<9} {r['compile']:<7} {fmt(r['batch'], '>5.0f')} "
            f"{fmt(r[recorded.THROUGHPUT], '>12,.0f')} {r['unit']:<12} {fmt(r['ci95'], '>6.1%')} "
            f"{fmt(r[recorded.PEAK_MEMORY_GB], '>8.1f')} {fmt(r['tflops'], '>8.1f')} {fmt(r[recorded.MFU], '>5.1%')} "
            f"{fmt(r['vs_lambda'], '>9.2f')}{'x' if r['vs_lambda'] else ' '} {r['status']} {r['error']}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--gpu", default="h200", help="gpu profile (its batch_sizes apply); default h200")
    parser.add_argument(
        "--model-defaults",
        action="store_true",
        help="run each model at its own default batch (sized for 24 GB), not the gpu profile's",
    )
    parser.add_argument("--models", nargs="+", default=VISION + LANGUAGE, choices=VISION + LANGUAGE)
    parser.add_argument("--precisions", nargs="+", default=PRECISIONS, choices=PRECISIONS)
    parser.add_argument("--experiment", default="models-table", help="MLflow experiment for these runs")
    parser.add_argument("--uri", default=f"sqlite:///{ROOT}/mlruns/mlflow.db", help="MLflow tracking URI")
    parser.add_argument("--time-limit", type=float, default=30.0, help="benchmark.time_limit_s per job")
    parser.add_argument(
        "--override", nargs="*", default=[], help="extra overrides for every job, e.g. model.batch_size=auto"
    )
    parser.add_argument("--dry-run", action="store_true", help="print the sweeps, run nothing")
    args = parser.parse_args()

    common = [
        f"tracking.uri={args.uri}",
        f"tracking.experiment={args.experiment}",
        f"benchmark.time_limit_s={args.time_limit}",
        "benchmark.rerun=true",  # a table measures anew, it does not resume earlier runs
        *args.override,
    ]
    started_ms = int(time.time() * 1000)
    run_sweeps(sweeps(args.models, args.gpu, common, args.model_defaults, args.precisions), args.dry_run)
    if not args.dry_run:
        print_table(read_table(args.uri, args.experiment, started_ms))


if __name__ == "__main__":
    main()
