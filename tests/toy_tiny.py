"""Tiny toy models for tests: their norm gains and biases moved off their initial values, so that
what reads them is tested."""

from __future__ import annotations

import torch

from compscope.toy import ToyConfig, ToyTransformer


def perturbed_toy(cfg: ToyConfig, seed: int = 0) -> ToyTransformer:
    """``ToyTransformer(cfg, seed)`` with every norm gain and bias (parameters ``*.w``, ``*.b``)
    shifted by ``0.3 N(0, 1)`` drawn from generator seed ``seed + 1``."""
    m = ToyTransformer(cfg, seed=seed)
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.endswith((".w", ".b")):
                p.add_(0.3 * torch.randn(p.shape, generator=g))
    return m
