"""One comparison, as its five steps: check the config, load the runs, compare their points, say it in
sections, render them (files, report.md, the MLflow report run, the console)."""

from __future__ import annotations

import contextlib
import datetime
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import OmegaConf

from src import console
from src.compare import (
    analysis,
    anomalies,
    axis,
    capacity,
    explain,
    hardware_software,
    projection,
    report,
    runs,
    study,
)
from src.compare.folder import OutFolder
from src.compare.report import Section
from src.config import points
from src.config.groups.precision import PRECISIONS
from src.config.groups.tracking import tracking_errors
from src.errors import ConfigError
from src.published import imported
from src.results import recorded
from src.results.recorded import PROJECTED
from src.results.run_result import RunResult
from src.tracking import credentials, job_run, store

FILTERS = tuple(f"{name}s" for name in runs.FILTERED)  # the keys runs.select filters by, each a flat list
ALWAYS_NOTED = [
    "Intervals (95%): a t-interval on log throughput; a point's spread comes from its repeats "
    "(fresh processes), or for a single run from its step-time CI (`within-run only`: it misses "
    "what differs between processes); a ratio combines both sides, a mean all its ratios "
    "(the uncertainty of these models' mean as measured, not the spread between models). A ratio "
    "whose interval holds 1.0 is marked `~1`: no measurable difference. A published figure carries the "
    "spread of the logged runs it is the mean of where the source has them (`published runs`); "
    "one without has none, none is invented, and an interval against it rests on the other side only. "
    "The baseline's own rows (1.0 by definition) are in the CSVs only.",
    "Precision groups: fp32 and tf32 are charted together as fp32, amp and bf16 as mixed "
    "precision; every table keeps the precision each run used. A ratio takes the baseline at the "
    "same precision when it has one, else at another of the same group (see baseline_precision).",
    "Category means are the arithmetic mean of the per-model ratios, as in Lambda's RTX A6000 vs "
    "RTX 3090 article, over the models the gpu and the baseline both have (`models`; "
    "`models_left_out` names the others and why): a gpu's mean depends on its runs and the "
    "baseline's only.",
]

# a note for each kind of row or run that needs one: {} names them, short names joined by ", ", labels by "; "
NAMED_NOTES = {
    "nothing_common": "No category mean for (no model in common with the other gpus of the group): {}",
    "crossed": "Some ratios set one source against another ({}): the {baseline} figures of the row's own "
    "source were missing.",
    "tf32": "fp32 figures of source(s) {} ran TF32 tensor-core math where the GPU has it (published 'fp32' "
    "is the container default); this project's fp32 is strict IEEE fp32 and its tf32 is the like-for-like "
    "precision.",
    "math_differs": "math_differs: strict IEEE fp32 set against TF32 math (published 'fp32' ran TF32); shown "
    "flagged and left out of the category means: {}. Set tf32 runs beside them.",
    "stack_differs": "stack_differs: the baseline has no run on the same {stack}, so these ratios set unlike "
    "stacks against each other: {}.{split}",
    "superseded": "Measured again: {superseded} run(s) that shared a GPU or missed their stopping rule have "
    "a later clean run of the same point and config (resume measured it again), which stands in for them; "
    "they are kept in the store: {}.",
    "variants": "Runs of one model that differ in what is measured are separate points, named by what "
    "differs: {}. A ratio takes the baseline with the same sizes and settings.",
    "published": "Rows whose source is not `measured` are published figures imported with "
    "src.published; their runs carry the tags published_system and published_task.",
}
SHORT_NAMES = ("crossed", "tf32", "superseded")


