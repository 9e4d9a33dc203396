"""`python tests/frozen_now.py MODULE ARGS...`: run `python -m MODULE ARGS...` with Hydra's `now`
resolver frozen at one instant, as if every such command had started in the same second."""

from __future__ import annotations

import runpy
import sys
from datetime import datetime
from pathlib import Path

import hydra.core.utils

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's src, as `-m` would

FROZEN = datetime(2026, 1, 2, 3, 4, 5)


class FrozenDatetime(datetime):
    @classmethod
    def now(cls, tz=None):
        return FROZEN


hydra.core.utils.datetime = FrozenDatetime  # what the `now` resolver calls
module, sys.argv = sys.argv[1], [sys.argv[1], *sys.argv[2:]]
runpy.run_module(module, run_name="__main__", alter_sys=True)
