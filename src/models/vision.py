"""Image-classification workloads from torchvision, random weights, synthetic ImageNet-shaped data."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from src.models.base import Workload


def _classification_loss(model: nn.Module, batch) -> torch.Tensor:
    images, labels = batch
    return F.cross_entropy(model(images), labels)


def classifier_workload(model: nn.Module, cfg: dict, batch_size: int, device) -> Workload:
    size, classes = cfg["image_size"], cfg["num_classes"]
    images = torch.randn(batch_size, 3, size, size, device=device)
    labels = torch.randint(0, classes, (batch_size,), device=device)
    if cfg.get("channels_last"):
        model = model.to(memory_format=torch.channels_last)
        images = images.contiguous(memory_format=torch.channels_last)
    return Workload(
        model=model,
        batch=(images, labels),
        loss_fn=_classification_loss,
        items_per_step=batch_size * cfg["items_per_sample"],
        optimizer="sgd",
        flops_per_item=cfg.get("flops_per_item"),
    )


def resnet50(cfg: dict, batch_size: int, device) -> Workload:
    from torchvision.models import resnet50 as tv_resnet50

    model = tv_resnet50(weights=None, num_classes=cfg["num_classes"]).to(device)
    workload = classifier_workload(model, cfg, batch_size, device)
    if workload.flops_per_item is None:
        # torchvision's model card: 4.09 GFLOPS (multiply-adds) forward at 224 px; convolutions
        # scale with the pixel count; training = forward + backward = 3 x forward.
        workload.flops_per_item = 3 * 2 * 4.09e9 * (cfg["image_size"] / 224) ** 2
    return workload
