"""The route one job's config takes: the modules of the calls that receive it, in order, each with
its layer (tests/test_layers.py's).

    python tests/config_route.py                       # gpu=auto benchmark=smoke: the CPU here
    python tests/config_route.py gpu=cpu model=gpt2    # any command line of python -m src.train

It runs the real command in this process (one CPU smoke job into a temporary store) under
sys.setprofile and keeps every call into src/ whose arguments carry the job's config: the config
or a node of it, the plain dict the ranks get, or an object holding one of those (the job's store,
its telemetry watch). Calls in other threads and in the rank processes are not followed. Two routes
are printed: from the job's entry (Hydra's task function in src/train.py) and from run_job.
`--json` prints them as data (tests/test_config_route.py reads it).
"""

from __future__ import annotations

import argparse
import json
import runpy
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]  # src/, and tests/ for the layers

from omegaconf import DictConfig, ListConfig  # noqa: E402

from tests.test_layers import layer  # noqa: E402

DEFAULT = ["gpu=auto", "benchmark=smoke", "model=resnet50"]
ENTRY = ("src.train", "main")  # Hydra's task function: the composed config's first stop
RUN_JOB = ("src.run.job", "run_job")
GROUPS = {"gpu", "model", "benchmark"}  # a config (or the ranks' copy of one) has these


def carries_config(value, depth: int = 0) -> bool:
    if isinstance(value, DictConfig | ListConfig):
        root = value._get_root()
        return isinstance(root, DictConfig) and GROUPS <= set(root.keys())
    if isinstance(value, dict):
        return GROUPS <= value.keys()
    if depth == 0 and hasattr(value, "__dict__") and not isinstance(value, type):
        return any(carries_config(v, 1) for v in vars(value).values())
    return False


def arguments(frame) -> list:
    code = frame.f_code
    count = code.co_argcount + code.co_kwonlyargcount
    count += bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)  # *args, **kwargs
    values = []
    for name in code.co_varnames[:count]:
        value = frame.f_locals.get(name)
        values += list(value) if isinstance(value, tuple) else [value]
        if isinstance(value, dict) and not GROUPS <= value.keys():
            values += list(value.values())  # **kwargs
    return values


class Recorder:
    """sys.setprofile hook: from ENTRY's call until it returns, the module of each call into src/
    that receives the config, each (module, function) beside it."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.entry = None

    def __call__(self, frame, event, arg) -> None:
        if event == "return" and frame is self.entry:
            self.entry = False  # done: later calls (Hydra's exit) are not the job's
            return
        if event != "call" or self.entry is False:
            return
        module = frame.f_globals.get("__name__", "")
        module = "src.train" if module == "__main__" else module
        if not module.startswith("src"):
            return
        call = (module, frame.f_code.co_name)
        if self.entry is None:
            if call != ENTRY:
                return
            self.entry = frame
        if any(carries_config(v) for v in arguments(frame)):
            self.calls.append(call)


def route(calls: list[tuple[str, str]]) -> list[str]:
    modules = [m for m, _ in calls]
    return [m for i, m in enumerate(modules) if i == 0 or modules[i - 1] != m]


def trace(overrides: list[str]) -> dict:
    """Run `python -m src.train OVERRIDES` here, into a temporary store; the two routes."""
    with tempfile.TemporaryDirectory() as store:
        argv = [
            *overrides,
            "benchmark.rerun=true",
            f"tracking.uri=sqlite:///{store}/mlflow.db",
            f"hydra.run.dir={store}/run",
        ]
        recorder = Recorder()
        sys.argv = ["src/train.py", *argv]
        sys.setprofile(recorder)
        try:
            runpy.run_module("src.train", run_name="__main__", alter_sys=True)
        except SystemExit as exc:
            if exc.code:
                raise RuntimeError(f"python -m src.train {' '.join(argv)} exited {exc.code}") from exc
        finally:
            sys.setprofile(None)
    whole = recorder.calls
    start = whole.index(next(c for c in whole if c == RUN_JOB)) if RUN_JOB in whole else len(whole)
    result = {}
    for name, calls in (("entry", whole), ("run_job", whole[start:])):
        result[name] = {"route": route(calls)}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("overrides", nargs="*", default=DEFAULT)
    parser.add_argument("--json", action="store_true", help="print the routes as JSON")
    args = parser.parse_args()
    result = trace(args.overrides)
    if args.json:
        print(json.dumps(result))
        return
    for name, found in result.items():
        print(f"from {name}:")
        for module in found["route"]:
            print(f"  {layer(module)[0]} {module}")


if __name__ == "__main__":
    main()
