"""How far the projection lands from data nobody here wrote: one card's measured points projected onto
every GPU of Lambda's tables that has a profile, each projected ratio between two of those cards set
against the published ratio, beside three naive predictors: the memory-bandwidth ratio alone, the
peak-TFLOP ratio alone, and the naive breakdown roofline (the source's matmul share at the spec
tensor-rate ratio, the rest at the bandwidth ratio). Nothing in the model is fitted to published
throughput: the tables are the test.

    python benchmarks/projection_check.py [URI ...] [--gpu h200] [--published lambda-2021 lambda-2022]

Without a URI the points are the project's own, shipped (reference/measured/): it runs on a CPU
from a fresh clone. Each card is projected at the batch the published row ran (the table's batch
sizes). Prints, per generation: the RTX A6000 over the RTX 3090 per model and precision (the study's
pair) as the markdown table docs/projection.md holds, what each ratio is made of, every pair of
profiled cards, and the article's eight figures; then, measured against measured, every 1-GPU
point of every card the stores (or the shipped points) hold projected onto each card at each batch
that card measured the workload at, against what was measured there (no published figure
involved). Lambda's "fp32" is TF32 math on Ampere and newer: it is set against the points at
precision tf32 (Volta runs them at its fp32 rate), amp against amp.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the suite's own modules

from omegaconf import OmegaConf  # noqa: E402

from src.compare.projection import source_figures, source_point, stored_counts  # noqa: E402
from src.compare.runs import aggregate, grouped, search_finished, to_record  # noqa: E402
from src.projection import shipped  # noqa: E402
from src.projection.cards import profiles  # noqa: E402
from src.projection.choose import at_batch  # noqa: E402
from src.projection.model import Card, ProjectionRefused, figures, project, ratio_band  # noqa: E402
from src.projection.sentences import pair_sentence  # noqa: E402
from src.published.imported import logged_means  # noqa: E402
from src.published.tables import generation  # noqa: E402

OURS = {"fp32": "tf32", "amp": "amp"}  # published precision -> the points set against it
STUDY = ("a6000", "rtx3090")
SOURCES = ("lambda-2021", "lambda-2022")
MODELS = ("ssd300", "resnet50", "maskrcnn", "txl_base", "txl_large")
ARTICLE = {  # the article's headline figures: A6000 over 3090, mean of the category's per-model ratios
    ("vision", "fp32", 1): 0.92,
    ("vision", "amp", 1): 1.01,
    ("language", "fp32", 1): 1.34,
    ("language", "amp", 1): 1.34,
    ("vision", "fp32", 8): 1.13,
    ("vision", "amp", 8): 1.14,
    ("language", "fp32", 8): 1.36,
    ("language", "amp", 8): 1.33,
}
CATEGORIES = {"vision": ("ssd300", "resnet50", "maskrcnn"), "language": ("txl_base", "txl_large")}
FAR = 2.0  # a published ratio beyond every predictor by this factor: a host-bound or failed run
PREDICTORS = {
    "projected": "projection",
    "bandwidth": "bandwidth alone",
    "peak": "peak alone",
    "roofline": "naive roofline",
}


@dataclass(frozen=True)
class Cell:
    throughput: float
    batch: int  # per GPU
    logged_mean: bool  # the mean of the runs logged behind the table's cell (the figure compare imports)


@dataclass(frozen=True)
class Row:
    pair: tuple[str, str]
    model: str
    precision: str  # as published
    published: float
    predicted: dict[str, float]  # predictor -> ratio
    band: tuple[float, float]
    batches: tuple[int, int]
    sentence: str

    def error(self, predictor: str) -> float:
        return self.predicted[predictor] / self.published - 1

    @property
    def far(self) -> bool:
        return all(max(r / self.published, self.published / r) > FAR for r in self.predicted.values())


def published(source: str) -> dict[tuple, Cell]:
    """(gpu profile, model, precision) -> the 1-GPU figure and its per-GPU batch, as the importer
    reads them (src/published/tables.py): where Lambda's logs hold the runs behind a cell (the study's
    pair in 2021), their mean is the figure, as compare's is (imported.logged_means says so)."""
    importer = OmegaConf.load(ROOT / "conf" / "import_results.yaml")
    tasks, named = (OmegaConf.to_container(importer[k]) for k in ("tasks", "gpu_profiles"))
    shipped_tables, found = generation(source), {}
    for table in shipped_tables.tables:
        for r in shipped_tables.read(table["precision"], tasks, named).results:
            if r.gpu in named.values() and r.gpu_count == 1 and r.batch:
                cell = Cell(r.throughput, int(r.batch), r.cell is not None)
                found[(r.gpu, r.model, table["precision"])] = cell
    return found


