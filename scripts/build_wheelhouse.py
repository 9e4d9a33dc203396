#!/usr/bin/env python3
"""Build a folder of wheels that installs this project on a GPU node without internet access.

    python scripts/build_wheelhouse.py                      # cp312, manylinux x86_64, into .whl/
    python scripts/build_wheelhouse.py --extras dev         # and pytest, for the GPU tests there
    python scripts/build_wheelhouse.py --dest /tmp/whl --python-version 3.11 \\
        --exclude-file my-image-packages.txt --exclude pandas scipy

Then copy the folder and a checkout of the project to the node and run, from the checkout:

    python3 -m pip install --no-index --find-links .whl gpubench

What goes in: the project's dependencies and their dependency closure, resolved by pip for the
target interpreter and platform (wheels only), minus what the target image already satisfies;
plus a wheel built here from antlr4-python3-runtime's sdist (omegaconf needs it and PyPI has no
wheel of it) and the project's own wheel. A package of the image (the exclude file) is left out
only when its version there satisfies every requirement on it, walking down from the project's
requirements: `name==version` lines (`python3 -m pip list --format=freeze` taken on the image)
give the version; a bare name satisfies only requirements that ask for no version. --exclude
leaves a package out whatever its version. A package the image's copy satisfies brings its own
dependencies, so theirs are not asked for.
Needs Python >= 3.11, `packaging`, and a reachable package index on the machine that builds it.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import tomllib  # Python >= 3.11 builds the wheelhouse
from packaging.markers import default_environment
from packaging.requirements import Requirement

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


ANY_VERSION = "*"  # --exclude: left out whatever the requirements say


def read_exclude_file(path: Path) -> dict[str, str | None]:
    """Canonical name -> the image's version (None when the line names no version): one name a
    line, or `pip list --format=freeze` output (`name==version`); `#` starts a comment."""
    image = {}
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if line:
            try:
                name = requirement_name(line)
            except ValueError:
                raise SystemExit(f"{path}:{number}: {raw!r}: expected a package name") from None
            pinned = re.fullmatch(r"[^=<>!~@ ]+\s*===?\s*(\S+)", line)
            image[name] = pinned.group(1) if pinned else None
    return image


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

    def expand(extra: str) -> list[str]:  # `dev = [..., "gpubench[server]"]` names another extra
        specs = []
        for spec in optional[extra]:
            req = Requirement(spec)
            own = canonical(req.name) == canonical(project["name"])
            specs += [s for e in sorted(req.extras) for s in expand(e)] if own else [spec]
        return specs

    return list(project["dependencies"]) + [spec for e in extras for spec in expand(e)]


def target_environment(python_version: str, arch: str) -> dict[str, str]:
    """What requirement markers (`; python_version < "3.13"`) are evaluated against: the target."""
    env = default_environment()
    env.update(
        python_version=python_version,
        python_full_version=f"{python_version}.0",
        implementation_name="cpython",
        platform_python_implementation="CPython",
        sys_platform="linux",
        platform_system="Linux",
        os_name="posix",
        platform_machine=arch,
    )
    return env


def satisfies(image_version: str | None, requirements: list[Requirement]) -> bool:
    """Whether the image's copy meets every requirement on it (a bare name: only those with no version)."""
    if image_version == ANY_VERSION:
        return True
    if image_version is None:
        return all(not r.specifier for r in requirements)
    return all(r.specifier.contains(image_version, prereleases=True) for r in requirements)


def needed(
    resolved: dict[str, tuple[str, list[str]]], top_level: list[str], image: dict[str, str | None], env: dict
) -> tuple[list[tuple[str, str]], dict[str, list[Requirement]]]:
    """The resolved packages the wheelhouse must hold, and every requirement found on each package.

    `resolved`: canonical name -> (version, requires_dist) from pip's resolution of the project.
    Walks down from the project's requirements; a package whose image copy satisfies every
    requirement on it so far is not entered. A later requirement it fails (certifi>=2026.10.19
    from databricks-sdk against an older certifi) brings it in after all."""
    on: dict[str, list[Requirement]] = {}
    expanded: dict[str, set[str]] = {}  # kept package -> extras whose dependencies are queued
    queue = [Requirement(spec) for spec in top_level]
    while queue:
        req = queue.pop()
        name = canonical(req.name)
        if req.marker is not None and not req.marker.evaluate(env | {"extra": ""}):
            continue
        on.setdefault(name, []).append(req)
        if name not in expanded and name in image and satisfies(image[name], on[name]):
            continue  # the image's copy, with its own dependencies
        extras = {""} | {canonical(e) for e in req.extras}
        new = extras - expanded.setdefault(name, set())
        expanded[name] |= new
        if name not in resolved:
            raise SystemExit(f"{req}: needed, but pip's resolution for the target has no {name}")
        for spec in resolved[name][1] if new else []:
            dep = Requirement(spec)
            if dep.marker is None or any(dep.marker.evaluate(env | {"extra": e}) for e in new):
                dep.marker = None
                queue.append(dep)
    return [(name, resolved[name][0]) for name in expanded], on


def resolved_packages(report: dict) -> dict[str, tuple[str, list[str]]]:
    """Canonical name -> (version, requires_dist) of everything a `pip install --report` resolution
    would install."""
    return {
        canonical(item["metadata"]["name"]): (
            item["metadata"]["version"],
            item["metadata"].get("requires_dist", []),
        )
        for item in report["install"]
    }


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
    image = read_exclude_file(args.exclude_file) if args.exclude_file else {}
    image |= {canonical(name): ANY_VERSION for name in args.exclude}
    target = target_args(args.python_version, args.arch, args.glibc)

    pip("wheel", "--no-deps", "--wheel-dir", str(dest), str(PROJECT_ROOT))
    requirements = project_requirements(args.extras)
    with tempfile.TemporaryDirectory() as tmp:
        built = Path(tmp) / "built"  # antlr4's wheel, made here: the resolution needs it in sight
        pip("wheel", "--no-deps", "--wheel-dir", str(built), f"{ANTLR[0]}=={ANTLR[1]}")
        report = Path(tmp) / "report.json"
        constraints = [x for c in args.constraint for x in ("-c", str(c))]
        # A dry run reads package metadata only: nothing is installed, nothing big downloaded.
        pip(
            "install", "--dry-run", "--ignore-installed", "--quiet", "--target", str(Path(tmp) / "t"),
            "--report", str(report), "--find-links", str(built), *target, *constraints, *requirements,
        )  # fmt: skip
        resolved = resolved_packages(json.loads(report.read_text()))
        kept, on = needed(resolved, requirements, image, target_environment(args.python_version, args.arch))
        for wheel in built.glob("*.whl"):
            if wheel_identity(wheel)[0] in dict(kept):
                shutil.copy2(wheel, dest)
    for name, version in kept:
        if name in image:  # the image has it, at a version some requirement refuses
            refused = ", ".join(sorted({str(r) for r in on[name] if not satisfies(image[name], [r])}))
            has = (
                f"the image's {image[name]} does not"
                if image[name]
                else "the image's unlisted version may not"
            )
            print(f"ships {name} {version}: {has} meet {refused}")

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
