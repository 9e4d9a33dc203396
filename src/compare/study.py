"""An experiment's question answered: its stated figures beside what the published runs it was
written from give, and beside your own gpus' figures, with the per-model ratios beneath.

conf/study/<experiment>.yaml names the pair, the models, the published source and the figures
the publication states (category means of the gpu's ratios to the baseline). A stated figure the
published per-model data does not give (e.g. the A6000 vs 3090 article's 8-GPU vision means, 1.13x
and 1.14x, where Lambda's 2021 tables give 1.17x and 1.18x) is shown as the data gives it, and said.
"""

from __future__ import annotations

from dataclasses import dataclass

from src.compare.analysis import RelativeRow, SummaryRow, precision_group
from src.compare.report import console_table, interval_text, markdown_table
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

    @property
    def agrees(self) -> bool | None:
        return None if self.published is None else abs(self.published.relative_mean - self.stated) < AGREES

    @property
    def where(self) -> str:
        return f"{self.category}, {self.precision}, {self.gpu_count} GPU{'s' if self.gpu_count > 1 else ''}"


def in_scope(record: RunRecord, study) -> bool:
    """The study's runs: its models, of its published source for its gpus, or measured by you."""
    if record.model not in study.models:
        return False
    return record.source == MEASURED or (record.source == study.published and record.gpu in study.gpus)


def figures(summary: list[SummaryRow], study) -> list[StudyFigure]:
    """Each stated figure with the published and measured means of the same cell."""
    subject = next(g for g in study.gpus if g != study.baseline)
    found = []
    for claim in study.claims:
        cell = [
            s
            for s in summary
            if s.category == claim.category
            and s.gpu_count == claim.gpu_count
            and precision_group(s.precision) == precision_group(claim.precision)
        ]
        published = next((s for s in cell if s.side == subject and s.source == study.published), None)
        measured = {}
        for s in sorted(cell, key=lambda s: s.precision != claim.precision):  # the same precision first
            if s.source == MEASURED and s.side != study.baseline:
                measured.setdefault(s.side, s)
        found.append(StudyFigure(claim.category, claim.precision, claim.gpu_count, claim.ratio, published, measured))
    return found


def per_model(rows: list[RelativeRow], study) -> dict[tuple[str, int], dict[str, RelativeRow]]:
    """(precision, GPU count) -> model -> the published pair's ratio, for the stated cells."""
    subject = next(g for g in study.gpus if g != study.baseline)
    cells = {(c.precision, c.gpu_count) for c in study.claims}
    table: dict[tuple[str, int], dict[str, RelativeRow]] = {cell: {} for cell in sorted(cells, key=lambda c: (c[1], c[0] != "fp32"))}
    for row in rows:
        m = row.measurement
        if m.side == subject and m.source == study.published and row.relative is not None:
            if (m.precision, m.gpu_count) in table:
                table[(m.precision, m.gpu_count)][m.workload] = row
    return table


def differences(found: list[StudyFigure], rows: list[RelativeRow], study) -> list[str]:
    """One sentence per stated figure the published per-model data does not give."""
    models = per_model(rows, study)
    lines = []
    for f in found:
        if f.published is None:
            lines.append(f"{f.where}: no {study.published} figures of both gpus; the stated {f.stated:.2f}x is not checked")
        elif not f.agrees:
            parts = ", ".join(
                f"{model} {row.relative:.2f}x"
                for model, row in models.get((f.precision, f.gpu_count), {}).items()
                if row.measurement.category == f.category
            )
            lines.append(
                f"{f.where}: the publication states {f.stated:.2f}x; its {study.published} per-model "
                f"figures give {f.published.relative_mean:.2f}x ({parts}). Shown as the data gives it."
            )
    return lines


def markdown(found: list[StudyFigure], rows: list[RelativeRow], study) -> list[str]:
    """report.md's first section: the stated figures, the published and measured ones, per model."""
    subject = next(g for g in study.gpus if g != study.baseline)
    gpus = sorted({g for f in found for g in f.measured})
    head = ("figure", "stated", study.published, "95% CI", *[f"{g} (measured)" for g in gpus])
    cells = [
        [f.where, f"{f.stated:.2f}x", (f"{f.published.relative_mean:.2f}x" if f.published else "no figures")
         + ("" if f.agrees in (True, None) else " (differs)"), _interval(f.published),
         *[_mean(f.measured.get(g)) for g in gpus]]
        for f in found
    ]  # fmt: skip
    lines = markdown_table([dict(zip(head, row, strict=True)) for row in cells], head)
    lines += ["", *[f"- {line}" for line in differences(found, rows, study)]]
    models = per_model(rows, study)
    cols = ("model", *(f"{precision} x{count}" for precision, count in models))
    grid = [[name, *(_ratio(models[cell].get(name)) for cell in models)] for name in dict.fromkeys(study.models)]
    lines += ["", f"Per model, {subject} over {study.baseline} [{study.published}]:", ""]
    return lines + markdown_table([dict(zip(cols, row, strict=True)) for row in grid], cols)


def print_study(found: list[StudyFigure], rows: list[RelativeRow], study) -> None:
    """The answer in an 80-column terminal: the stated figures, what the published runs and your
    gpus give, then the published pair's ratio per model."""
    from rich.markup import escape

    from src.console import console, note

    subject = next(g for g in study.gpus if g != study.baseline)
    gpus = sorted({g for f in found for g in f.measured})
    note(f"{study.title}: {subject} over {study.baseline}, mean of the models' ratios")
    table = console_table("category, precision, GPUs", "stated", escape(study.published), "95% CI", *map(escape, gpus))
    for f in found:
        ours = f"{f.published.relative_mean:.2f}x" if f.published else "-"
        ours += "" if f.agrees in (True, None) else "*"
        table.add_row(f.where, f"{f.stated:.2f}x", ours, _interval(f.published), *[_mean(f.measured.get(g)) for g in gpus])
    console.print(table)
    for line in differences(found, rows, study):
        console.print(f"  * {escape(line)}")
    if any(f.published and f.published.mean.interval for f in found):
        console.print("  95% CI: from the logged runs behind the published figures; = it holds 1.0")
    if gpus:
        console.print(f"  {', '.join(gpus)}: your runs against {study.baseline} (n: models averaged where fewer)")
    models = per_model(rows, study)
    grid = console_table("model", *(f"{precision} x{count}" for precision, count in models), title_justify="left",
                         title=escape(f"per model, {subject} over {study.baseline} [{study.published}]"))  # fmt: skip
    for name in dict.fromkeys(study.models):
        grid.add_row(name, *[_ratio(models[cell].get(name)) for cell in models])
    console.print(grid)


def _ratio(row: RelativeRow | None) -> str:
    return f"{row.relative:.2f}x" if row else "-"


def _mean(s: SummaryRow | None) -> str:
    if s is None:
        return "-"
    return f"{s.relative_mean:.2f}x" + (f" n={s.n_models}" if s.left_out else "")


def _interval(s: SummaryRow | None) -> str:
    """The mean's 95% interval, `=` where it holds 1.0 (no measurable difference)."""
    return interval_text(s.mean.interval if s else None)
