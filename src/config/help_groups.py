"""The config groups `python -m src.train --help` lists: those a user picks on the command line.

Hydra's own listing ($APP_CONFIG_GROUPS) shows every group it can see, internal ones too: the
schemas each model extends (model/family) and the sizes benchmark=smoke merges (sizes/smoke).
"""

from __future__ import annotations

from src.paths import PROJECT_ROOT

CONF_DIR = PROJECT_ROOT / "conf"
INTERNAL = {"hydra", "sizes"}  # hydra/: Hydra's own (--hydra-help); sizes/: chosen by benchmark=


def command_line_groups() -> str:
    """`group: option, option` per line, as Hydra's compact listing writes them."""
    folders = sorted(p for p in CONF_DIR.iterdir() if p.is_dir() and p.name not in INTERNAL)
    return "\n".join(f"{f.name}: {', '.join(sorted(y.stem for y in f.glob('*.yaml')))}" for f in folders)