def measured_runs(uris: list[str], experiment: str) -> tuple[list, object]:
    """The runs of the stores named, else the shipped ones, and a run's counted ops by its id."""
    if uris:
        runs = [run for uri in uris for run in search_finished(uri, [experiment], "", "")[0]]
        counts = [stored_counts(uri) for uri in uris]
        return runs, lambda run_id: next(filter(None, (read(run_id) for read in counts)), None)
    found = shipped.read()
    return list(found.runs), found.counts.get


def measured_cards(runs: list) -> list[str]:
    """The cards with a measured training point among `runs`."""
    records = filter(None, map(to_record, runs))
    return sorted({r.gpu for r in records if r.model != "ceilings" and not r.result.smoke})


def source_points(runs: list, counted, gpu: str) -> list:
    """The measured points of `gpu` among `runs` with their card's figures; `counted`: a run's
    counted ops by its id (measured_runs gives both)."""
    records = [r for r in map(to_record, runs) if r and r.gpu == gpu and not r.result.smoke]
    by_id = {r.run_id: r for r in runs}
    cards = profiles([gpu])
    points = []
    for m in aggregate(records):
        point = source_point(m, counted)
        points.append((point, source_figures(point, by_id, cards.get(gpu))))
    return points


def naive(point, source: Card, a: Card, b: Card) -> dict[str, float]:
    """The three back-of-envelope ratios of A over B, from the spec sheets (and the source's matmul share)."""
    peak_a, peak_b = (c.peak_tflops[c.runs_math(point.math)] for c in (a, b))
    share = point.shares["matmul"]

    def step(card: Card, peak: float) -> float:
        return (
            share * source.peak_tflops[point.math] / peak
            + (1 - share) * source.memory_bandwidth_gbs / card.memory_bandwidth_gbs
        )

    return {
        "bandwidth": a.memory_bandwidth_gbs / b.memory_bandwidth_gbs,
        "peak": peak_a / peak_b,
        "roofline": step(b, peak_b) / step(a, peak_a),
    }


def measured_at(pairs: list, batch: int) -> tuple:
    """Of one workload's (point, its card's figures), the pair of the point measured at `batch`, else
    at the nearest (compare's rule: choose.at_batch)."""
    point = at_batch([p for p, _ in pairs], batch)
    return next(pair for pair in pairs if pair[0] is point)


def project_at(pairs: list, card: Card, batch: int, model_error: float):
    """The workload projected onto `card` at `batch`, from the point measured nearest that batch."""
    point, source_card = measured_at(pairs, batch)
    return project(point, source_card, figures(card, source=source_card), model_error, batch)


