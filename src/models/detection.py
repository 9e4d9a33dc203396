"""Detection and segmentation workloads on torchvision's detection models, random weights,
synthetic COCO-shaped images and targets (boxes, labels, instance masks)."""

from __future__ import annotations

from collections import OrderedDict

import torch
import torchvision  # here, not in the builders: the agent preloads it for its ranks
from torch import nn

from src.models.base import Workload, counted_flops_per_item

# COCO has about 7.3 annotated objects per image; SSD300 gets 1..MAX_OBJECTS (mean 8) per image
# (Mask R-CNN gets model.objects_per_image: see maskrcnn below).
MAX_OBJECTS = 15


def random_boxes(count: int, height: int, width: int) -> torch.Tensor:
    """(count, 4) boxes (x1, y1, x2, y2) inside the image, with whole-pixel corners and sides of
    5-60% of the image, drawn on the host (the batch is built once, before any timing)."""
    wh = torch.rand(count, 2) * 0.55 + 0.05
    size = torch.tensor([width, height])
    sides = (wh * size).round().clamp(min=1)
    corner = (torch.rand(count, 2) * (size - sides + 1)).floor().clamp(max=size - sides)
    return torch.cat([corner, corner + sides], dim=1)


def object_counts(n: int) -> list[int]:
    """How many objects each of n images holds: 1..MAX_OBJECTS."""
    return torch.randint(1, MAX_OBJECTS + 1, (n,)).tolist()


def synthetic_targets(
    n: int, height: int, width: int, num_classes: int, device, masks: bool = False, objects: int | None = None
):
    """Per image, a dict of `objects` (default 1..MAX_OBJECTS) `random_boxes`, labels in
    1..num_classes-1 (0 is background), and optionally instance masks that fill exactly their box."""
    targets = []
    for count in object_counts(n) if objects is None else [objects] * n:
        boxes = random_boxes(count, height, width)
        target = {"boxes": boxes.to(device), "labels": torch.randint(1, num_classes, (count,), device=device)}
        if masks:
            target["masks"] = box_masks(boxes, height, width).to(device)
        targets.append(target)
    return targets


def padded_synthetic_targets(n: int, height: int, width: int, num_classes: int, device) -> dict:
    """The batch's targets as two tensors, as the batched SSD takes them: boxes (n, MAX_OBJECTS, 4)
    and labels (n, MAX_OBJECTS), each image's 1..MAX_OBJECTS `random_boxes` first, then padding
    slots of label 0 (background) and an all-zero box."""
    boxes = torch.zeros(n, MAX_OBJECTS, 4)
    labels = torch.zeros(n, MAX_OBJECTS, dtype=torch.int64)
    for i, count in enumerate(object_counts(n)):
        boxes[i, :count] = random_boxes(count, height, width)
        labels[i, :count] = torch.randint(1, num_classes, (count,))
    return {"boxes": boxes.to(device), "labels": labels.to(device)}