@dataclass
class Comparison:
    """One comparison: the runs it read, what it computed from them (points -> ratios), what it wrote."""

    experiments: list[str]
    experiment_ids: dict[str, str]  # name -> id, of those that exist
    runs: list[RunResult]  # every FINISHED run of the experiments
    records: list[runs.RunRecord]  # those with a throughput
    smoke_left_out: int
    untagged: int  # with by=: runs without the key's tag, left out
    baseline: str
    measurements: list[runs.Measurement]
    outside: str  # one line for the runs the question asked leaves out (scope below)
    projected: projection.Outcome  # project=[...]
    by: str | None
    rows: list[analysis.RelativeRow]
    summary: list[dict]  # the category means, summary.csv's rows
    nothing_common: list[str]  # series with no model in common: no mean
    scaling: dict[tuple, float]  # point -> its scaling efficiency
    found: list[anomalies.Anomaly]
    out: Path | None = None  # where its files went, once written
    files: list[Path] = field(default_factory=list)
    report_run_id: str = ""

    @property
    def flagged(self):
        """Point -> the kinds of anomaly flagged on it."""
        return runs.grouped((anomaly.measurement.point, anomaly.kind) for anomaly in self.found)


def run_compare(cfg, out):
    """Check the config, compare, then render what it says; a compare that fails leaves no folder of
    its own behind."""
    try:
        validate_compare(cfg)
        with OutFolder(out) as folder:  # its own until the report run has logged its files
            return _run(cfg, folder)
    except BaseException:
        with contextlib.suppress(OSError):
            Path(out).rmdir()  # only where it is empty: the folder Hydra made for this compare
        raise


def _run(cfg, folder):
    c = compare(cfg)
    parts = sections_of(c, cfg)
    folder.clear()
    try:
        text = report.write(
            parts, f"Training throughput relative to {c.baseline}", _facts(cfg, c), folder.new, cfg.charts
        )
    except OSError as exc:  # a full disk, a folder made read-only: the files written so far go
        raise ConfigError(
            f"out={str(folder.path)!r}: cannot be written ({exc.strerror}); nothing was logged"
        ) from None
    c.out, c.files = folder.path, folder.written
    if cfg.tag_runs:  # a projected point tags no run: the runs behind it measured something else
        measured = [m for m in c.measurements if m.source != PROJECTED]
        found = [a for a in c.found if a.measurement.source != PROJECTED]
        anomalies.tag_runs(cfg.tracking.uri, measured, c.rows, c.scaling, found)
    c.report_run_id = _log_report_run(cfg, c, text)
    for line in (w for part in parts for w in part.warnings):
        console.warning(line)
    for part in parts:
        for table in (t for t in part.tables if t.printed):
            report.show(table)
        for line in part.said:
            console.note(line)
    if c.outside:
        console.note(c.outside)
    return c


def validate_compare(cfg):
    """Key, value and what is allowed, for every bad value, before any run is read; an option that
    changes a study's question is refused in a line of its own."""
    if cfg.study.name and (line := study.refused(cfg)):
        raise ConfigError(line)
    errors = tracking_errors(cfg.tracking)
    if not cfg.tracking.report_experiment:
        errors.append("tracking.report_experiment='': must name the experiment report runs go to")
    if cfg.baseline == "":
        errors.append(
            "baseline='': must name a gpu profile (baseline=rtx3090), a value of by= (baseline=2.11.0), "
            f"or be null ({cfg.study.baseline}; with by=, the oldest value)"
        )
    if cfg.by is not None and not str(cfg.by).replace("_", "").replace(".", "").isalnum():
        errors.append(
            f"by={cfg.by!r}: must be null (compare gpus), a stack key ({', '.join(points.STACK)}), "
            "host, or another tag's name"
        )
    if cfg.baseline_source == "":
        errors.append("baseline_source='': must be null (the row's own source first) or a source name")
    nested = [k for k in FILTERS if not all(isinstance(v, (str, int, float)) for v in cfg[k])]
    errors += [f"{k}={OmegaConf.to_container(cfg[k])}: must be one flat list, e.g. {k}=[a,b]" for k in nested]
    if not nested:  # OmegaConf lets a list of lists through a list[str] field: the checks below would fail
        if any(p not in PRECISIONS for p in cfg.precisions):
            errors.append(f"precisions={list(cfg.precisions)}: each must be one of {', '.join(PRECISIONS)}")
        if any(c < 1 for c in cfg.gpu_counts):
            errors.append(f"gpu_counts={list(cfg.gpu_counts)}: each must be a whole number >= 1")
    for key in ("scaling_tolerance", "spec_tolerance"):
        if cfg.anomalies[key] < 0:
            errors.append(f"anomalies.{key}={cfg.anomalies[key]}: must be >= 0 (a fraction: 0.02 = 2%)")
    pair = cfg.capacity_split
    if pair and (len(pair) != 2 or pair[0] == pair[1] or not all(map(capacity.is_card, pair))):
        errors.append(
            f"capacity_split={list(pair)}: must be two different cards, gpu or gpu@<memory_limit_gb> "
            "(GB > 0), e.g. capacity_split=[a6000,rtx3090] or capacity_split=[h200@48,h200@24]"
        )
    if errors := errors + projection.errors(cfg):
        raise ConfigError("invalid config:\n  " + "\n  ".join(errors))


