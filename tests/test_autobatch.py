"""model.batch_size=auto: the search, out-of-memory handling, and where auto is refused."""

from __future__ import annotations

import pytest
import torch

from src.config.finalise import finalize
from src.errors import ConfigError
from src.models.base import Workload
from src.rank import autobatch
from src.rank.precision import PrecisionContext
from tests.conftest import compose_cfg


class Limit:
    """Fits while the batch is at most `largest`; records what was tried."""

    def __init__(self, largest: int):
        self.largest, self.tried = largest, []

    def __call__(self, batch: int) -> bool:
        self.tried.append(batch)
        return batch <= self.largest


@pytest.mark.parametrize(
    ("largest", "expected"),
    [(8, 8), (15, 8), (100, 96), (1000, 1000), (5, 5), (1, 1), (4096, 4096), (10**6, 4096)],
)
def test_largest_fitting_finds_the_largest_multiple_of_eight(largest, expected):
    fits = Limit(largest)
    assert autobatch.largest_fitting(fits) == expected
    assert len(fits.tried) <= 20  # doubling, then bisection: logarithmic in the batch
    assert all(b % 8 == 0 for b in fits.tried) or expected < 8


def test_largest_fitting_reports_when_nothing_fits():
    with pytest.raises(RuntimeError, match="even a batch of 1"):
        autobatch.largest_fitting(Limit(0))


def fake_builder(largest: int, calls: list):
    """A build_workload stand-in whose training step runs out of memory above `largest`."""

    def build(model_cfg, batch_size, device):
        calls.append(batch_size)
        model = torch.nn.Linear(4, 1)

        def loss_fn(model, batch):
            if batch_size > largest:
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
            return model(batch).sum()

        return Workload(model, torch.ones(batch_size, 4), loss_fn, batch_size, "sgd", 1.0)

    return build


def test_trains_turns_out_of_memory_into_a_no(monkeypatch):
    calls = []
    monkeypatch.setattr("src.models.build_workload", fake_builder(24, calls))
    precision = PrecisionContext(
        {"autocast_dtype": None, "grad_scaling": False, "allow_tf32": False}, torch.device("cpu")
    )
    device = torch.device("cpu")
    assert autobatch.trains(16, {}, precision, device)
    assert not autobatch.trains(32, {}, precision, device)
    found = autobatch.largest_fitting(lambda b: autobatch.trains(b, {}, precision, device))
    assert found == 24


def test_other_errors_are_not_mistaken_for_a_full_memory(monkeypatch):
    def broken(model_cfg, batch_size, device):
        raise RuntimeError("mat1 and mat2 shapes cannot be multiplied")

    monkeypatch.setattr("src.models.build_workload", broken)
    precision = PrecisionContext(
        {"autocast_dtype": None, "grad_scaling": False, "allow_tf32": False}, torch.device("cpu")
    )
    with pytest.raises(RuntimeError, match="shapes cannot be multiplied"):
        autobatch.trains(8, {}, precision, torch.device("cpu"))


def test_auto_is_accepted_for_a_gpu_and_refused_on_the_cpu():
    cfg = finalize(compose_cfg(["gpu=h200", "model=resnet50", "model.batch_size=auto"]))
    assert cfg.model.batch_size == "auto"
    with pytest.raises(ConfigError, match=r"model.batch_size='auto'.*CPU"):
        finalize(compose_cfg(["gpu=cpu", "model=resnet50", "model.batch_size=auto"]))
    with pytest.raises(ConfigError, match=r"model.batch_size='big'"):
        finalize(compose_cfg(["gpu=h200", "model=resnet50", "model.batch_size=big"]))


def _auto_cfg(*overrides: str) -> dict:
    """A CPU rank's config with batch auto, as a GPU job would hand it (the config refuses auto on a
    CPU, where there is no out-of-memory limit to search for)."""
    from tests.test_worker import rank_cfg

    cfg = rank_cfg("model.name=tiny", *overrides)
    cfg["model"]["batch_size"] = "auto"
    return cfg


def _oom_above(monkeypatch, fits_up_to: int, searched: int) -> list[int]:
    """Ranks whose search says `searched` and whose steps run out of memory above `fits_up_to`:
    the search's trials passed a batch the warm-up then cannot hold. Returns the batches built."""
    from src.rank import worker

    monkeypatch.setattr(autobatch, "find_batch_size", lambda *args, **kwargs: searched)
    built, real_call = [], worker.TrainingStep.__call__

    def step(self):
        if self.batch_size > fits_up_to:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 822.00 MiB.")
        return real_call(self)

    real_init = worker.TrainingStep.__init__

    def init(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        built.append(self.batch_size)

    monkeypatch.setattr(worker.TrainingStep, "__call__", step)
    monkeypatch.setattr(worker.TrainingStep, "__init__", init)
    return built


def test_an_auto_batch_that_runs_out_of_memory_in_warm_up_steps_down_and_says_so(monkeypatch, capsys):
    from src.rank.op_count import COUNTED_AT
    from src.rank.worker import train_rank

    built = _oom_above(monkeypatch, fits_up_to=8, searched=24)
    [report] = train_rank(_auto_cfg("benchmark.breakdown_steps=1"))
    # the batch measured is the one logged; the two after the window count the step's ops
    assert built == [24, 16, 8, *COUNTED_AT] and report.batch_size == 8
    err = capsys.readouterr().err
    assert "model.batch_size=auto: batch 24 ran out of memory in warm-up; running batch 16" in err


def test_a_fixed_batch_or_one_past_the_retreats_still_fails_with_its_one_line(monkeypatch):
    from src.rank.worker import OutOfMemory, train_rank
    from tests.test_worker import rank_cfg

    built = _oom_above(monkeypatch, fits_up_to=0, searched=64)
    with pytest.raises(OutOfMemory, match="out of memory at batch 4 per GPU"):
        train_rank(rank_cfg("model.name=tiny", "model.batch_size=4"))
    assert built == [4]  # a batch the user fixed is never changed
    built.clear()
    with pytest.raises(OutOfMemory, match="out of memory in warm-up at batch auto per GPU: tried 64, 56, 48, 40$"):
        train_rank(_auto_cfg())
    assert built == [64, 56, 48, 40]  # three retreats of 8, then the error