def check(source: str, points: list, model_error: float) -> list[Row]:
    """Every published ratio of two profiled cards that both have a projection, the study's pair as
    the article has it (A6000 over 3090), the others in name order. Each card is projected from the
    point measured at its row's batch, else at the nearest; the naive predictors read the point of
    the source card's own batch (its profile's), as a buyer reads the card they measured."""
    table = published(source)
    cards = {name: Card.from_profile(p) for name, p in profiles({g for g, _, _ in table}).items()}
    by_workload = grouped(((p.model, p.precision), (p, f)) for p, f in points if p.gpu_count == 1)
    rows = []
    for (a, b), model, (precision, ours) in itertools.product(
        itertools.combinations(sorted(cards), 2), MODELS, OURS.items()
    ):
        if (b, a) == STUDY:
            a, b = b, a
        cells, found = (
            (table.get((a, model, precision)), table.get((b, model, precision))),
            by_workload.get((model, ours)),
        )
        if not (all(cells) and found):
            continue
        try:
            pa, pb = (
                project_at(found, cards[c], cell.batch, model_error)
                for c, cell in zip((a, b), cells, strict=True)
            )
        except ProjectionRefused:
            continue
        own = found[0][1].card.batch_for(model, ours)
        point, source_card = measured_at(found, own) if own else found[0]
        predicted = {"projected": pa.throughput / pb.throughput} | naive(
            point, source_card.card, cards[a], cards[b]
        )
        rows.append(
            Row(
                (a, b),
                model,
                precision,
                cells[0].throughput / cells[1].throughput,
                predicted,
                ratio_band(pa, pb, model_error),
                (cells[0].batch, cells[1].batch),
                pair_sentence(pa, pb, model_error),
            )
        )
    return rows


def stats(rows: list[Row], predictor: str) -> tuple[float, float]:
    """Median and worst absolute error."""
    errors = [abs(r.error(predictor)) for r in rows]
    return statistics.median(errors), max(errors)


def summary(rows: list[Row]) -> str:
    return "; ".join(f"{PREDICTORS[p]} {stats(rows, p)[0]:.1%} / {stats(rows, p)[1]:.1%}" for p in PREDICTORS)


def every_pair(rows: list[Row]) -> str:
    """The all-pairs row of docs/projection.md's table: ratios, then each predictor's median / worst."""
    kept = [r for r in rows if not r.far]
    return (
        f"| {len(kept)} | "
        + " | ".join(f"{stats(kept, p)[0]:.1%} / {stats(kept, p)[1]:.1%}" for p in PREDICTORS)
        + " |"
    )


