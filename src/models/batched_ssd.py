"""torchvision's SSD with its training path batched: box matching and the loss run on the whole
batch at once, with no Python loop over images and no data-dependent host synchronisation.

torchvision matches and computes the loss image by image (`torch.where` -> nonzero, boolean-mask
indexing): each of those waits for the GPU to finish, so the host cannot queue work ahead and a
batch of 256 spends more time in round trips than in convolutions. Here every tensor keeps a
shape known before the data is read: targets are padded to (B, M) with label 0 on padding slots,
masks are multiplied in instead of used to index, and the per-image hard-negative count becomes a
rank comparison. Nothing in the training path calls `.item()`, `nonzero`, single-argument
`torch.where` or indexes with a boolean mask, and nothing copies a host tensor onto the device.
The same model, matching rule and loss as torchvision's `SSD.forward` in training mode.
"""

from __future__ import annotations

from itertools import chain

import torch
import torch.nn.functional as F
from torch import nn
from torchvision.models.detection.ssd import SSD


def default_boxes(backbone: nn.Module, generator: nn.Module, size: tuple[int, int]) -> torch.Tensor:
    """The generator's (A, 4) default boxes (x1, y1, x2, y2 in pixels) for a `size` (h, w) input.

    The feature map sides come from the backbone run on the meta device, which computes shapes
    only; the generator then needs nothing but those sides, which empty maps carry."""
    from torch.func import functional_call
    from torchvision.models.detection.image_list import ImageList

    state = chain(backbone.named_parameters(), backbone.named_buffers())
    on_meta = {name: torch.empty_like(t, device="meta") for name, t in state}
    # Two images: batch norm in training mode refuses a single value per channel (1x1 maps).
    features = functional_call(backbone, on_meta, (torch.empty(2, 3, *size, device="meta"),))
    # On the host whatever the default device (a builder may set one): the generator keeps its
    # box widths and heights there and would mix them with grids made on the default device.
    with torch.device("cpu"):
        sides = [torch.empty(0, 0, *f.shape[-2:]) for f in features.values()]
        boxes = generator(ImageList(torch.empty(0, 0, *size), [tuple(size)]), sides)[0]
    return boxes.to(next(backbone.parameters()).device)


def match_default_boxes(
    boxes: torch.Tensor, real: torch.Tensor, anchors: torch.Tensor, threshold: float
) -> torch.Tensor:
    """(B, A) index of the ground-truth box each default box is matched to, -1 for background.

    boxes (B, M, 4) and real (B, M) (False on padding slots); anchors (A, 4). torchvision's
    SSDMatcher, batched: a default box takes its best gt if their IoU >= threshold; then each real
    gt claims its own best default box whatever the IoU (SSD's forced match), the later gt winning
    where two share one, as torchvision's in-place index assignment leaves it. Padding never
    matches: its IoU is set below any real one."""
    from torchvision.ops import box_iou

    batch, slots = real.shape
    iou = box_iou(boxes.reshape(-1, 4), anchors).view(batch, slots, -1)
    iou = iou.masked_fill(~real[..., None], -1.0)
    best_iou, matched = iou.max(dim=1)
    matched = matched.masked_fill(best_iou < threshold, -1)
    claimant = torch.arange(slots, device=real.device).expand(batch, slots).masked_fill(~real, -1)
    claimed = torch.full_like(matched, -1).scatter_reduce_(1, iou.argmax(dim=2), claimant, reduce="amax")
    return torch.where(claimed >= 0, claimed, matched)


class BatchedSSD(SSD):
    """torchvision's SSD (same backbone contract, heads, default boxes and eval path) whose
    training forward takes `images` (B, C, H, W) at the model's fixed size and padded `targets`
    {"boxes": (B, M, 4), "labels": (B, M)}, label 0 marking padding, and returns torchvision's
    loss dict {"bbox_regression", "classification"}. The backbone returns an OrderedDict of maps."""

    def __init__(
        self, backbone: nn.Module, anchor_generator, size: tuple[int, int], num_classes: int, **kwargs
    ):
        super().__init__(backbone, anchor_generator, size, num_classes, **kwargs)
        self.size = tuple(size)
        # Computed once: the image size never changes within a run. Buffers follow .to(device).
        self.register_buffer(
            "default_boxes", default_boxes(backbone, anchor_generator, size), persistent=False
        )
        # BoxCoder.encode_single builds its weights tensor from a Python tuple on every call, a
        # blocking host-to-device copy; the same weights kept on the device avoid it.
        self.register_buffer("box_weights", torch.tensor(self.box_coder.weights), persistent=False)

    def forward(self, images, targets=None):
        if not self.training:
            return super().forward(images, targets)
        if not isinstance(targets, dict) or targets.keys() != {"boxes", "labels"}:
            raise TypeError(
                "BatchedSSD trains on padded targets {'boxes': (B, M, 4), 'labels': (B, M)}, "
                f"got {type(targets).__name__}"
            )
        if tuple(images.shape[-2:]) != self.size:
            raise ValueError(f"images of {tuple(images.shape[-2:])}: the default boxes are for {self.size}")
        features = list(self.backbone(images).values())
        return self.batched_loss(self.head(features), targets["boxes"], targets["labels"])

    def batched_loss(self, head_outputs: dict, boxes: torch.Tensor, labels: torch.Tensor) -> dict:
        """torchvision's SSD.compute_loss for the whole batch: smooth L1 over foreground default
        boxes, cross-entropy over foreground and the hardest 3x as many background boxes per
        image, both divided by the number of foreground boxes (at least 1)."""
        from torchvision.models.detection._utils import encode_boxes

        matched = match_default_boxes(
            boxes, labels > 0, self.default_boxes, self.proposal_matcher.high_threshold
        )
        foreground = matched >= 0
        gt = matched.clamp(min=0)
        anchors = self.default_boxes.expand(*gt.shape, 4)
        # Background boxes regress onto themselves: a finite target (padding's zero box would give
        # log 0) whose loss the foreground mask then drops.
        gt_boxes = torch.where(
            foreground[..., None], boxes.gather(1, gt[..., None].expand_as(anchors)), anchors
        )
        target = encode_boxes(gt_boxes.reshape(-1, 4), anchors.reshape(-1, 4), self.box_weights)
        box_loss = F.smooth_l1_loss(
            head_outputs["bbox_regression"], target.view_as(anchors), reduction="none"
        )
        box_loss = (box_loss.sum(-1) * foreground).sum()

        classes = labels.gather(1, gt) * foreground
        logits = head_outputs["cls_logits"]
        class_loss = F.cross_entropy(logits.flatten(0, 1), classes.flatten(), reduction="none").view_as(
            classes
        )
        # Hard negatives: rank each image's background boxes by loss and keep the top
        # neg_to_pos_ratio x (its foreground count). torchvision ranks the same way (two sorts);
        # one sort and a scatter give each box its rank.
        positives = foreground.sum(1, keepdim=True)
        order = class_loss.detach().masked_fill(foreground, -float("inf")).argsort(1, descending=True)
        places = torch.arange(order.size(1), device=order.device).expand_as(order)
        rank = torch.empty_like(order).scatter_(1, order, places)
        # torchvision lets positives fill the ranks when an image has more than a quarter of its
        # boxes foreground (counting them twice); excluding them keeps the loss SSD's.
        negatives = (rank < self.neg_to_pos_ratio * positives) & ~foreground
        normaliser = positives.sum().clamp(min=1)
        return {
            "bbox_regression": box_loss / normaliser,
            "classification": (class_loss * (foreground | negatives)).sum() / normaliser,
        }
