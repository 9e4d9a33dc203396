"""On a real GPU: gpu.memory_limit_gb holds a rank's allocator to the cap, and model.batch_size=auto
under a cap finds a batch that trains within it.

    python -m pytest -m gpu tests/test_memory_cap_gpu.py -q -s
"""

from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf

from src.hardware import devices, gpu_lock
from src.rank.memory_cap import GIB, apply_memory_cap
from src.rank.worker import train_rank
from src.run.prepare import prepare
from tests.conftest import compose_cfg

pytestmark = pytest.mark.gpu


@pytest.fixture
def device():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    device = torch.device("cuda", 0)
    yield device
    torch.cuda.empty_cache()  # the cap lasts as long as the process: the next test gets the whole card
    torch.cuda.set_per_process_memory_fraction(1.0, device)


def test_a_capped_allocator_refuses_what_would_pass_the_cap(device):
    apply_memory_cap(2, device)
    held = torch.empty(GIB, dtype=torch.uint8, device=device)  # within 2 GiB
    with pytest.raises(torch.OutOfMemoryError):
        torch.empty(2 * GIB, dtype=torch.uint8, device=device)  # 3 GiB in all
    del held


def test_the_peak_reported_under_auto_is_the_trainings_not_the_searchs(device):
    from src.rank.worker import TrainingStep

    overrides = ["gpu=auto", "gpu.memory_limit_gb=8", "model=txl_base", "precision=amp", "model.batch_size=auto"]
    cfg = OmegaConf.to_container(prepare(compose_cfg(overrides))[0], resolve=True)
    with gpu_lock.exclusive(devices.list_devices(), "tests/test_memory_cap_gpu.py"):
        step = TrainingStep(cfg, device, world=1)  # the search's trials reached the cap
        assert torch.cuda.max_memory_allocated(device) == torch.cuda.memory_allocated(device)
        del step


@pytest.mark.parametrize("cap_gb", [8, 16])
def test_auto_under_a_cap_trains_within_it(device, cap_gb):
    overrides = [
        "gpu=auto",
        f"gpu.memory_limit_gb={cap_gb}",
        "model=txl_base",
        "precision=amp",
        "model.batch_size=auto",
        "benchmark.min_steps=5",
        "benchmark.max_steps=5",
    ]
    cfg = OmegaConf.to_container(prepare(compose_cfg(overrides))[0], resolve=True)  # the GPU's profile
    with gpu_lock.exclusive(devices.list_devices(), "tests/test_memory_cap_gpu.py"):
        (report,) = train_rank(cfg | {"runtime": {"device": "cuda", "job_id": f"cap{cap_gb}"}})
    print(f"\ncap {cap_gb} GB: batch {report.batch_size}, peak {report.peak_memory_gb:.2f} GiB")
    assert report.batch_size >= 1 and report.peak_memory_gb <= cap_gb