def compare(cfg):
    """The runs read and kept, their points (each the median of its runs), ratios, means and anomalies."""
    experiments = [e for e in (cfg.tracking.experiment, cfg.tracking.published_experiment) if e]
    if cfg.project:  # a store without runs still projects the project's own shipped points
        store.ensure_experiment(cfg.tracking.uri, cfg.tracking.experiment)
    finished, ids = runs.search_finished(cfg.tracking.uri, experiments, cfg.filter_string, cfg.study.hint)
    records = [r for r in map(runs.to_record, finished) if r is not None]
    kept, smoke = runs.select(records, cfg)
    if smoke:  # said before anything can fail for want of runs: they may be all there is
        console.note(f"{smoke:,} benchmark=smoke run(s) left out; include_smoke=true counts them")
    kept, untagged = axis.along(kept, cfg.by) if cfg.by else (kept, [])
    if measured := sum(r.source == runs.MEASURED for r in untagged):  # a published row logs no stack
        tag = points.STACK.get(cfg.by, cfg.by)
        console.note(f"by={cfg.by}: {measured:,} measured run(s) without a {tag} tag left out")
    sources = sorted({r.source for r in kept})
    if cfg.baseline_source and cfg.baseline_source not in sources:
        raise ConfigError(
            f"baseline_source={cfg.baseline_source}: unknown source; the runs the filters keep "
            f"have {', '.join(sources) or 'none'}"
        )
    baseline = axis.baseline(kept, cfg.by, cfg.baseline, cfg.study.baseline)
    kept, outside = scope(kept, cfg, baseline)
    projected = projection.for_compare(cfg, finished, baseline)
    measurements = runs.aggregate(kept) + projected.measurements
    rows = analysis.relative_table(measurements, baseline, cfg.baseline_source, cfg.by)
    if cfg.project and not measurements:  # nothing to show but a projection, and it projected nothing
        said = projection.nothing_projected(projected, reported=False)  # a failed compare writes no report
        raise runs.CompareError(f"project={list(cfg.project)}: {said}")
    if not cfg.capacity_split:  # the split compares its own pair, which may be one gpu under two caps
        analysis.check_comparable(measurements, rows, baseline, cfg.study.hint)
    scaling = analysis.scaling(measurements)
    return Comparison(
        experiments,
        ids,
        finished,
        records,
        smoke,
        len(untagged),
        baseline,
        measurements,
        outside,
        projected,
        cfg.by,
        rows,
        *analysis.summarize(rows, baseline),  # the category means, the series without one
        scaling,
        anomalies.find(measurements, rows, scaling, cfg.anomalies),
    )


def sections_of(c, cfg):
    """The question asked first (an experiment's study), then the GPU comparison, why, the splits."""
    # with by=, gpus= filters the runs but the compared axis is KEY's values: no gpu is asked for there
    unanswered = asked_without_figures([] if cfg.by else list(cfg.gpus), c)
    asked = cfg.study if cfg.study.name else None
    stated = study.figures(c.summary, asked) if asked else []
    parts = [study.section(stated, c.rows, asked)] if asked else []
    parts += analysis.sections(c, not asked, study.marks(stated))
    parts += [] if c.by else hardware_software.section(c.rows, c.measurements)
    unlogged = unlogged_specs(c.measurements)  # said on the console too
    parts += [
        anomalies.section(c.found),
        Section("Notes", [f"- {note}" for note in unanswered + _notes(c) + unlogged], said=unlogged),
    ]
    parts += explain.section(c.runs, c.measurements, c.rows) + capacity.section(
        c.measurements, list(cfg.capacity_split)
    )
    parts += projection.section(c.projected)
    parts[0].warnings += unanswered
    return parts


