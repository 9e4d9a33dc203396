"""How an entry point runs its Hydra app: a command line that does not compose (an unknown group
option, a key the schema lacks, a value of the wrong type) is one line on stderr and exit status 2,
as for any other bad input, instead of Hydra's report and exit status 1."""

from __future__ import annotations

import os
import re
from collections.abc import Callable

from hydra.errors import HydraException, MissingConfigException, OverrideParseException
from omegaconf.errors import OmegaConfBaseException

from src.errors import ConfigError, exit_with_error

FULL_ERROR = "HYDRA_FULL_ERROR"  # set, Hydra raises what went wrong instead of printing it and exiting 1
OURS = "GPUBENCH_COMPOSING"  # marks FULL_ERROR as set by run_app, not by the user


def run_app(main: Callable[[], object]) -> None:
    """Run a `@hydra.main` function whose task calls `composed()` first."""
    if os.environ.get(FULL_ERROR) and not os.environ.get(OURS):
        main()  # the user asked for Hydra's full traces
        return
    os.environ[FULL_ERROR] = os.environ[OURS] = "1"
    try:
        main()
    except (HydraException, OmegaConfBaseException) as exc:  # raised before any task ran
        cause = exc
        while cause is not None and not isinstance(cause, ConfigError):
            cause = cause.__cause__ or cause.__context__
        if cause is not None:  # a resolver's check (a folder named on the command line): its own line
            exit_with_error(cause)
        exit_with_error(ConfigError(composition_error(exc)))
    finally:
        composed()


def composed() -> None:
    """The config composed: from here on Hydra reports a failure its own way again."""
    if os.environ.pop(OURS, None):
        os.environ.pop(FULL_ERROR, None)


def composition_error(exc: BaseException) -> str:
    """Hydra's message in one line: its own lines joined, the search path and the `+` hint left out,
    the option lists inline, and the first line of the OmegaConf error under it (the key and why)."""
    if isinstance(exc, OverrideParseException):  # Hydra's message names neither the key nor the value
        reason = exc.message.split("See https")[0].strip().rstrip(";")
        key, _, value = exc.override.partition("=")
        if any(c in value for c in " ='\""):  # Hydra reads such a value quoted: the shell must pass the quotes
            quoted = value.replace('"', '\\"')
            how = f'a value holding spaces, = or quotes is quoted whole, as "{key}=\\"{quoted}\\""'
            return f"{exc.override}: not an override Hydra can read ({reason}); {how}"
        return f"{exc.override}: not an override Hydra can read ({reason}); lists are written key=[a,b]"
    text = str(exc).split("Config search path:")[0]
    # a group of conf/ this command's config does not take (compare's model=): Hydra's `+` would add it unread
    not_in_defaults = r"Could not override '[^']+'\. No match in the defaults list.*use \+(\S+)"
    if found := re.search(not_in_defaults, text, re.S):
        return f"{found[1]}: not a setting of this command; --help shows what it takes"
    parts: list[str] = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("To append to your config"):
            continue
        if line.startswith("\t") and parts:  # an option under "Available options in 'model':"
            parts[-1] += (" " if parts[-1].endswith(":") else ", ") + line.strip()
        else:
            parts.append(line.strip().rstrip("."))
    if isinstance(exc, MissingConfigException) and exc.options and len(parts) == 1:
        parts.append(f"options: {', '.join(exc.options)}")
    if exc.__cause__ is not None and str(exc.__cause__).strip():
        parts.append(str(exc.__cause__).strip().splitlines()[0])
    return "; ".join(parts) or type(exc).__name__


CPU_DRY_RUN = "experiment=cpu_dry_run"  # a single job's default on a host without a GPU


def names_the_hardware(argv: list[str]) -> bool:
    """Whether a command names its gpu or experiment, or sweeps (-m): if not, its single job on a
    host without a GPU is the CPU dry run (src.train runs it, src.doctor reports it)."""
    return any(a in ("-m", "--multirun") or a.startswith(("gpu=", "experiment=")) for a in argv)
