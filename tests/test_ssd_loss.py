"""BatchedSSD's batched matching and loss against torchvision's per-image SSD training path, and its
freedom from host synchronisation (no value read back, no host tensor copied in).

    python -m pytest -m gpu tests/test_ssd_loss.py -q     # the CUDA sync check, on a GPU
"""

from __future__ import annotations

from collections import OrderedDict

import pytest
import torch
from omegaconf import OmegaConf
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves

from src.models import build_workload
from src.models.batched_ssd import BatchedSSD, match_default_boxes
from src.models.detection import PreparedImages, random_boxes
from tests.conftest import compose_cfg

SIZE = 64
NUM_CLASSES = 5
COUNTS = [0, 1, 3, 6, 4]  # objects per image in 6 slots: an empty image, a full one, padding between


pytestmark = pytest.mark.usefixtures("one_thread")


class TwoMaps(nn.Module):
    """A tiny backbone with SSD's contract: an OrderedDict of feature maps (16x16 and 8x8 at 64 px)."""

    out_channels = [8, 8]

    def __init__(self):
        super().__init__()
        self.first = nn.Conv2d(3, 8, 3, stride=4, padding=1)
        self.second = nn.Conv2d(8, 8, 3, stride=2, padding=1)

    def forward(self, x):
        first = torch.relu(self.first(x))
        return OrderedDict([("0", first), ("1", torch.relu(self.second(first)))])


def tiny_ssd() -> BatchedSSD:
    from torchvision.models.detection.anchor_utils import DefaultBoxGenerator

    generator = DefaultBoxGenerator([[2], [2, 3]], scales=[0.2, 0.5, 0.9])
    model = BatchedSSD(TwoMaps(), generator, (SIZE, SIZE), NUM_CLASSES)
    model.transform = PreparedImages()  # both paths see the same pixels
    return model


def padded_case(seed: int = 0) -> dict:
    """Padded targets for COUNTS. Padding slots hold real-looking boxes: label 0 alone must keep
    them out. The last image repeats a box under another label, so two gts tie for every default
    box and claim the same best one."""
    torch.manual_seed(seed)
    slots = max(COUNTS)
    boxes = random_boxes(len(COUNTS) * slots, SIZE, SIZE).view(len(COUNTS), slots, 4)
    labels = torch.zeros(len(COUNTS), slots, dtype=torch.int64)
    for i, count in enumerate(COUNTS):
        labels[i, :count] = torch.randint(1, NUM_CLASSES, (count,))
    boxes[-1, 3] = boxes[-1, 1]
    labels[-1, 3] = labels[-1, 1] % (NUM_CLASSES - 1) + 1
    return {"boxes": boxes, "labels": labels}


def per_image(targets: dict) -> list[dict]:
    """torchvision's form: one dict per image holding only its real objects."""
    return [
        {"boxes": b[lab > 0], "labels": lab[lab > 0]}
        for b, lab in zip(targets["boxes"], targets["labels"], strict=True)
    ]


def test_matching_agrees_with_torchvision_ssd_matcher():
    from torchvision.models.detection._utils import SSDMatcher
    from torchvision.ops import box_iou

    model, targets = tiny_ssd(), padded_case()
    anchors = model.default_boxes
    matched = match_default_boxes(targets["boxes"], targets["labels"] > 0, anchors, 0.5)
    forced = above = 0
    for image, target in enumerate(per_image(targets)):
        count = len(target["boxes"])
        if count == 0:
            expected = torch.full((len(anchors),), -1)
        else:
            iou = box_iou(target["boxes"], anchors)
            expected = SSDMatcher(0.5)(iou)
            best = iou.max(dim=0).values
            forced += int(((expected >= 0) & (best < 0.5)).sum())
            above += int((best >= 0.5).sum())
        assert torch.equal(matched[image], expected), image
        assert int(matched[image].max()) < count  # padding slots never match
    assert forced > 0 and above > 0  # the case exercises both rules, not only one


def test_loss_and_gradients_agree_with_torchvision_ssd():
    from torchvision.models.detection.ssd import SSD

    model, targets = tiny_ssd(), padded_case()
    images = torch.randn(len(COUNTS), 3, SIZE, SIZE)

    def losses_and_grads(forward, batch_targets):
        model.zero_grad(set_to_none=True)
        losses = forward(model, images, batch_targets)
        sum(losses.values()).backward()
        return {k: v.detach() for k, v in losses.items()}, {n: p.grad for n, p in model.named_parameters()}

    ours, our_grads = losses_and_grads(BatchedSSD.forward, targets)
    theirs, their_grads = losses_and_grads(SSD.forward, per_image(targets))
    # Same terms summed in another order: float32 rounding only.
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(our_grads, their_grads, rtol=1e-4, atol=1e-6)
    assert ours["bbox_regression"] > 0 and ours["classification"] > 0


