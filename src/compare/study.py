"""An experiment's question answered: the figures the publication states (conf/study/<experiment>.yaml:
category means of the gpu's ratios to the baseline) beside what the published runs it was written from
give and beside your own gpus' figures, with the per-model ratios beneath. A stated figure the published
per-model data gives otherwise, to its two decimals (the A6000 vs 3090 article's 8-GPU vision means,
1.13x and 1.14x, where Lambda's 2021 tables give 1.17x and 1.18x), is marked and said, and the data's
figure is shown."""

from __future__ import annotations

from dataclasses import dataclass

from omegaconf import ListConfig

from src.compare.analysis import SERIES, RelativeRow
from src.compare.ratio import Ratio
from src.compare.report import Section, Table
from src.compare.runs import MEASURED, precision_group
from src.console import gpus


@dataclass(frozen=True)
class StudyFigure:
    category: str
    precision: str
    gpu_count: int
    stated: float  # the publication's figure, to two decimals
    published: dict | None  # the same mean from the published source's runs
    measured: dict[str, dict]  # your gpus' means against the baseline, by gpu

    @property
    def differs(self):
        """The published runs give another figure than the one stated, to its two decimals."""
        return self.published is not None and round(self.published["relative_mean"].value, 2) != self.stated

    @property
    def where(self):
        return f"{self.category}, {self.precision}, {gpus(self.gpu_count)}"


def subject(study):
    """The gpu a study sets against its baseline."""
    return next(g for g in study.gpus if g != study.baseline)


def refused(cfg):
    """An option that changes the study's question (another baseline, fewer models, another axis or
    baseline source): one line naming each with its value, what the study asks and the compare that
    asks the other question; '' for none. Refused rather than answered: a study's stated figures are
    its pair's means over its models, which another question cannot check, and a plain compare of the
    same store answers that question."""
    study = cfg.study
    changed = {  # what a study sets that compare's options could change: whether they do
        "baseline": cfg.baseline not in (None, study.baseline),
        "models": bool(cfg.models) and set(cfg.models) != set(study.models),
        "by": cfg.by is not None,
        "baseline_source": cfg.baseline_source is not None,
    }
    given = " ".join(f"{key}={_option(cfg[key])}" for key, differs in changed.items() if differs)
    if not given:
        return ""
    return (
        f"{given}: experiment={study.name} asks its study's question, {subject(study)} over {study.baseline} "
        f"on {', '.join(study.models)} (conf/study/{study.name}.yaml), and takes none of "
        f"{', '.join(f'{key}=' for key in changed)} but its own; another question is a compare without "
        f"experiment=: python -m src.compare {given}"
    )


def _option(value):
    return f"[{','.join(map(str, value))}]" if isinstance(value, ListConfig) else value


def in_scope(record, study):
    """The study's runs: its models, of its published source for its gpus, or measured by you."""
    if record.model not in study.models:
        return False
    return record.source == MEASURED or (record.source == study.published and record.gpu in study.gpus)


def figures(summary, study):
    """Each stated figure with the published and measured means of the same cell."""
    found = []
    for c in study.claims:
        where = (c.category, c.gpu_count, precision_group(c.precision))
        cell = [s for s in summary if (s["category"], s["gpu_count"], s["precision_group"]) == where]
        published = next(
            (s for s in cell if (s["gpu"], s["source"]) == (subject(study), study.published)), None
        )
        mine = [s for s in cell if s["source"] == MEASURED and s["gpu"] != study.baseline]
        # the stated precision sorted last: a gpu's mean at it wins over one at its like (tf32 for fp32)
        measured = {s["gpu"]: s for s in sorted(mine, key=lambda s: s["precision"] == c.precision)}
        found.append(StudyFigure(c.category, c.precision, c.gpu_count, c.ratio, published, measured))
    return found


def marks(found):
    """The stated figures the published runs give otherwise, by the published mean they mark:
    (category, precision, GPU count, gpu, source) -> the stated figure."""
    return {tuple(f.published[k] for k in SERIES): f.stated for f in found if f.differs}


def per_model(rows, study):
    """`precision xcount` -> model -> the published pair's ratio, for the stated cells."""
    cells = sorted({(c.precision, c.gpu_count) for c in study.claims}, key=lambda c: (c[1], c[0] != "fp32"))
    table: dict[str, dict[str, RelativeRow]] = {f"{precision} x{count}": {} for precision, count in cells}
    for row in rows:
        m = row.measurement
        if m.side == subject(study) and m.source == study.published and row.ratio:
            table.get(f"{m.precision} x{m.gpu_count}", {})[m.workload] = row  # a cell not stated: dropped
    return table


def differences(found, rows, study):
    """One sentence per stated figure the published per-model data does not give."""
    models, source = per_model(rows, study), study.published
    lines = []
    for f in found:
        if f.published is None:
            lines.append(
                f"{f.where}: no {source} figures of both gpus; the stated {f.stated:.2f}x is not checked"
            )
        elif f.differs:
            parts = ", ".join(
                f"{model} {row.value:.2f}x"
                for model, row in models[f"{f.precision} x{f.gpu_count}"].items()
                if row.measurement.category == f.category
            )
            lines.append(
                f"{f.where}: the publication states {f.stated:.2f}x; its {source} per-model figures give "
                f"{f.published['relative_mean'].value:.2f}x ({parts}). Shown as the data gives it."
            )
    return lines


def section(found, rows, study):
    """The stated figures (`found`: figures()) beside the published and measured ones, what differs, the
    per-model ratios: first in report.md and on the console."""
    models = per_model(rows, study)
    mine = sorted({g for f in found for g in f.measured})
    stated = [
        {"figure": f.where, "stated": f.stated, study.published: f.published and f.published["relative_mean"]}
        | {"differs": f.differs, **{f"{gpu} (measured)": s["relative_mean"] for gpu, s in f.measured.items()}}
        for f in found
    ]
    columns = ("figure", "stated", study.published, "differs", *(f"{gpu} (measured)" for gpu in mine))
    per_cell = ("model", *models)
    # the per-model ratios without their intervals: four columns of them fit a terminal
    grid = [
        {"model": name} | {c: Ratio(r.value, None) for c, cell in models.items() if (r := cell.get(name))}
        for name in dict.fromkeys(study.models)
    ]
    said = [f"* {line}" for line in differences(found, rows, study)]
    if mine:
        said.append(f"{', '.join(mine)} (measured): your runs against {study.baseline}")
    question = f"{study.title}: {subject(study)} over {study.baseline}"
    return Section(
        question,
        tables=[
            Table(
                stated,
                columns,
                "",
                columns,
                columns,
                title=f"{question}, mean of the models' ratios",
                notes=said,
            ),
            Table(
                grid,
                per_cell,
                "",
                per_cell,
                per_cell,
                title=f"Per model, {subject(study)} over {study.baseline} [{study.published}]:",
            ),
        ],
    )
