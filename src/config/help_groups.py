"""The commands' --help: the help template of their primary config (conf/config.yaml for src.train,
conf/compare.yaml, conf/import_results.yaml), src.train's with the config groups a user picks on
the command line listed from one scan of conf/.

Hydra's own listing ($APP_CONFIG_GROUPS) shows every group it can see, internal ones too: the
schemas each model extends (model/family) and the sizes benchmark=smoke merges (sizes/smoke). And
Hydra's --help builds both its listings, whether the template shows them or not, from a config
repository it rebuilds for every option of every group: seconds on a small host. So each command
prints its text itself, before Hydra starts.
"""

from __future__ import annotations

import sys

from omegaconf import OmegaConf

from src.paths import PROJECT_ROOT

CONF_DIR = PROJECT_ROOT / "conf"
# hydra/: Hydra's own (--hydra-help); sizes/: chosen by benchmark=; study/: compare's, by experiment=
INTERNAL = {"hydra", "sizes", "study"}


def command_line_groups() -> str:
    """`group: option, option` per line, as Hydra's compact listing writes them."""
    folders = sorted(p for p in CONF_DIR.iterdir() if p.is_dir() and p.name not in INTERNAL)
    return "\n".join(f"{f.name}: {', '.join(sorted(y.stem for y in f.glob('*.yaml')))}" for f in folders)


def register_resolver() -> None:
    """`${command_line_groups:}` in the help template."""
    if not OmegaConf.has_resolver("command_line_groups"):
        OmegaConf.register_new_resolver("command_line_groups", command_line_groups)


def app_help(config_name: str = "config") -> str:
    """The whole --help text, as Hydra would print it from hydra.help.template."""
    register_resolver()
    return OmegaConf.load(CONF_DIR / f"{config_name}.yaml").hydra.help.template


def exit_with_help_if_asked(config_name: str, argv: list[str]) -> None:
    """`--help` or `-h` among the arguments: the command's help, and exit 0."""
    if any(a in ("--help", "-h") for a in argv):
        print(app_help(config_name))
        sys.exit(0)
