#!/usr/bin/env python3
"""Build a folder of wheels that installs this project on a GPU node without internet access.

    python scripts/build_wheelhouse.py                      # cp312, manylinux x86_64, into .whl/
    python scripts/build_wheelhouse.py --extras dev         # and pytest, for the GPU tests there
    python scripts/build_wheelhouse.py --dest /tmp/whl --python-version 3.11 \\
        --exclude-file my-image-packages.txt --exclude pandas scipy

Then copy the folder and a checkout of the project to the node and run, from the checkout:

    python3 -m pip install --no-index --find-links .whl gpubench

What goes in: the project's dependencies and their whole dependency closure, resolved by pip for
the target interpreter and platform (wheels only), minus every package the target image already
has (the exclude file, one name a line, and --exclude); plus a wheel built here from antlr4-python3-runtime's
sdist (omegaconf needs it and PyPI has no wheel of it) and the project's own wheel.
Needs Python >= 3.11 and a reachable package index on the machine that builds it.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import tomllib  # Python >= 3.11 builds the wheelhouse

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_EXCLUDE_FILE = Path(__file__).resolve().parent / "gpu-image-packages.txt"
# omegaconf 2.3 pins antlr4-python3-runtime 4.9.*, published as an sdist only.
ANTLR = ("antlr4-python3-runtime", "4.9.3")


def canonical(name: str) -> str:
    """PEP 503 name: `PyYAML`, `typing_extensions` and `typing-extensions` compare equal."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(spec: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", spec)
    if not match:
        raise ValueError(f"not a requirement: {spec!r}")
    return canonical(match.group(1))


def read_exclude_file(path: Path) -> set[str]:
    """Canonical names, one a line (`pip list --format=freeze` output too); `#` starts a comment."""
    excluded = set()
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if line:
            try:
                excluded.add(requirement_name(line))
            except ValueError:
                raise SystemExit(f"{path}:{number}: {raw!r}: expected a package name") from None
    return excluded


def project_requirements(
    extras: list[str] = (), pyproject: Path = PROJECT_ROOT / "pyproject.toml"
) -> list[str]:
    """The project's dependencies, plus those of the named optional extras (`dev`: pytest, for
    `python -m pytest -m gpu` on the node)."""
    with pyproject.open("rb") as f:
        project = tomllib.load(f)["project"]
    optional = project.get("optional-dependencies", {})
    unknown = [e for e in extras if e not in optional]
    if unknown:
        raise SystemExit(f"--extras {' '.join(unknown)}: must be among {', '.join(sorted(optional))}")
    return list(project["dependencies"]) + [spec for e in extras for spec in optional[e]]


def wanted(requirements: list[str], excluded: set[str]) -> list[str]:
    """The top-level requirements the image does not already satisfy."""
    return [spec for spec in requirements if requirement_name(spec) not in excluded]


def resolved_packages(report: dict) -> list[tuple[str, str]]:
    """(name, version) of everything a `pip install --report` resolution would install."""
    return [(item["metadata"]["name"], item["metadata"]["version"]) for item in report["install"]]


def prune(resolved: list[tuple[str, str]], excluded: set[str]) -> list[tuple[str, str]]:
    """Drop what the image already has."""
    return [(name, version) for name, version in resolved if canonical(name) not in excluded]


def wheel_identity(path: Path) -> tuple[str, str]:
    """(canonical name, version) from a wheel's file name."""
    name, version = path.name.split("-")[:2]
    return canonical(name), version


def target_args(python_version: str, arch: str, glibc: str) -> list[str]:
    """pip options that pick wheels for another interpreter and platform (manylinux up to `glibc`)."""
    major, minor = (int(x) for x in glibc.split("."))
    platforms = [f"manylinux_{major}_{m}_{arch}" for m in range(minor, 16, -1)] + [f"manylinux2014_{arch}"]
    args = ["--only-binary=:all:", "--python-version", python_version, "--implementation", "cp"]
    for platform in platforms:
        args += ["--platform", platform]
    return args


