"""The torch fixes doctor and the job print name PyTorch's wheel index; where that index does not
answer from here (no internet, a proxy that is down), they say how to carry the wheels over from a
machine that reaches it instead of repeating a command that cannot work. The index that answers is
a real local HTTP server; the one that does not, behind a proxy port nothing listens on (conftest's
`index_away`)."""

from __future__ import annotations

import pytest

from src import doctor
from src.rank import stack_check

CUDA_TORCH = "2.14.1+cu130"


def test_a_fix_whose_index_answers_is_the_command_itself(http_port, monkeypatch):
    for name in ("http_proxy", "HTTP_PROXY"):
        monkeypatch.delenv(name, raising=False)
    index = f"http://127.0.0.1:{http_port}/whl/cpu"  # a plain HTTP server answers as an index would
    command = f"pip install --force-reinstall --no-deps 'torchvision==0.29.*' --index-url {index}"
    assert stack_check.where_reachable(command) == command


def test_a_fix_whose_index_does_not_answer_says_how_to_carry_the_wheels_over(index_away):
    fix = stack_check.where_reachable(stack_check.cpu_build_command(CUDA_TORCH))
    assert fix == (
        "PyTorch's index https://download.pytorch.org/whl/cpu cannot be reached from here (Connection "
        "refused): on a machine that reaches it, with this Python and platform, pip download --no-deps "
        "'torch==2.14.*' 'torchvision==0.29.*' --index-url https://download.pytorch.org/whl/cpu -d "
        "torch-wheels; copy torch-wheels/ here and run pip install --force-reinstall --no-deps "
        "torch-wheels/*.whl (or point "
        "--index-url at a mirror of it)"
    )


def test_doctor_s_cpu_build_note_where_the_index_does_not_answer_carries_the_wheels_over(index_away):
    found = stack_check.host_report(gpu_here=False)  # what doctor's subprocess prints on a host without a GPU
    if not found["cuda"]:
        pytest.skip("torch here is a CPU build: doctor has no CPU build to suggest")
    assert found["cpu_build"].startswith(
        "PyTorch's index https://download.pytorch.org/whl/cpu cannot be reached"
    )
    check = doctor.check_cuda_build(found, gpu_here=False)
    assert (
        "copy torch-wheels/ here and run pip install --force-reinstall --no-deps torch-wheels/*.whl"
        in check.text
    )