def scope(records, cfg, baseline):
    """The runs of the question asked (an experiment's study; else, without gpus= or all=true, the baseline,
    the study's pair and every gpu you measured), and one line for what that leaves out ('' when nothing)."""
    if cfg.study.name:
        inside = [r for r in records if study.in_scope(r, cfg.study)]
        shows = f"`python -m src.compare baseline={baseline} all=true` shows them"
    elif cfg.all or cfg.gpus or cfg.by or all(r.gpu != baseline for r in records):
        return records, ""  # (no baseline run: the error names every gpu there is)
    else:
        wanted = {baseline, *cfg.study.gpus} | {r.gpu for r in records if r.source == runs.MEASURED}
        inside, shows = [r for r in records if r.gpu in wanted], "all=true or gpus=[...] shows them"
    kept = set(map(id, inside))
    outside = [r for r in records if id(r) not in kept]
    if not outside:
        return inside, ""
    gpus = sorted({r.gpu for r in outside})
    named = ", ".join(gpus[:5]) + (f" and {len(gpus) - 5} more" if len(gpus) > 5 else "")
    return inside, (
        f"left out: {len(outside):,} run(s) outside the question, of {named} "
        f"(source {', '.join(sorted({r.source for r in outside}))}); {shows}"
    )


def asked_without_figures(asked, c):
    """A gpu named in `gpus=` that no table or chart will show, and why."""
    said, names = [], ", ".join(sorted({r.gpu for r in c.records})) or "none"
    for gpu in dict.fromkeys(asked):
        if gpu not in {m.gpu for m in c.measurements}:
            said.append(
                f"gpus: {gpu} has no FINISHED run with a throughput that matches the filters (gpus with runs: {names})"
            )
        elif gpu not in {s["gpu"] for s in c.summary}:
            ratios = [r for r in c.rows if r.measurement.gpu == gpu and r.ratio is not None]
            why = (
                f"its ratios to baseline={c.baseline} set strict IEEE fp32 against TF32 math (math_differs), "
                "which no category mean counts: relative_throughput.csv and report.md list them"
                if ratios and all(r.math_differs for r in ratios)
                else f"none shares a model, GPU count and precision group with baseline={c.baseline}: "
                "no ratio for it (relative_throughput.csv lists its runs)"
            )
            said.append(f"gpus: {gpu} has runs, but {why}")
    return said


def _label(row):
    m, b = row.measurement, row.baseline
    return f"{m.side} {m.workload} {m.precision} x{m.gpu_count} [{m.source}] vs {b.precision} [{b.source}]"


def _facts(cfg, c):
    """report.md's lines under its title: the baseline, the runs read and kept, the filters, when."""
    filters = {k: list(cfg[k]) for k in FILTERS if cfg[k]} | (
        {"filter_string": cfg.filter_string} if cfg.filter_string else {}
    )
    smoke = (
        f"; {c.smoke_left_out:,} benchmark=smoke run(s) left out (include_smoke=true counts them)"
        if c.smoke_left_out
        else ""
    )
    untagged = f", {c.untagged:,} run(s) without the tag left out" if c.untagged else ""
    by = f"; by `{cfg.by}`: one value against another on the same gpu and point{untagged}" if cfg.by else ""
    source = f" from source `{cfg.baseline_source}`" if cfg.baseline_source else " (same source first)"
    experiments = ", ".join(f"`{e}`" for e in c.experiments)
    used, n_points = sum(m.n_runs for m in c.measurements), len(c.measurements)
    return [
        f"Baseline: `{c.baseline}`{source}{by}",
        f"Runs: experiments {experiments} at `{credentials.bare(cfg.tracking.uri)}`; {len(c.runs):,} "
        f"FINISHED, {len(c.records):,} with a throughput, {used:,} kept by the filters, as {n_points:,} "
        f"points (median of repeats of one measured configuration; n_runs says how many){smoke}",
        f"Filters: {filters or 'none'}",
        f"Written {datetime.datetime.now().isoformat(timespec='seconds')}",
        *([c.outside] if c.outside else []),
    ]


