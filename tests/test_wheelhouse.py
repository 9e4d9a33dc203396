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


def _item(name: str, version: str, *requires: str) -> dict:
    return {"metadata": {"name": name, "version": version, "requires_dist": list(requires)}}


# A resolution as pip reports it, with the spellings pip really uses (PyYAML, typing_extensions),
# and the chain that broke the GPU install: mlflow -> databricks-sdk -> certifi>=2026.10.19.
FAKE_REPORT = {
    "install": [
        _item("hydra-core", "1.3.2", "omegaconf<2.4,>=2.2", "antlr4-python3-runtime==4.9.*", "packaging"),
        _item("hydra-joblib-launcher", "1.2.0", "hydra-core>=1.1.0.dev7", "joblib>=0.14.0"),
        _item("hydra-submitit-launcher", "1.2.0", "hydra-core>=1.1.0.dev7", "submitit>=1.3.3"),
        _item("submitit", "1.5.4", "cloudpickle>=1.2.1", "typing_extensions>=3.7.4.2"),
        _item("omegaconf", "2.3.1", "antlr4-python3-runtime==4.9.*", "PyYAML>=5.1.0"),
        _item("antlr4-python3-runtime", "4.9.3"),
        _item(
            "mlflow",
            "3.17.2",
            "Flask<4",
            "numpy<3",
            "databricks-sdk<1,>=0.20",
            'pywin32; sys_platform == "win32"',
            'tomli>=1; python_version < "3.11"',
            'boto3>=1.28; extra == "aws"',
        ),
        _item("Flask", "3.1.3", "Werkzeug>=3.1"),
        _item("databricks-sdk", "0.70.0", "certifi>=2026.10.19", "requests<3,>=2.28.1"),
        _item("requests", "2.32.5", "certifi>=2017.4.17", "urllib3<3,>=1.21.1"),
        _item("certifi", "2026.10.19"),
        _item("torch", "2.14.1", "nvidia-cublas==13.1.1.3.*", "typing_extensions>=4.10.0"),
        _item("nvidia-cublas", "13.1.1.3"),
        *[
            _item(name, version)
            for name, version in [
                ("torchvision", "0.29.1"),
                ("transformers", "5.24.0"),
                ("nvidia-ml-py", "13.615.71"),
                ("rich", "15.0.0"),
                ("matplotlib", "3.11.2"),
                ("numpy", "2.4.6"),
                ("PyYAML", "6.0.4"),
                ("typing_extensions", "4.16.0"),
                ("joblib", "1.6.0"),
                ("cloudpickle", "3.1.3"),
                ("packaging", "26.4"),
                ("urllib3", "2.8.0"),
                ("Werkzeug", "3.1.9"),
            ]
        ],
    ]
}
# The image as `pip list --format=freeze` gives it (the newer of the two certifis in the test below).
IMAGE = {
    "torch": "2.11.0",
    "torchvision": "0.26.0",
    "transformers": "5.17.0",
    "nvidia-ml-py": "13.580.82",
    "rich": "14.2.0",
    "matplotlib": "3.10.7",
    "numpy": "2.5.2",
    "pyyaml": "6.0.3",
    "typing-extensions": "4.15.0",
    "joblib": "1.5.2",
    "cloudpickle": "3.1.1",
    "packaging": "25.0",
    "requests": "2.32.5",
    "urllib3": "2.5.0",
    "werkzeug": "3.1.3",
}
TARGET = wh.target_environment("3.12", "x86_64")


def _needed(image: dict) -> dict[str, str]:
    resolved = wh.resolved_packages(FAKE_REPORT)
    return dict(wh.needed(resolved, wh.project_requirements(), image, TARGET)[0])


def test_an_image_certifi_older_than_a_requirement_on_it_is_shipped():
    assert _needed(IMAGE | {"certifi": "2024.2.2"})["certifi"] == "2026.10.19"
    assert "certifi" not in _needed(IMAGE | {"certifi": "2026.11.3"})  # new enough: the image's


def test_a_package_the_image_satisfies_is_left_out_with_its_own_dependencies():
    kept = _needed(IMAGE | {"certifi": "2026.11.3"})
    assert sorted(kept) == [
        "antlr4-python3-runtime",
        "databricks-sdk",
        "flask",
        "hydra-core",
        "hydra-joblib-launcher",
        "hydra-submitit-launcher",
        "mlflow",
        "omegaconf",
        "submitit",
    ]  # torch 2.11 meets torch>=2.11: neither it nor its nvidia-cublas is asked for; markers
    # for Windows, Python < 3.11 and mlflow's unrequested extra bring nothing