def test_default_boxes_are_the_generators_for_the_model_size():
    model = tiny_ssd()
    features = list(model.backbone(torch.zeros(2, 3, SIZE, SIZE)).values())
    image_list, _ = model.transform(torch.zeros(2, 3, SIZE, SIZE))
    assert torch.equal(model.default_boxes, model.anchor_generator(image_list, features)[0])
    assert model.default_boxes.shape == (16 * 16 * 4 + 8 * 8 * 6, 4)


def test_training_rejects_unpadded_targets_and_other_image_sizes():
    model, targets = tiny_ssd(), padded_case()
    with pytest.raises(TypeError, match="padded targets"):
        model(torch.zeros(5, 3, SIZE, SIZE), per_image(targets))
    with pytest.raises(ValueError, match=r"images of \(32, 32\).*\(64, 64\)"):
        model(torch.zeros(5, 3, 32, 32), targets)


def test_eval_still_detects_through_torchvisions_path():
    model = tiny_ssd().eval()
    with torch.no_grad():
        detections = model(torch.randn(2, 3, SIZE, SIZE))
    assert len(detections) == 2
    boxes = detections[0]["boxes"]
    assert len(boxes) > 0 and (boxes >= 0).all() and (boxes <= SIZE).all()


class HostToDevice(TorchFunctionMode):
    """Records torch calls that put host data on the device (torch.tensor(list, device=...), a host
    tensor moved or copied over): on a GPU each is a copy the host blocks on."""

    FROM_DATA = (torch.tensor, torch.as_tensor, torch.asarray)

    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = tree_leaves((args, kwargs or {}))
        from_host = any(isinstance(t, torch.Tensor) and t.device.type == "cpu" for t in inputs) or (
            func in self.FROM_DATA and not isinstance(args[0], torch.Tensor)
        )
        if from_host and any(
            isinstance(t, torch.Tensor) and t.device.type != "cpu" for t in tree_leaves(out)
        ):
            self.seen.append(func.__name__)
        return out


@pytest.fixture(scope="module")
def ssd300_on_meta():
    """The real SSD300 at 300 px and a batch of 4 on the meta device, which has shapes but no
    values: reading a value there (item, nonzero, boolean-mask indexing) raises."""
    cfg = OmegaConf.to_container(compose_cfg(["model=ssd300"]).model, resolve=True)
    return build_workload({**cfg, "flops_per_item": 1.0}, 4, torch.device("meta"))


def test_ssd300_training_step_never_waits_on_the_device(ssd300_on_meta):
    """A forward and backward that reads no value and copies in no host data cannot make the host
    wait for a GPU."""
    images, targets = ssd300_on_meta.batch
    with HostToDevice() as copies:
        sum(ssd300_on_meta.model(images, targets).values()).backward()
    assert copies.seen == []


def test_the_wait_checks_catch_torchvisions_path(ssd300_on_meta):
    """The checks above can fail: torchvision's per-image path reads a value, and BoxCoder's
    encode_single copies its weights in from the host on every call."""
    from torchvision.models.detection.ssd import SSD

    model, (images, targets) = ssd300_on_meta.model, ssd300_on_meta.batch
    lists = [
        {"boxes": b[:1], "labels": lab[:1]}
        for b, lab in zip(targets["boxes"], targets["labels"], strict=True)
    ]
    with pytest.raises(RuntimeError, match="meta"):
        SSD.forward(model, images, lists)
    with HostToDevice() as copies:
        model.box_coder.encode_single(model.default_boxes, model.default_boxes)
    assert copies.seen == ["as_tensor"]


@pytest.mark.gpu
def test_ssd300_amp_step_runs_under_cuda_sync_error_mode():
    """On a GPU: forward and backward at amp raise if anything synchronises with the host."""
    cfg = OmegaConf.to_container(compose_cfg(["model=ssd300"]).model, resolve=True)
    workload = build_workload({**cfg, "flops_per_item": 1.0, "channels_last": True}, 8, torch.device("cuda"))

    def step():
        with torch.autocast("cuda", dtype=torch.float16):
            loss = workload.loss_fn(workload.model, workload.batch)
        loss.backward()

    step()  # first-call setup (cuDNN, cuBLAS handles) is not part of a training step
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        step()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
