"""The offline wheelhouse builder: exclusion, pruning and what it asks pip for (pip stubbed, no network)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from src.paths import PROJECT_ROOT

_spec = importlib.util.spec_from_file_location(
    "build_wheelhouse", PROJECT_ROOT / "scripts" / "build_wheelhouse.py"
)
wh = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(wh)

# A resolution as pip reports it, with the spellings pip really uses (PyYAML, typing_extensions).
FAKE_REPORT = {
    "install": [
        {"metadata": {"name": name, "version": version}}
        for name, version in [
            ("mlflow", "3.17.2"),
            ("Flask", "3.1.3"),
            ("PyYAML", "6.0.4"),
            ("typing_extensions", "4.16.0"),
            ("numpy", "2.4.6"),
            ("antlr4-python3-runtime", "4.9.3"),
            ("omegaconf", "2.3.1"),
        ]
    ]
}


def test_prune_drops_what_the_image_has_whatever_the_spelling():
    excluded = {"pyyaml", "typing-extensions", "numpy"}
    kept = wh.prune(wh.resolved_packages(FAKE_REPORT), excluded)
    assert [name for name, _ in kept] == ["mlflow", "Flask", "antlr4-python3-runtime", "omegaconf"]


def test_exclude_file_takes_names_and_pip_freeze_lines(tmp_path):
    listing = tmp_path / "image.txt"
    listing.write_text(
        "# the image\ntorch==2.11.0\n\nNVIDIA_ML_PY  # NVML\nmypkg @ file:///wheels/mypkg.whl\nrich\n"
    )
    assert wh.read_exclude_file(listing) == {"torch", "nvidia-ml-py", "mypkg", "rich"}
    listing.write_text("torch\n==2.0\n")
    with pytest.raises(SystemExit, match=r"image.txt:2: '==2.0'"):
        wh.read_exclude_file(listing)


def test_the_gpu_image_list_leaves_the_torch_stack_out():
    wanted = {
        wh.requirement_name(r)
        for r in wh.wanted(wh.project_requirements(), wh.read_exclude_file(wh.DEFAULT_EXCLUDE_FILE))
    }
    assert {"mlflow", "hydra-core", "omegaconf"} <= wanted
    assert not wanted & {
        "torch",
        "torchvision",
        "transformers",
        "nvidia-ml-py",
        "numpy",
        "matplotlib",
        "rich",
    }


def test_build_resolves_for_the_target_and_downloads_only_what_is_missing(tmp_path, monkeypatch):
    calls = []

    def fake_pip(*args):
        calls.append(args)
        dest = Path(args[args.index("--wheel-dir") + 1]) if "--wheel-dir" in args else None
        if args[0] == "wheel" and "antlr4-python3-runtime==4.9.3" in args:
            (dest / "antlr4_python3_runtime-4.9.3-py3-none-any.whl").write_text("")
        elif args[0] == "wheel":
            (dest / "gpubench-0.1.0-py3-none-any.whl").write_text("")
        elif args[0] == "install":
            Path(args[args.index("--report") + 1]).write_text(json.dumps(FAKE_REPORT))

    monkeypatch.setattr(wh, "pip", fake_pip)
    image = tmp_path / "image.txt"
    image.write_text("torch\ntorchvision\ntransformers\nnvidia-ml-py\nmatplotlib\nnumpy\npyyaml\n")
    wheels = wh.build(
        wh.parse_args(
            ["--dest", str(tmp_path / "whl"), "--exclude-file", str(image), "--exclude", "typing_extensions"]
        )
    )

    assert [w.name for w in wheels] == [
        "antlr4_python3_runtime-4.9.3-py3-none-any.whl",
        "gpubench-0.1.0-py3-none-any.whl",
    ]
    resolve = next(c for c in calls if c[0] == "install")
    assert "--dry-run" in resolve and "--only-binary=:all:" in resolve
    assert resolve[resolve.index("--python-version") + 1] == "3.12"
    assert "manylinux_2_28_x86_64" in resolve and "manylinux2014_x86_64" in resolve
    asked = {wh.requirement_name(r) for r in wh.project_requirements() if r in resolve}
    image_names = set(image.read_text().split()) | {"typing-extensions"}
    assert asked == {wh.requirement_name(r) for r in wh.project_requirements()} - image_names
    assert {"mlflow", "hydra-core"} <= asked
    download = next(c for c in calls if c[0] == "download")
    # numpy, PyYAML and typing_extensions are on the image; antlr4 was built here from its sdist
    assert [a for a in download if "==" in a] == ["mlflow==3.17.2", "Flask==3.1.3", "omegaconf==2.3.1"]
    assert "--no-deps" in download and "--only-binary=:all:" in download


@pytest.mark.parametrize(
    "bad, key", [(["--python-version", "312"], "--python-version"), (["--glibc", "2.5"], "--glibc")]
)
def test_bad_target_is_named(bad, key, capsys):
    with pytest.raises(SystemExit):
        wh.parse_args(bad)
    assert key in capsys.readouterr().err


def test_extras_add_their_requirements_and_an_unknown_one_is_named():
    base = wh.project_requirements()
    with_dev = wh.project_requirements(["dev"])
    assert with_dev[: len(base)] == base
    assert "pytest" in {wh.requirement_name(r) for r in with_dev[len(base) :]}
    with pytest.raises(SystemExit, match="--extras gpu: must be among dev"):
        wh.project_requirements(["gpu"])