def test_a_bare_name_meets_only_requirements_that_ask_for_no_version():
    image = {name: None for name in IMAGE} | {"certifi": None}
    kept = _needed(image)
    assert {"torch", "certifi", "numpy", "pyyaml"} <= set(kept)  # torch>=2.11, numpy<3: unknown
    assert "nvidia-cublas" in kept  # torch is shipped, so what it needs is too
    assert "packaging" not in kept  # hydra-core asks for any packaging


def test_exclude_leaves_a_package_out_whatever_its_version(tmp_path):
    kept = _needed(IMAGE | {"certifi": "2024.2.2", "databricks-sdk": wh.ANY_VERSION})
    assert "databricks-sdk" not in kept and "certifi" not in kept


def test_extras_asked_for_bring_their_dependencies():
    resolved = wh.resolved_packages(FAKE_REPORT) | {"boto3": ("1.40.0", [])}
    kept, _ = wh.needed(resolved, ["mlflow[aws]>=3"], IMAGE | {"certifi": "2026.11.3"}, TARGET)
    assert "boto3" in dict(kept)


def test_exclude_file_takes_names_and_pip_freeze_lines(tmp_path):
    listing = tmp_path / "image.txt"
    listing.write_text(
        "# the image\ntorch==2.11.0\n\nNVIDIA_ML_PY  # NVML\nmypkg @ file:///wheels/mypkg.whl\nrich\n"
        "certifi == 2024.2.2\n"
    )
    assert wh.read_exclude_file(listing) == {
        "torch": "2.11.0",
        "nvidia-ml-py": None,
        "mypkg": None,
        "rich": None,
        "certifi": "2024.2.2",
    }
    listing.write_text("torch\n==2.0\n")
    with pytest.raises(SystemExit, match=r"image.txt:2: '==2.0'"):
        wh.read_exclude_file(listing)


def test_the_gpu_image_list_satisfies_the_torch_stack_by_version():
    image = wh.read_exclude_file(wh.DEFAULT_EXCLUDE_FILE)
    for spec in wh.project_requirements():
        name = wh.requirement_name(spec)
        if name in {"torch", "torchvision", "transformers"}:
            assert image[name] and wh.satisfies(image[name], [wh.Requirement(spec)]), spec


def test_build_resolves_for_the_target_and_downloads_only_what_is_missing(tmp_path, monkeypatch):
    calls = []

    def fake_pip(*args):
        calls.append(args)
        dest = Path(args[args.index("--wheel-dir") + 1]) if "--wheel-dir" in args else None
        if args[0] == "wheel" and "antlr4-python3-runtime==4.9.3" in args:
            dest.mkdir(parents=True, exist_ok=True)
            (dest / "antlr4_python3_runtime-4.9.3-py3-none-any.whl").write_text("")
        elif args[0] == "wheel":
            (dest / "gpubench-0.1.0-py3-none-any.whl").write_text("")
        elif args[0] == "install":
            Path(args[args.index("--report") + 1]).write_text(json.dumps(FAKE_REPORT))

    monkeypatch.setattr(wh, "pip", fake_pip)
    image = tmp_path / "image.txt"
    image.write_text(
        "".join(f"{name}=={version}\n" for name, version in IMAGE.items()) + "certifi==2024.2.2\n"
    )
    wheels = wh.build(
        wh.parse_args(
            ["--dest", str(tmp_path / "whl"), "--exclude-file", str(image), "--exclude", "submitit"]
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
    assert set(wh.project_requirements()) <= set(resolve)  # the whole project is resolved
    download = next(c for c in calls if c[0] == "download")
    # antlr4 was built here from its sdist; submitit is excluded; the image's certifi is too old
    assert sorted(a for a in download if "==" in a) == [
        "certifi==2026.10.19",
        "databricks-sdk==0.70.0",
        "flask==3.1.3",
        "hydra-core==1.3.2",
        "hydra-joblib-launcher==1.2.0",
        "hydra-submitit-launcher==1.2.0",
        "mlflow==3.17.2",
        "omegaconf==2.3.1",
    ]
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
    # dev names the project's own server extra: its requirements stand in for it
    assert "psycopg[binary]>=3.1" in with_dev and not any(r.startswith("gpubench") for r in with_dev)
    with pytest.raises(SystemExit, match="--extras gpu: must be among dev"):
        wh.project_requirements(["gpu"])
