"""How far the projection lands from data nobody here wrote: one card's runs projected onto every GPU
of Lambda's tables that has a profile, each projected ratio between two target cards against the
published ratio, beside two naive predictors (the memory-bandwidth ratio alone, the peak-TFLOP ratio
alone). Nothing in the model is fitted to published throughput: the tables are the test.

    python benchmarks/projection_check.py sqlite:////path/mlflow.db [--gpu h200] [--batch own|same]
        [--published lambda-2021] [--csv FILE]

Prints: the RTX A6000 over RTX 3090 per model and precision (the study's pair), then every pair of
profiled cards of that generation, with median and worst absolute error of each predictor; the
article's eight figures projected. Lambda's "fp32" is TF32 math on Ampere and newer: it is set
against the runs at precision tf32 (and Volta's fp32 rate where a card has no TF32), amp against amp.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the suite's own modules

from omegaconf import OmegaConf  # noqa: E402

from src import recorded  # noqa: E402
from src.compare.projection import project_onto  # noqa: E402
from src.compare.runs import aggregate, search_finished, to_record  # noqa: E402
from src.hardware import devices  # noqa: E402
from src.import_results import SHIPPED, _batches_and_runs, generation  # noqa: E402
from src.projection.cards import profiles  # noqa: E402
from src.projection.choose import BATCHES, OWN  # noqa: E402
from src.projection.model import ratio_band  # noqa: E402
from src.projection.sentences import pair_sentence  # noqa: E402
from src.published import read_table  # noqa: E402

OURS = {"fp32": "tf32", "amp": "amp"}  # published precision -> the runs set against it
STUDY = ("a6000", "rtx3090")
ARTICLE = {  # the article's headline figures: A6000 over 3090, mean of the category's per-model ratios
    ("vision", "fp32", 1): 0.92, ("vision", "amp", 1): 1.01, ("language", "fp32", 1): 1.34,
    ("language", "amp", 1): 1.34, ("vision", "fp32", 8): 1.13, ("vision", "amp", 8): 1.14,
    ("language", "fp32", 8): 1.36, ("language", "amp", 8): 1.33,
}  # fmt: skip
CATEGORIES = {"vision": ("ssd300", "resnet50", "maskrcnn"), "language": ("txl_base", "txl_large")}
FAR = 2.0  # a published ratio beyond every predictor by this factor: a host-bound or failed run


def published(source: str) -> dict[tuple, float]:
    """(gpu profile, gpu count, model, precision) -> throughput, through the importer's readers. The
    2021 tables truncate each figure to a whole number (Mask R-CNN: 12 and 14 images/s); where Lambda's
    logs hold the runs behind a cell (the study's pair), their mean is the figure."""
    importer = OmegaConf.load(ROOT / "conf" / "import_results.yaml")
    tasks, profiles = (OmegaConf.to_container(importer[k]) for k in ("tasks", "gpu_profiles"))
    shipped = generation(source)
    found = {}
    for table in shipped.tables:
        _, logged = _batches_and_runs(shipped, table["precision"], tasks, profiles)
        for r in read_table(SHIPPED / table[recorded.THROUGHPUT], tasks, profiles).results:
            if r.gpu in profiles.values():
                runs = logged.get((r.system, r.gpu_count, r.task))
                found[(r.gpu, r.gpu_count, r.model, table["precision"])] = statistics.fmean(runs) if runs else r.throughput
    return found


def naive(a, b, math_: str) -> tuple[float, float]:
    """The bandwidth ratio and the peak ratio of the math each card runs."""
    peak = a.peak_tflops[a.runs_math(math_)] / b.peak_tflops[b.runs_math(math_)]
    return a.memory_bandwidth_gbs / b.memory_bandwidth_gbs, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("uris", nargs="+", metavar="uri",
                        help="the MLflow store(s) of the source card's runs, e.g. sqlite:////data/mlflow.db")
    parser.add_argument("--gpu", default="h200", help="the source card (gpu profile)")
    parser.add_argument("--experiment", default="gpubench")
    parser.add_argument("--batch", choices=BATCHES, default=OWN)
    parser.add_argument("--published", default="lambda-2021", help="the shipped generation to check against")
    parser.add_argument("--csv", type=Path, help="write every pair's row here")
    args = parser.parse_args()
    model_error = OmegaConf.load(ROOT / "conf" / "compare.yaml").projection.model_error

    table = published(args.published)
    targets = sorted({gpu for gpu, count, _, _ in table if count == 1 and devices.load_profile(gpu)})
    runs = [run for uri in args.uris for run in search_finished(uri, [args.experiment], "", "")[0]]
    records = [r for r in map(to_record, runs) if r and r.gpu == args.gpu and not r.result.smoke]
    cards = profiles([*targets, args.gpu])
    done = project_onto(aggregate(records), runs, targets, cards, args.batch, model_error)
    for line in done.refused:
        print(f"not projected: {line}")
    for p in done.projections:
        if p.target.name in STUDY and id(p) in done.notes:
            print(f"not at the card's own batch: {done.notes[id(p)]}")
    projected = {(p.target.name, p.source.model, p.source.precision, p.source.gpu_count): p for p in done.projections}
    rows = []
    for precision, ours in OURS.items():
        models = sorted({m for _, _, m, pr in table if pr == precision})
        for a, b in itertools.permutations(targets, 2):
            for model in models:
                pa, pb = projected.get((a, model, ours, 1)), projected.get((b, model, ours, 1))
                ta, tb = table.get((a, 1, model, precision)), table.get((b, 1, model, precision))
                if not (pa and pb and ta and tb) or (a > b and (a, b) != STUDY) or (a, b) == STUDY[::-1]:
                    continue  # each pair once, in name order; the study's as the article has it
                bw, peak = naive(pa.target, pb.target, pa.source.math)
                ratio, truth = pa.throughput / pb.throughput, ta / tb
                far = all(max(x / truth, truth / x) > FAR for x in (ratio, bw, peak))
                rows.append(dict(pair=f"{a}/{b}", model=model, precision=precision, published=truth,
                                 projected=ratio, band=ratio_band(pa, pb, model_error), bandwidth=bw, peak=peak,
                                 batches=f"{pa.source.batch}/{pb.source.batch}", far=far,
                                 sentence=pair_sentence(pa, pb, model_error)))  # fmt: skip
    report(rows, args, done, projected, table, model_error)
    if args.csv:
        with args.csv.open("w", newline="") as f:
            writer = csv.DictWriter(f, [k for k in rows[0] if k != "sentence"], extrasaction="ignore")
            writer.writeheader()
            writer.writerows(rows)


def error(row: dict, key: str) -> float:
    return row[key] / row["published"] - 1


def stats(rows: list[dict]) -> str:
    cells = []
    for key in ("projected", "bandwidth", "peak"):
        errors = [abs(error(r, key)) for r in rows]
        cells.append(f"{key}: median {statistics.median(errors):.1%}, worst {max(errors):.1%}" if errors else f"{key}: -")
    return "; ".join(cells)


def report(rows: list[dict], args, done, projected: dict, table: dict, model_error: float) -> None:
    study = [r for r in rows if r["pair"] == "/".join(STUDY)]
    print(f"\n{STUDY[0]} over {STUDY[1]}, 1 GPU: projected from {args.gpu} ({args.batch} batch) against {args.published}")
    print(f"{'model':<10}{'prec':<6}{'published':>10}{'projected':>10}{'band':>13}{'error':>8}{'bw err':>8}{'peak err':>9}  batches")
    for r in study:
        band = f"{r['band'][0]:.2f}-{r['band'][1]:.2f}"
        print(f"{r['model']:<10}{r['precision']:<6}{r['published']:>10.3f}{r['projected']:>10.3f}{band:>13}"
              f"{error(r, 'projected'):>+8.1%}{error(r, 'bandwidth'):>+8.1%}{error(r, 'peak'):>+9.1%}  {r['batches']}")  # fmt: skip
    print(f"absolute error, {len(study)} ratios: {stats(study)}")
    print(f"(the band holds the model's error as conf/compare.yaml states it: {model_error:.0%})")
    print("\nwhat each ratio is made of:")
    for r in study:
        print(f"- {r['sentence']}")
    others = [r for r in rows if not r["far"]]
    print(f"\nevery pair of profiled cards in {args.published}, 1 GPU ({len(others)} ratios):")
    print(f"  {stats(others)}")
    for pair, group in itertools.groupby(sorted(others, key=lambda r: r["pair"]), key=lambda r: r["pair"]):
        print(f"  {pair:<26}{stats(list(group))}")
    for r in (r for r in rows if r["far"]):
        print(f"  published {r['pair']} {r['model']} {r['precision']} {r['published']:.2f}x sits beyond every "
              f"predictor (projected {r['projected']:.2f}x, bandwidth {r['bandwidth']:.2f}x, peak {r['peak']:.2f}x): "
              "a host-bound or failed run; left out of the figures above")  # fmt: skip
    article(study, table)


def article(study: list[dict], table: dict) -> None:
    print("\nthe article's eight figures (A6000 over 3090, mean of the category's per-model ratios):")
    ratios = {(r["model"], r["precision"]): r["projected"] for r in study}
    for (category, precision, count), claimed in ARTICLE.items():
        models = CATEGORIES[category]
        found = [ratios.get((m, precision)) for m in models]
        pub = [table.get((STUDY[0], count, m, precision)) / table[(STUDY[1], count, m, precision)] for m in models
               if table.get((STUDY[0], count, m, precision)) and table.get((STUDY[1], count, m, precision))]  # fmt: skip
        from_tables = f"{statistics.fmean(pub):.2f}x" if len(pub) == len(models) else "-"
        if None in found:
            print(f"  {category:<9}{precision:<5}x{count}: article {claimed:.2f}x, tables {from_tables}, projected: "
                  f"missing {', '.join(m for m, v in zip(models, found, strict=True) if v is None)}")  # fmt: skip
            continue
        mean = statistics.fmean(found)
        said = "" if count == 1 else " (from the 1-GPU points: communication not projected without a multi-GPU run)"
        print(f"  {category:<9}{precision:<5}x{count}: article {claimed:.2f}x, tables {from_tables}, projected "
              f"{mean:.2f}x ({mean / claimed - 1:+.1%}){said}")  # fmt: skip


if __name__ == "__main__":
    main()
