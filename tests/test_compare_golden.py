"""compare's outputs on a small fixed store (tests/golden_store.py) held figure for figure: every CSV
it writes and each section of report.md, for a GPU comparison with a capacity split and a projection,
and for `by=torch`. A change of any figure, column or sentence fails here; a deliberate one is written into
tests/data/golden/ with `GOLDEN_UPDATE=1 python -m pytest tests/test_compare_golden.py` and reviewed
in the diff."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.conftest import store_copy
from tests.golden_store import EXPERIMENT, build

GOLDEN = Path(__file__).parent / "data" / "golden"
CASES = {
    "gpus": ("baseline=rtx3090", "capacity_split=[h200@48,h200@24]", "project=[a6000]"),
    "by_torch": ("by=torch",),
}


@pytest.fixture(scope="module")
def store(tmp_path_factory, empty_store) -> str:
    folder = tmp_path_factory.mktemp("golden")
    uri = store_copy(empty_store, folder / "mlruns")
    build(uri, folder)
    return uri


def run_names(uri: str) -> dict[str, str]:
    """Run id -> run name: ids are new in every store, names are the store's own."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    ids = [e.experiment_id for e in client.search_experiments()]
    return {r.info.run_id: r.info.run_name for r in client.search_runs(ids, max_results=1000)}


def normalised(text: str, uri: str, out: Path, names: dict[str, str]) -> str:
    """What differs between two runs of the same compare on the same runs: ids, paths, the time."""
    text = text.replace(uri, "<store>").replace(str(out), "<out>")
    text = re.sub(r"\b[0-9a-f]{32}\b", lambda m: f"<{names.get(m.group(), 'run')}>", text)
    return re.sub(r"Written \S+", "Written <time>", text)


def sections(report: str) -> dict[str, str]:
    """report.md by heading: `# title` and each `##` section with what follows it."""
    found, heading = {}, "(top)"
    for line in report.splitlines():
        if line.startswith("#") and not line.startswith("###"):
            heading = line
        found.setdefault(heading, []).append(line)
    return {h: "\n".join(lines) + "\n" for h, lines in found.items()}


def outputs(uri: str, out: Path, overrides: tuple[str, ...]) -> dict[str, str]:
    """Each file compare wrote that is text (its CSVs and report.md's sections), normalised."""
    from tests.test_compare import run

    run(uri, out, *overrides)
    names = run_names(uri)
    files = {p.name: normalised(p.read_text(), uri, out, names) for p in sorted(out.glob("*.csv"))}
    report = normalised((out / "report.md").read_text(), uri, out, names)
    for heading, text in sections(report).items():
        files[f"report.{re.sub(r'[^a-z0-9]+', '_', heading.lower()).strip('_')}.md"] = text
    return files


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.filterwarnings("error:constrained_layout not applied")  # a chart squeezed to nothing
def test_compare_outputs_match_the_golden_files(store, tmp_path, case):
    found = outputs(store, tmp_path / "out", CASES[case])
    folder = GOLDEN / case
    if os.environ.get("GOLDEN_UPDATE"):
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.iterdir():
            old.unlink()
        for name, text in found.items():
            (folder / name).write_text(text)
    held = {p.name: p.read_text() for p in sorted(folder.iterdir())}
    assert sorted(found) == sorted(held), "compare writes other files (or report.md other sections)"
    for name in held:
        assert found[name] == held[name], f"{case}/{name} changed"


def test_the_golden_store_holds_each_kind_of_run(store):
    """The cases above cover what they claim: measured, imported, ceilings, a torch pair, a capacity pair,
    points that project onto another card."""
    from tests.conftest import read_runs

    runs = read_runs(store, EXPERIMENT) + read_runs(store, "gpubench-published")
    tags = [r.data.tags for r in runs]
    assert {t.get("source") for t in tags} >= {None, "lambda"}
    assert any(t.get("model") == "ceilings" for t in tags)
    assert {t["torch_version"] for t in tags if t.get("gpu") == "rtx3090" and "torch_version" in t} == {
        "2.11.0",
        "2.12.0",
    }
    assert {
        t.get("memory_limit_gb") for t in tags if t.get("gpu") == "h200" and t.get("model") != "ceilings"
    } == {
        "24.0",
        "48.0",
    }