def box_masks(boxes: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """(n, height, width) uint8 masks, each one inside its whole-pixel box and zero outside."""
    ys = torch.arange(height).view(1, -1, 1)
    xs = torch.arange(width).view(1, 1, -1)
    x1, y1, x2, y2 = (boxes[:, i].view(-1, 1, 1) for i in range(4))
    return ((xs >= x1) & (xs < x2) & (ys >= y1) & (ys < y2)).to(torch.uint8)


def _summed_losses(model: nn.Module, batch) -> torch.Tensor:
    images, targets = batch
    return sum(model(images, targets).values())


def _detection_workload(
    model, cfg, batch_size, device, make_batch, lr: float | None = None, clip_grad_norm: float | None = None
) -> Workload:
    if cfg.get("channels_last"):
        model = model.to(memory_format=torch.channels_last)
    flops = cfg.get("flops_per_item") or counted_flops_per_item(cfg, model, _summed_losses, make_batch(2), 2)
    return Workload(
        model=model,
        batch=make_batch(batch_size),
        loss_fn=_summed_losses,
        items_per_step=batch_size * cfg["items_per_sample"],
        optimizer="sgd",
        flops_per_item=flops,
        lr=lr,
        clip_grad_norm=clip_grad_norm,
    )


# --- SSD300 with a ResNet backbone (NVIDIA DeepLearningExamples, SSD300 v1.1) ---------------


class ResNetSSDBackbone(nn.Module):
    """A torchvision ResNet up to conv4_x, its first block at stride 1 (a 38x38 map at 300 px),
    then five extra blocks (1x1 conv to a narrower width, 3x3 conv) giving 19, 10, 5, 3 and 1.
    NVIDIA's SSD300 v1.1 uses ResNet-50 and offers the other depths with these widths."""

    mid_channels = [256, 256, 128, 128, 128]

    def __init__(self, name: str):
        super().__init__()

        resnet = getattr(torchvision.models, name)(weights=None)
        self.trunk = nn.Sequential(*list(resnet.children())[:7])  # conv1 ... layer3 (conv4_x)
        conv4_first = resnet.layer3[0]
        conv4_first.conv1.stride = conv4_first.conv2.stride = conv4_first.downsample[0].stride = (1, 1)
        trunk_channels = conv4_first.downsample[0].out_channels
        last = 256 if trunk_channels == 1024 else 128
        self.out_channels = [trunk_channels, 512, 512, 256, 256, last]
        self.extra = nn.ModuleList()
        channels = self.out_channels
        for i, (c_in, mid, c_out) in enumerate(
            zip(channels[:-1], self.mid_channels, channels[1:], strict=True)
        ):
            stride, padding = (2, 1) if i < 3 else (1, 0)  # the last two shrink 5->3->1 unpadded
            self.extra.append(
                nn.Sequential(
                    nn.Conv2d(c_in, mid, 1, bias=False),
                    nn.BatchNorm2d(mid),
                    nn.ReLU(inplace=True),
                    nn.Conv2d(mid, c_out, 3, stride=stride, padding=padding, bias=False),
                    nn.BatchNorm2d(c_out),
                    nn.ReLU(inplace=True),
                )
            )

    def forward(self, x: torch.Tensor) -> OrderedDict:
        features = [self.trunk(x)]
        for block in self.extra:
            features.append(block(features[-1]))
        return OrderedDict((str(i), f) for i, f in enumerate(features))


class PreparedImages(nn.Module):
    """Stands in for torchvision's per-image resize-and-normalise: the synthetic batch is already
    300x300 and normalised, as a data pipeline (NVIDIA's DALI) hands it to the model."""

    def forward(self, images: torch.Tensor, targets=None):
        from torchvision.models.detection.image_list import ImageList

        return ImageList(images, [tuple(images.shape[-2:])] * images.size(0)), targets

    def postprocess(self, detections, image_sizes, original_image_sizes):
        return detections  # nothing was resized: boxes are already in the input's pixels


def ssd300(cfg: dict, batch_size: int, device) -> Workload:
    """SSD300 trained through `BatchedSSD`: the whole batch matched and scored at once, no
    per-image host round trips (torchvision's own path made an H200 wait on every image)."""
    from torchvision.models.detection.anchor_utils import DefaultBoxGenerator

    from src.models.batched_ssd import BatchedSSD

    size = cfg["image_size"]
    with torch.device(device):
        # Default boxes as in SSD300: 4, 6, 6, 6, 4, 4 per cell (8732 in all at 300 px), scales
        # 0.07 ... 1.05 of the image, cell steps 8 ... 300 px.
        anchors = DefaultBoxGenerator(
            [[2], [2, 3], [2, 3], [2, 3], [2], [2]],
            scales=[0.07, 0.15, 0.33, 0.51, 0.69, 0.87, 1.05],
            steps=[8, 16, 32, 64, 100, 300],
        )
        model = BatchedSSD(ResNetSSDBackbone(cfg["backbone"]), anchors, (size, size), cfg["num_classes"])
    model.transform = PreparedImages()

    def make_batch(n: int):
        images = torch.randn(n, 3, size, size, device=device)
        if cfg.get("channels_last"):
            images = images.contiguous(memory_format=torch.channels_last)
        return images, padded_synthetic_targets(n, size, size, cfg["num_classes"], device)

    # NVIDIA's SSD300 v1.1 recipe: SGD at 2.6e-3 (0.01 drives the loss to inf under fp16 autocast).
    return _detection_workload(model, cfg, batch_size, device, make_batch, lr=2.6e-3)


# --- Mask R-CNN ResNet-50 FPN --------------------------------------------------------------

MASKRCNN_MAX_GRAD_NORM = 10.0


def maskrcnn(cfg: dict, batch_size: int, device) -> Workload:
    """torchvision's Mask R-CNN, fed COCO-like 4:3 photos (image_size is the shorter side) that
    its own transform resizes as in COCO training: shorter side to min_size, longer <= max_size.

    Each photo holds objects_per_image objects, at least as many as the regions its mask head
    trains on (positive_fraction of rois_per_image). Ground-truth boxes are always among the
    positive regions, so that share is full from the first step, as in a trained detector. With
    COCO's 7 objects it would be filled by proposals that match an object, which an untrained
    detector makes more of at every step: the mask head's work, and the step time, would grow
    all through the measured window.
    """
    from torchvision.models.detection import maskrcnn_resnet50_fpn

    with torch.device(device):
        model = maskrcnn_resnet50_fpn(
            weights=None,
            weights_backbone=None,
            num_classes=cfg["num_classes"],
            min_size=cfg["min_size"],
            max_size=cfg["max_size"],
            box_batch_size_per_image=cfg["rois_per_image"],
            box_positive_fraction=cfg["positive_fraction"],
        )
    height = cfg["image_size"]
    width = round(height * 4 / 3)

    def make_batch(n: int):
        images = [torch.rand(3, height, width, device=device) for _ in range(n)]
        targets = synthetic_targets(
            n, height, width, cfg["num_classes"], device, masks=True, objects=cfg["objects_per_image"]
        )
        return images, targets

    # From random weights, without warm-up, SGD at 0.01 drives the loss to NaN within about 15
    # steps even in fp32 (the first gradient's norm is near 900); TF32's rounding only moves the
    # step where it happens. Clipping the gradients' norm bounds every update at every precision.
    return _detection_workload(
        model, cfg, batch_size, device, make_batch, clip_grad_norm=MASKRCNN_MAX_GRAD_NORM
    )
