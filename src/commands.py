"""The console commands that `pip install` puts on PATH ([project.scripts] in pyproject.toml).

    gpubench train|compare|doctor|import|sync|server [args]   = python -m src.<module> [args]
    gpubench-train, gpubench-compare, gpubench-doctor [args]  the three a user types most

Each runs its module exactly as `python -m` does (as `__main__`, with the same arguments), so the
commands and the `python -m src.train` of the docs cannot drift apart.
"""

from __future__ import annotations

import functools
import runpy
import sys

from src import paths

COMMANDS = {
    "train": ("src.train", "run benchmark jobs (-m: a sweep)"),
    "compare": ("src.compare", "relative throughput against a baseline gpu: tables, charts, report"),
    "doctor": ("src.doctor", "check torch/torchvision, the GPUs, the tracking store, the default job"),
    "import": ("src.published", "import a published results table"),
    "sync": ("src.sync", "upload results kept on disk while the tracking server was away"),
    "server": ("src.server", "start a team's tracking server"),
}


def run_module(module: str) -> None:
    """`python -m <module>` with this process's arguments (sys.argv[1:]), from an install that has the
    project's configs beside its code (an editable install of a checkout; a wheel carries only the code)."""
    conf = paths.PROJECT_ROOT / "conf"
    if not conf.is_dir():
        print(
            f"error: gpubench: no conf/ at {conf}: this install holds gpubench's code without its configs "
            f"and tables, which stay in a checkout of the project; install the checkout with "
            f"`pip install -e CHECKOUT` (its commands then run from any folder), or run "
            f"`python -m {module}` inside it",
            file=sys.stderr,
        )
        sys.exit(2)
    runpy.run_module(module, run_name="__main__", alter_sys=True)


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = [f"  {name:<{width}}  {what}" for name, (_, what) in COMMANDS.items()]
    return "usage: gpubench COMMAND [args]   (gpubench COMMAND --help for its options)\n" + "\n".join(lines)


def gpubench() -> None:
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(usage())
        sys.exit(0 if len(sys.argv) >= 2 else 2)
    name = sys.argv[1]
    if name not in COMMANDS:
        print(f"error: gpubench {name!r}: no such command; one of {', '.join(COMMANDS)}", file=sys.stderr)
        sys.exit(2)
    del sys.argv[1]
    run_module(COMMANDS[name][0])


train = functools.partial(run_module, "src.train")
compare = functools.partial(run_module, "src.compare")
doctor = functools.partial(run_module, "src.doctor")