def markdown(rows: list[Row]) -> list[str]:
    """The study pair's table as docs/projection.md holds it (tests/test_projection_doc.py keeps them one)."""
    lines = [
        "| model | precision | published | projected [band] | error | bandwidth alone | peak alone | "
        "naive roofline | batches A6000 / 3090 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        precision = "fp32 (tf32)" if r.precision == "fp32" else r.precision
        errors = " | ".join(f"{r.error(p):+.1%}" for p in PREDICTORS)
        lines.append(
            f"| {r.model} | {precision} | {r.published:.3f} | {r.predicted['projected']:.3f} "
            f"[{r.band[0]:.2f}-{r.band[1]:.2f}] | {errors} | {r.batches[0]} / {r.batches[1]} |"
        )
    medians = " | ".join(f"{stats(rows, p)[0]:.1%} / {stats(rows, p)[1]:.1%}" for p in PREDICTORS)
    lines.append(f"| median / worst | | | | {medians} | |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "uris", nargs="*", metavar="uri", help="stores of the source card's runs (default: shipped)"
    )
    parser.add_argument("--gpu", default="h200", help="the source card (gpu profile)")
    parser.add_argument("--experiment", default="gpubench")
    parser.add_argument(
        "--published", nargs="+", default=list(SOURCES), help="the shipped generations to check against"
    )
    args = parser.parse_args()
    model_error = OmegaConf.load(ROOT / "conf" / "compare.yaml").projection.model_error
    runs, counted = measured_runs(args.uris, args.experiment)
    points = source_points(runs, counted, args.gpu)
    where = ", ".join(args.uris) or shipped.read().name
    for source in args.published:
        rows = check(source, points, model_error)
        study = [r for r in rows if r.pair == STUDY]
        print(
            f"\n{STUDY[0]} over {STUDY[1]}, 1 GPU, projected from {args.gpu} ({where}) against {source}, "
            "each card at the batch of its published row:\n"
        )
        print("\n".join(markdown(study)))
        if logged := sum(cell.logged_mean for cell in published(source).values()):
            print(f"\n{logged_means(source, logged)}")
        print(f"\n(the band holds the model's error as conf/compare.yaml states it: {model_error:.0%})")
        print("\nwhat each ratio is made of:")
        for r in study:
            print(f"- {r.sentence}")
        others = [r for r in rows if not r.far]
        print(
            f"\nevery pair of profiled cards in {source}, 1 GPU, median / worst absolute error (ratios | "
            f"{' | '.join(PREDICTORS.values())}):\n{every_pair(rows)}"
        )
        for pair, group in itertools.groupby(sorted(others, key=lambda r: r.pair), key=lambda r: r.pair):
            print(f"  {'/'.join(pair):<26}{summary(list(group))}")
        for r in (r for r in rows if r.far):
            print(
                f"  published {'/'.join(r.pair)} {r.model} {r.precision} {r.published:.2f}x sits beyond every "
                f"predictor (projected {r.predicted['projected']:.2f}x): a host-bound or failed run; left out above"
            )
        article(study, source)
    measured_against_measured(
        {gpu: source_points(runs, counted, gpu) for gpu in measured_cards(runs)},
        model_error,
    )


def measured_against_measured(cards: dict[str, list], model_error: float) -> None:
    """The model against measurement alone: each 1-GPU point projected onto each card that measured
    its workload, at each batch that card ran it (onto its own card: the batch part alone), set
    against what was measured there. `cards`: gpu -> its points with their figures."""
    by_pair: dict[tuple[str, str], list[str]] = {}
    errors: dict[tuple[str, str], list[float]] = {}
    for (a, found_a), (b, found_b) in itertools.product(cards.items(), repeat=2):
        for (p, source), (q, there) in itertools.product(found_a, found_b):
            if p is q or (p.model, p.precision, p.gpu_count, q.gpu_count) != (q.model, q.precision, 1, 1):
                continue
            projected = project(p, source, figures(there.card, there.ceilings), model_error, q.batch)
            error = projected.throughput / q.throughput - 1
            errors.setdefault((a, b), []).append(error)
            by_pair.setdefault((a, b), []).append(
                f"    {p.model:<10}{p.precision:<5}batch {p.batch:>4} -> {q.batch:<4} measured "
                f"{q.throughput / p.throughput:.3f}x, projected {projected.throughput / p.throughput:.3f}x "
                f"({error:+.1%})"
            )
    if not by_pair:
        return
    print(
        "\nmeasured against measured, 1 GPU: each point projected onto a card at a batch that card measured "
        "(gain over the point's own throughput; no published figure involved):"
    )
    for (a, b), lines in sorted(by_pair.items()):
        found = [abs(e) for e in errors[(a, b)]]
        print(
            f"  {a} -> {b}: {len(found)} projections, median / worst absolute error "
            f"{statistics.median(found):.1%} / {max(found):.1%}"
        )
        print("\n".join(sorted(lines)))


def article(study: list[Row], source: str) -> None:
    """The article's category means (A6000 over 3090), from the tables and projected; 1 GPU only."""
    print(f"\nthe article's figures at 1 GPU (A6000 over 3090, mean of the category's ratios), {source}:")
    ratios = {(r.model, r.precision): r for r in study}
    for (category, precision, count), claimed in ARTICLE.items():
        found = [ratios.get((m, precision)) for m in CATEGORIES[category]]
        if count != 1 or None in found:
            continue
        tables = statistics.fmean(r.published for r in found)
        projected = statistics.fmean(r.predicted["projected"] for r in found)
        print(
            f"  {category:<9}{precision:<5}x1: article {claimed:.2f}x, tables {tables:.2f}x, projected "
            f"{projected:.2f}x ({projected / tables - 1:+.1%})"
        )


if __name__ == "__main__":
    main()
