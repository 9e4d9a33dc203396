"""Every model's workload at its smoke size: it trains, counts its items right, and its synthetic
data is valid for the model."""

from __future__ import annotations

import math

import pytest
import torch
from omegaconf import OmegaConf

from src.config.finalise import finalize
from src.models import build_workload
from src.models.detection import MAX_OBJECTS, padded_synthetic_targets, synthetic_targets
from tests.conftest import compose_cfg

MODELS = ["resnet50", "ssd300", "maskrcnn", "vit_b16", "gpt2", "llama", "bert_large", "txl_base", "txl_large"]
UNITS = {"vision": {"images/s"}, "language": {"tokens/s", "sequences/s"}}


pytestmark = pytest.mark.usefixtures("one_thread")


def smoke_model_cfg(name: str, *overrides: str) -> dict:
    cfg = finalize(compose_cfg([f"model={name}", "gpu=cpu", "benchmark=smoke", *overrides]))
    return OmegaConf.to_container(cfg.model, resolve=True)


@pytest.mark.parametrize("name", MODELS)
def test_model_trains_two_steps(name):
    cfg = smoke_model_cfg(name)
    torch.manual_seed(0)
    workload = build_workload(cfg, cfg["batch_size"], torch.device("cpu"))
    model = workload.model.train()
    optimizer = workload.make_optimizer()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    losses = []
    for _ in range(2):
        loss = workload.loss_fn(model, workload.batch)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())

    assert all(math.isfinite(v) for v in losses), losses
    changed = [n for n, p in model.named_parameters() if not torch.equal(p, before[n])]
    # Detectors leave a few zero-initialised biases alone when no box matched their anchors.
    assert len(changed) >= 0.9 * len(before), sorted(set(before) - set(changed))
    assert cfg["unit"] in UNITS[cfg["category"]]
    per_sample = cfg["seq_len"] if cfg["unit"] == "tokens/s" else 1
    assert workload.items_per_step == cfg["batch_size"] * per_sample
    assert workload.flops_per_item > 0


class MaskHeadReached(Exception):
    """Raised where the mask head would start: the regions it gets are known by then."""


def test_maskrcnn_mask_head_gets_its_whole_share_of_regions_from_the_first_step():
    """The mask head's work must not change while the window measures it: from the first step it
    trains on its whole quarter of the sampled regions (128 of 512 per photo), not on however many
    proposals the untrained detector has matched to an object so far (fewer at first, then more)."""
    sizes = ["model.image_size=96", "model.min_size=256", "model.max_size=400", "model.rois_per_image=512"]
    cfg = smoke_model_cfg("maskrcnn", *sizes, "model.objects_per_image=128", "model.batch_size=2")
    torch.manual_seed(0)
    workload = build_workload({**cfg, "flops_per_item": 1.0}, 2, torch.device("cpu"))  # not counted
    regions = []

    def count_and_stop(_, args):
        regions.append([len(boxes) for boxes in args[1]])
        raise MaskHeadReached

    workload.model.train().roi_heads.mask_roi_pool.register_forward_pre_hook(count_and_stop)
    with torch.no_grad(), pytest.raises(MaskHeadReached):
        workload.loss_fn(workload.model, workload.batch)
    assert regions == [[128, 128]]


@pytest.mark.parametrize("name", ["ssd300", "maskrcnn"])
def test_detection_batch_is_valid_for_the_model(name):
    cfg = smoke_model_cfg(name, "model.batch_size=3")
    torch.manual_seed(1)
    workload = build_workload({**cfg, "flops_per_item": 1.0}, 3, torch.device("cpu"))
    images, targets = workload.batch
    if name == "ssd300":
        targets = real_objects(targets)
    assert len(images) == len(targets) == 3
    for image, target in zip(images, targets, strict=True):
        height, width = image.shape[-2:]
        boxes, labels = target["boxes"], target["labels"]
        assert (boxes[:, :2] >= 0).all() and (boxes[:, 2] <= width).all() and (boxes[:, 3] <= height).all()
        assert (boxes[:, 2:] > boxes[:, :2]).all()
        assert ((labels >= 1) & (labels < cfg["num_classes"])).all()
        if name == "maskrcnn":
            assert target["masks"].shape == (len(boxes), height, width)
            assert_masks_fill_their_boxes(target["masks"], boxes)
    if name == "ssd300":
        assert images.shape[-2:] == (cfg["image_size"], cfg["image_size"])
    else:  # a 4:3 photo with the configured shorter side, which the model then resizes
        assert images[0].shape[-2:] == (cfg["image_size"], round(cfg["image_size"] * 4 / 3))


