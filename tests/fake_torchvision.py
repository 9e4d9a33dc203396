"""A torchvision that shadows the real one from PYTHONPATH: how a mismatched install looks to Python.

`install(folder, version)` writes a `torchvision` package and its dist-info into `folder`. On import
it does what the real package does first, registering the meta kernel of its compiled `nms` op;
since it has no compiled library, torch itself raises `operator torchvision::nms does not exist`,
the error a torchvision built for another torch gives. Put `folder` first on PYTHONPATH of a subprocess.
"""

from __future__ import annotations

from pathlib import Path

INIT = """\
import torch

__version__ = "{version}"

# what torchvision/_meta_registrations.py does on import, with no compiled ops behind it
torch.library.register_fake("torchvision::nms")(lambda dets, scores, iou_threshold: dets.new_empty(0))
"""


def install(folder: Path, version: str) -> Path:
    package = folder / "torchvision"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(INIT.format(version=version))
    (package / "ops.py").write_text("import torch\n\nnms = torch.ops.torchvision.nms\n")
    info = folder / f"torchvision-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torchvision\nVersion: {version}\n")
    return folder