def pip(*args: str) -> None:
    command = [sys.executable, "-m", "pip", *args]
    print("+", " ".join(command), flush=True)
    subprocess.run(command, check=True)


def build(args: argparse.Namespace) -> list[Path]:
    dest = args.dest.resolve()
    dest.mkdir(parents=True, exist_ok=True)
    excluded = read_exclude_file(args.exclude_file) if args.exclude_file else set()
    excluded |= {canonical(name) for name in args.exclude}
    target = target_args(args.python_version, args.arch, args.glibc)

    pip("wheel", "--no-deps", "--wheel-dir", str(dest), str(PROJECT_ROOT))
    if canonical(ANTLR[0]) not in excluded:
        pip("wheel", "--no-deps", "--wheel-dir", str(dest), f"{ANTLR[0]}=={ANTLR[1]}")

    requirements = wanted(project_requirements(args.extras), excluded)
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        constraints = [x for c in args.constraint for x in ("-c", str(c))]
        # A dry run reads package metadata only: nothing is installed, nothing big downloaded.
        pip(
            "install", "--dry-run", "--ignore-installed", "--quiet", "--target", str(Path(tmp) / "t"),
            "--report", str(report), "--find-links", str(dest), *target, *constraints, *requirements,
        )  # fmt: skip
        kept = prune(resolved_packages(json.loads(report.read_text())), excluded)

    present = {wheel_identity(p) for p in dest.glob("*.whl")}
    missing = [f"{name}=={version}" for name, version in kept if (canonical(name), version) not in present]
    if missing:
        pip("download", "--no-deps", "--dest", str(dest), *target, *missing)
    return sorted(dest.glob("*.whl"))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--dest", type=Path, default=PROJECT_ROOT / ".whl", help="wheel folder (default: .whl)"
    )
    parser.add_argument("--python-version", default="3.12", help="target interpreter (default: 3.12)")
    parser.add_argument("--arch", default="x86_64", help="target CPU architecture (default: x86_64)")
    parser.add_argument(
        "--glibc", default="2.28", help="newest manylinux glibc the target runs (default: 2.28)"
    )
    parser.add_argument(
        "--exclude-file",
        type=Path,
        default=DEFAULT_EXCLUDE_FILE,
        help="packages the target image already has (default: the GPU image's list beside this script)",
    )
    parser.add_argument("--exclude", nargs="*", default=[], metavar="NAME", help="more packages to leave out")
    parser.add_argument(
        "--extras",
        nargs="*",
        default=[],
        metavar="EXTRA",
        help="optional dependency sets too, e.g. dev (pytest)",
    )
    parser.add_argument(
        "-c", "--constraint", action="append", default=[], type=Path, help="pip constraints file (e.g. pins)"
    )
    args = parser.parse_args(argv)
    if not re.fullmatch(r"3\.\d+", args.python_version):
        parser.error(f"--python-version={args.python_version!r}: must look like 3.12")
    if not re.fullmatch(r"2\.\d+", args.glibc) or int(args.glibc.split(".")[1]) < 17:
        parser.error(f"--glibc={args.glibc!r}: must be 2.17 or newer, like 2.28")
    if args.exclude_file and not args.exclude_file.is_file():
        parser.error(f"--exclude-file={args.exclude_file}: no such file")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    wheels = build(args)
    total = sum(p.stat().st_size for p in wheels)
    for path in wheels:
        print(f"{path.stat().st_size / 1e6:8.2f} MB  {path.name}")
    print(f"{len(wheels)} wheels, {total / 1e6:.1f} MB in {args.dest}")
    print(
        f"Copy {args.dest.name}/ and a checkout of the project to the node; there, from the checkout:\n"
        f"  python3 -m pip install --no-index --find-links {args.dest.name} gpubench"
    )


if __name__ == "__main__":
    main()
