"""CI refuses unresolved merge-conflict markers anywhere in the tree (.ci/no_conflict_markers, run
by .ci/run before the linter): a page that kept both sides of a merge is caught, not published."""

from __future__ import annotations

import subprocess

from src.paths import PROJECT_ROOT

CHECK = PROJECT_ROOT / ".ci" / "no_conflict_markers"
OURS, THEIRS = "<" * 7 + " HEAD", ">" * 7 + " main"  # spelled apart: this file is checked too


def check(folder) -> subprocess.CompletedProcess:
    return subprocess.run([str(CHECK), str(folder)], capture_output=True, text=True, timeout=60)


def test_ci_runs_the_check_before_the_tests():
    steps = (PROJECT_ROOT / ".ci" / "run").read_text().splitlines()
    assert steps.index(".ci/no_conflict_markers") < steps.index("run_tests python -m pytest -q")


def test_the_tree_holds_no_conflict_markers():
    done = check(PROJECT_ROOT)
    assert done.returncode == 0, done.stdout


def test_a_file_with_an_unresolved_merge_is_refused_naming_its_lines(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    page = tmp_path / "docs" / "page.md"
    page.parent.mkdir()
    page.write_text(f"intro\n{OURS}\nour line\n=======\ntheir line\n{THEIRS}\nend\n")
    (tmp_path / "clean.md").write_text("a setext title\n=======\n")  # a line of = alone is no marker
    subprocess.run(["git", "-C", str(tmp_path), "add", "."], check=True)
    done = check(tmp_path)
    assert done.returncode == 1
    assert done.stdout.splitlines() == [f"docs/page.md:2:{OURS}", f"docs/page.md:6:{THEIRS}"]
    assert "unresolved merge-conflict markers" in done.stderr
