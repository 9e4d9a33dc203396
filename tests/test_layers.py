"""The process boundary is the architecture: layers import downwards only, and no cycles.

That the job process never loads torch (it lives in src/rank/, started as processes, and inside the
model builders) is checked on a real sweep: tests/test_cli.py::test_the_job_process_never_imports_torch.
"""

from __future__ import annotations

import ast
from pathlib import Path

from src.paths import PROJECT_ROOT

SRC = PROJECT_ROOT / "src"
ENTRY_POINTS = {
    "src.train",
    "src.published.__main__",
    "src.sync",
    "src.server",
    "src.compare.__main__",
    "src.doctor",
    "src.commands",
}
# an entry point that runs another's task in its own process: compare imports an experiment's
# published tables as `python -m src.published` would, so that Ctrl-C and SIGTERM reach it
ENTRY_CALLS = {("src.compare.__main__", "src.published.__main__")}
# leaves every layer may import: these modules, and the packages in LEAF_PACKAGES whole
LEAVES = {"src.console", "src.errors", "src.paths", "src.tracking.credentials"}
LEAF_PACKAGES = {"results"}
# package -> layer; a module may import its own package, leaves and lower layers, nothing above
LAYERS = {
    "config": 1,
    "models": 1,
    "hardware": 2,
    "tracking": 2,
    "projection": 2,
    "published": 3,
    "rank": 4,
    "run": 4,
    "compare": 4,
}
ENTRY_LAYER = 5


def module_name(path: Path) -> str:
    parts = path.relative_to(PROJECT_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """Every src module a file imports, at module level or inside functions."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("src"):
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                found.add(
                    candidate
                    if (SRC.parent / (candidate.replace(".", "/") + ".py")).exists()
                    or (SRC.parent / candidate.replace(".", "/")).is_dir()
                    else node.module
                )
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("src")}
    return found


def layer(module: str) -> tuple[int, str]:
    if module in ENTRY_POINTS:
        return ENTRY_LAYER, "entry"
    package = module.split(".")[1] if "." in module else ""
    if module in LEAVES or module == "src" or package in LEAF_PACKAGES:
        return 0, "leaf"
    return LAYERS[package], package


def import_graph() -> dict[str, set[str]]:
    return {module_name(p): imports_of(p) for p in SRC.rglob("*.py")}


def test_layers_import_downwards_only():
    wrong = []
    for module, imported in import_graph().items():
        level, package = layer(module)
        for target in imported:
            target_level, target_package = layer(target)
            if target_package == package and package != "entry" or (module, target) in ENTRY_CALLS:
                continue
            if target_package == "rank" and package != "rank" or target_level >= level:
                wrong.append(f"{module} -> {target}")
    assert not wrong, "imports against the layering:\n" + "\n".join(sorted(wrong))


def test_src_root_holds_the_entry_points_and_the_shared_leaves_only():
    """A module of one concern goes into that concern's package, not beside the entry points."""
    root = {f"src.{p.stem}" for p in SRC.glob("*.py") if p.stem != "__init__"}
    assert root <= ENTRY_POINTS | LEAVES, (
        f"at src/'s root, neither entry point nor leaf: {sorted(root - ENTRY_POINTS - LEAVES)}"
    )


def test_import_graph_has_no_cycles():
    graph = import_graph()
    state: dict[str, int] = {}

    def visit(module: str, trail: list[str]) -> None:
        state[module] = 1
        for target in graph.get(module, ()):
            if state.get(target) == 1:
                raise AssertionError("import cycle: " + " -> ".join([*trail, module, target]))
            if target in graph and not state.get(target):
                visit(target, [*trail, module])
        state[module] = 2

    for module in graph:
        if not state.get(module):
            visit(module, [])