def _notes(c):
    """What the figures rest on: the notes always said, then one for each kind of row that needs one."""
    rows, measurements = c.rows, c.measurements
    sources = {(r.measurement.source, r.baseline.source) for r in rows if r.baseline}  # each ratio's
    named = {
        "nothing_common": c.nothing_common,
        "crossed": sorted(f"{mine} vs {theirs}" for mine, theirs in sources if mine != theirs),
        "tf32": sorted({m.source for m in measurements if m.precision == "fp32" and m.tf32_math}),
        "math_differs": sorted({_label(r) for r in rows if r.math_differs}),
        "stack_differs": sorted({f"{_label(r)}: {r.stack_differs}" for r in rows if r.stack_differs}),
        "superseded": [r.run_id for m in measurements for r in m.superseded],
        "variants": sorted({m.workload for m in measurements if m.variant}),
        "published": [m.source for m in measurements if m.source != runs.MEASURED],
    }
    fill = {
        "baseline": c.baseline,
        "stack": "stack (other than the key compared)" if c.by else "software stack",
        "split": "" if c.by else " The hardware and software parts are split below where the runs exist.",
        "superseded": len(named["superseded"]),
    }
    # published figures that are the mean of their logged runs: said as the projection check says it
    logged = Counter(
        m.source for m in measurements if any(recorded.PUBLISHED_CELL in r.result.tags for r in m.runs)
    )
    named_notes = [
        NAMED_NOTES[kind].format((", " if kind in SHORT_NAMES else "; ").join(items), **fill)
        for kind, items in named.items()
        if items
    ]
    return ALWAYS_NOTED + named_notes + [imported.logged_means(s, n) for s, n in sorted(logged.items())]


def unlogged_specs(measurements):
    """A line for the runs that logged no spec-sheet figures (runs of version 1, imported GPUs without a
    profile), if any: compare judges a run by what it logged only."""
    judged = set(recorded.SPEC_PARAMS) - {"memory_gb"} | {"peak_key", "peak_tflops"}
    lacking = [
        r
        for m in measurements
        if m.source != PROJECTED
        for r in m.runs
        if judged & set(r.result.spec.unlogged)
    ]
    figures = ", ".join(sorted({name for r in lacking for name in r.result.spec.unlogged if name in judged}))
    gpus = ", ".join(sorted({r.gpu for r in lacking}))
    said = f"{len(lacking):,} run(s) of {gpus} never logged {figures}: the figures that need them"
    return [f"{said} (per-watt, per-kUSD, the spec range) are left out for those runs."] if lacking else []


def _log_report_run(cfg, c, text):
    experiment_id = store.ensure_experiment(
        cfg.tracking.uri, cfg.tracking.report_experiment, "tracking.report_experiment"
    )
    tags = {
        recorded.REPORT: "true",
        recorded.BASELINE: c.baseline,
        recorded.ANOMALIES: len(c.found),
        recorded.ANOMALY_KINDS: ",".join(sorted({a.kind for a in c.found})) or "none",
        "mlflow.note.content": text[:50000],  # the report as the run's description in the UI
    }
    run = job_run.JobRun(cfg.tracking, experiment_id, f"compare vs {c.baseline}", tags)
    try:
        run.log_params(job_run.flatten(OmegaConf.to_container(cfg, resolve=True)))
        for path in c.files:
            run.log_file(path)
    except BaseException:
        run.end("FAILED")
        raise
    run.end("FINISHED")
    return run.run_id
