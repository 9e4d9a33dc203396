"""The workloads' optimizers under mixed precision: a skipped first step leaves no garbage behind."""

from __future__ import annotations

import torch
from torch import nn

from src.models.base import momentum_sgd


def test_fused_sgd_momentum_survives_a_first_step_that_overflows():
    p = nn.Parameter(torch.randn(1000))
    optimizer = momentum_sgd([p], lr=0.01, fused=True)
    assert torch.equal(optimizer.state[p]["momentum_buffer"], torch.zeros_like(p))
    scaler = torch.amp.GradScaler("cpu")
    grads = []
    for factor in (1e38, 1.0, 1.0):  # the first loss overflows at the initial scale: step skipped
        scaler.scale((p * factor).sum()).backward()
        grads.append(p.grad.clone() / scaler.get_scale())
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
    assert torch.isfinite(p).all()
    # two real steps: buf = g2, then 0.9 * g2 + g3 (weight decay adds 1e-4 * p, small here)
    expected = 0.9 * grads[1] + grads[2]
    assert torch.allclose(optimizer.state[p]["momentum_buffer"], expected, rtol=1e-2)