def real_objects(padded: dict) -> list[dict]:
    """Per image, the objects of SSD's padded targets, having checked the padding: MAX_OBJECTS
    slots, 1..MAX_OBJECTS real objects first, then label 0 and a zero box in every slot after."""
    boxes, labels = padded["boxes"], padded["labels"]
    assert labels.shape[1] == MAX_OBJECTS and boxes.shape == (*labels.shape, 4)
    objects = []
    for image_boxes, image_labels in zip(boxes, labels, strict=True):
        count = int((image_labels > 0).sum())
        assert count >= 1 and (image_labels[count:] == 0).all() and (image_boxes[count:] == 0).all()
        objects.append({"boxes": image_boxes[:count], "labels": image_labels[:count]})
    return objects


def assert_masks_fill_their_boxes(masks: torch.Tensor, boxes: torch.Tensor) -> None:
    for mask, box in zip(masks, boxes, strict=True):
        ys, xs = torch.nonzero(mask, as_tuple=True)
        tight = torch.stack([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1]).float()
        assert torch.equal(tight, box), (tight, box)
        assert int(mask.sum()) == int((box[2] - box[0]) * (box[3] - box[1]))


def test_synthetic_targets_stay_inside_small_and_oblong_images():
    torch.manual_seed(2)
    listed = synthetic_targets(20, height=7, width=40, num_classes=3, device="cpu", masks=True)
    padded = real_objects(padded_synthetic_targets(20, height=7, width=40, num_classes=3, device="cpu"))
    for target in listed + padded:
        boxes = target["boxes"]
        assert (boxes >= 0).all() and (boxes[:, 2] <= 40).all() and (boxes[:, 3] <= 7).all()
        assert (boxes[:, 2:] > boxes[:, :2]).all()
    for target in listed:
        assert_masks_fill_their_boxes(target["masks"], target["boxes"])
    # 1..MAX_OBJECTS objects per image, the whole range drawn over 40 images
    counts = {len(target["boxes"]) for target in listed + padded}
    assert min(counts) >= 1 and max(counts) <= MAX_OBJECTS and len(counts) > MAX_OBJECTS // 2


def test_channels_last_reaches_vision_models():
    cfg = {**smoke_model_cfg("ssd300"), "channels_last": True, "flops_per_item": 1.0}
    workload = build_workload(cfg, 2, torch.device("cpu"))
    images, _ = workload.batch
    conv = workload.model.backbone.trunk[0]
    assert images.is_contiguous(memory_format=torch.channels_last)
    assert conv.weight.is_contiguous(memory_format=torch.channels_last)


def test_vit_default_size_is_torchvision_vit_b_16():
    from torchvision.models import vit_b_16

    cfg = OmegaConf.to_container(compose_cfg(["model=vit_b16"]).model, resolve=True)
    workload = build_workload({**cfg, "flops_per_item": 1.0}, 1, torch.device("meta"))
    ours = sum(p.numel() for p in workload.model.parameters())
    with torch.device("meta"):
        reference = sum(p.numel() for p in vit_b_16(weights=None).parameters())
    assert ours == reference


def test_ssd300_has_the_reference_feature_maps_and_8732_default_boxes():
    """NVIDIA's SSD300 v1.1: maps of 38, 19, 10, 5, 3, 1 cells with 4, 6, 6, 6, 4, 4 boxes each."""
    cfg = OmegaConf.to_container(compose_cfg(["model=ssd300"]).model, resolve=True)
    model = build_workload({**cfg, "flops_per_item": 1.0}, 1, torch.device("meta")).model
    features = model.backbone(torch.empty(2, 3, 300, 300, device="meta")).values()
    sides = [f.shape[-1] for f in features]
    per_cell = model.anchor_generator.num_anchors_per_location()
    assert sides == [38, 19, 10, 5, 3, 1]
    assert [f.shape[1] for f in features] == [1024, 512, 512, 256, 256, 256]
    assert sum(s * s * n for s, n in zip(sides, per_cell, strict=True)) == 8732
    assert model.default_boxes.shape == (8732, 4)  # computed once for the fixed 300 px input


@pytest.mark.parametrize("name", ["gpt2", "llama", "bert_large"])
def test_unmasked_attention_matches_transformers_masked_attention(name):
    """The models run attention without a mask tensor (SDPA's own causality): the loss must be the
    one transformers' eager attention gives with its explicit mask (causal for the decoders)."""
    cfg = smoke_model_cfg(name)
    torch.manual_seed(0)
    workload = build_workload(cfg, cfg["batch_size"], torch.device("cpu"))
    model = workload.model.eval()  # no dropout: the two passes must see the same function
    hf_model = model.mlm if name == "bert_large" else model
    assert hf_model.config._attn_implementation == "sdpa_unmasked"
    with torch.no_grad():
        for p in model.parameters():  # weights large enough that attention is far from uniform
            p.normal_(0.0, 0.2)
        unmasked = workload.loss_fn(model, workload.batch)
        hf_model.set_attn_implementation("eager")
        masked = workload.loss_fn(model, workload.batch)
    torch.testing.assert_close(unmasked, masked, rtol=1e-5, atol=1e-5)
