"""An experiment's question answered: the figures the publication states (conf/study/<experiment>.yaml:
category means of the gpu's ratios to the baseline) beside what the published runs it was written from
give and beside your own gpus' figures, with the per-model ratios beneath. A stated figure the published
per-model data does not give (e.g. the A6000 vs 3090 article's 8-GPU vision means, 1.13x and 1.14x, where
Lambda's 2021 tables give 1.17x and 1.18x) is shown as the data gives it, and said."""

from __future__ import annotations

from dataclasses import dataclass

from src import console
from src.compare.analysis import RelativeRow, SummaryRow, precision_group
from src.compare.report import interval_text, markdown_grid, print_table
from src.compare.runs import MEASURED, RunRecord

AGREES = 0.01  # a stated figure of two decimals agrees with a value less than one hundredth from it


@dataclass(frozen=True)
class StudyFigure:
    category: str
    precision: str
    gpu_count: int
    stated: float  # the publication's figure
    published: SummaryRow | None  # the same mean from the published source's runs
    measured: dict[str, SummaryRow]  # your gpus' means against the baseline, by gpu

    agrees = property(  # None: no published figure to check it against
        lambda f: None if f.published is None else abs(f.published.relative_mean - f.stated) < AGREES
    )
    where = property(lambda f: f"{f.category}, {f.precision}, {console.gpus(f.gpu_count)}")

    def cells(self, gpus: list[str], none: str, differs: str) -> list[str]:
        """Its row: `none` where the published runs give no figure, `differs` marks one that differs."""
        p = self.published
        published = f"{p.relative_mean:.2f}x{'' if self.agrees else differs}" if p else none
        measured = [
            "-" if s is None else f"{s.relative_mean:.2f}x" + (f" n={s.n_models}" if s.left_out else "")
            for s in map(self.measured.get, gpus)
        ]
        interval = interval_text(p.mean.interval if p else None)  # `=`: it holds 1.0
        return [self.where, f"{self.stated:.2f}x", published, interval, *measured]


def subject(study) -> str:
    """The gpu a study sets against its baseline."""
    return next(g for g in study.gpus if g != study.baseline)


def in_scope(record: RunRecord, study) -> bool:
    """The study's runs: its models, of its published source for its gpus, or measured by you."""
    if record.model not in study.models:
        return False
    return record.source == MEASURED or (record.source == study.published and record.gpu in study.gpus)


def figures(summary: list[SummaryRow], study) -> list[StudyFigure]:
    """Each stated figure with the published and measured means of the same cell."""
    found = []
    for c in study.claims:
        where = (c.category, c.gpu_count, precision_group(c.precision))
        cell = [s for s in summary if (s.category, s.gpu_count, precision_group(s.precision)) == where]
        published = next((s for s in cell if s.side == subject(study) and s.source == study.published), None)
        mine = [s for s in cell if s.source == MEASURED and s.side != study.baseline]
        # the stated precision sorted last: a gpu's mean at it wins over one at its like (tf32 for fp32)
        measured = {s.side: s for s in sorted(mine, key=lambda s: s.precision == c.precision)}
        found.append(StudyFigure(c.category, c.precision, c.gpu_count, c.ratio, published, measured))
    return found


def per_model(rows: list[RelativeRow], study) -> dict[tuple[str, int], dict[str, RelativeRow]]:
    """(precision, GPU count) -> model -> the published pair's ratio, for the stated cells."""
    cells = sorted({(c.precision, c.gpu_count) for c in study.claims}, key=lambda c: (c[1], c[0] != "fp32"))
    table: dict[tuple[str, int], dict[str, RelativeRow]] = {cell: {} for cell in cells}
    for row in rows:
        m = row.measurement
        if m.side == subject(study) and m.source == study.published and row.relative is not None:
            table.get((m.precision, m.gpu_count), {})[m.workload] = row  # a cell not stated: dropped
    return table


def differences(found: list[StudyFigure], rows: list[RelativeRow], study) -> list[str]:
    """One sentence per stated figure the published per-model data does not give."""
    models, source = per_model(rows, study), study.published
    lines = []
    for f in found:
        if f.published is None:
            lines.append(
                f"{f.where}: no {source} figures of both gpus; the stated {f.stated:.2f}x is not checked"
            )
        elif not f.agrees:
            parts = ", ".join(
                f"{model} {row.relative:.2f}x"
                for model, row in models[f.precision, f.gpu_count].items()
                if row.measurement.category == f.category
            )
            lines.append(
                f"{f.where}: the publication states {f.stated:.2f}x; its {source} per-model figures give "
                f"{f.published.relative_mean:.2f}x ({parts}). Shown as the data gives it."
            )
    return lines


def _shown(found: list[StudyFigure], rows: list[RelativeRow], study) -> tuple:
    """Your gpus with a figure, the differences said, the published pair's ratios: a row per model."""
    models = per_model(rows, study)
    grid = [
        [name, *(f"{r.relative:.2f}x" if (r := models[cell].get(name)) else "-" for cell in models)]
        for name in dict.fromkeys(study.models)
    ]
    columns = [f"{precision} x{count}" for precision, count in models]
    return sorted({g for f in found for g in f.measured}), differences(found, rows, study), columns, grid


def markdown(found: list[StudyFigure], rows: list[RelativeRow], study) -> list[str]:
    """report.md's first section: the stated figures, the published and measured ones, per model."""
    gpus, said, columns, grid = _shown(found, rows, study)
    head = ("figure", "stated", study.published, "95% CI", *[f"{g} (measured)" for g in gpus])
    lines = markdown_grid(head, [f.cells(gpus, "no figures", " (differs)") for f in found])
    lines += ["", *[f"- {line}" for line in said]]
    lines += ["", f"Per model, {subject(study)} over {study.baseline} [{study.published}]:", ""]
    return lines + markdown_grid(("model", *columns), grid)


def print_study(found: list[StudyFigure], rows: list[RelativeRow], study) -> None:
    """The same answer in an 80-column terminal."""
    from rich.markup import escape

    gpus, said, columns, grid = _shown(found, rows, study)
    console.note(f"{study.title}: {subject(study)} over {study.baseline}, mean of the models' ratios")
    head = ("category, precision, GPUs", "stated", escape(study.published), "95% CI", *map(escape, gpus))
    notes = [f"* {escape(line)}" for line in said]
    if any(f.published and f.published.mean.interval for f in found):
        notes.append("95% CI: from the logged runs behind the published figures; = it holds 1.0")
    if gpus:
        notes.append(
            f"{', '.join(gpus)}: your runs against {study.baseline} (n: models averaged where fewer)"
        )
    print_table(head, {(): [f.cells(gpus, "-", "*") for f in found]}, notes)
    title = escape(f"per model, {subject(study)} over {study.baseline} [{study.published}]")
    print_table(("model", *columns), {(): grid}, title_justify="left", title=title)
