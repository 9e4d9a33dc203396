"""Image-classification workloads from torchvision, random weights, synthetic ImageNet-shaped data."""

from __future__ import annotations

import torch
import torch.nn.functional as F
import torchvision  # noqa: F401 (here, not in the builders: the agent preloads it for its ranks)
from torch import nn

from src.models.base import Workload, counted_flops_per_item


def _classification_loss(model: nn.Module, batch) -> torch.Tensor:
    images, labels = batch
    return F.cross_entropy(model(images), labels)


def _images_and_labels(n: int, cfg: dict, device) -> tuple[torch.Tensor, torch.Tensor]:
    size = cfg["image_size"]
    images = torch.randn(n, 3, size, size, device=device)
    if cfg.get("channels_last"):
        images = images.contiguous(memory_format=torch.channels_last)
    return images, torch.randint(0, cfg["num_classes"], (n,), device=device)


def classifier_workload(
    model: nn.Module, cfg: dict, batch_size: int, device, flops_per_item: float | None = None
) -> Workload:
    """FLOPs per image: the config's figure, else the builder's analytic one, else counted."""
    if cfg.get("channels_last"):
        model = model.to(memory_format=torch.channels_last)
    flops = cfg.get("flops_per_item") or flops_per_item
    if flops is None:
        flops = counted_flops_per_item(
            cfg, model, _classification_loss, _images_and_labels(2, cfg, device), 2
        )
    return Workload(
        model=model,
        batch=_images_and_labels(batch_size, cfg, device),
        loss_fn=_classification_loss,
        items_per_step=batch_size * cfg["items_per_sample"],
        optimizer="sgd",
        flops_per_item=flops,
    )


def resnet50(cfg: dict, batch_size: int, device) -> Workload:
    from torchvision.models import resnet50 as tv_resnet50

    model = tv_resnet50(weights=None, num_classes=cfg["num_classes"]).to(device)
    # torchvision's model card: 4.09 GFLOPS (multiply-adds) forward at 224 px; convolutions
    # scale with the pixel count; training = forward + backward = 3 x forward.
    flops = 3 * 2 * 4.09e9 * (cfg["image_size"] / 224) ** 2
    return classifier_workload(model, cfg, batch_size, device, flops_per_item=flops)


def vit_b16(cfg: dict, batch_size: int, device) -> Workload:
    """torchvision's VisionTransformer at the sizes `vit_b_16` fixes (patch 16, 12 layers of 768,
    12 heads, MLP 3072), built from the config's keys so that benchmark=smoke can shrink it."""
    from torchvision.models import VisionTransformer

    with torch.device(device):
        model = VisionTransformer(
            image_size=cfg["image_size"],
            patch_size=cfg["patch_size"],
            num_layers=cfg["n_layer"],
            num_heads=cfg["n_head"],
            hidden_dim=cfg["d_model"],
            mlp_dim=cfg["d_inner"],
            num_classes=cfg["num_classes"],
        )
    return classifier_workload(model, cfg, batch_size, device)
