"""compscope's own toy models on data: their forward pass keeps what a trace needs."""

from __future__ import annotations

from torch import Tensor

from ...core.heads import HeadWeights
from .base import Runner, model_device


class ToyRunner(Runner):
    """compscope's own toy models (``compscope.toy``)."""

    def __init__(self, model, hw: HeadWeights) -> None:
        self.model, self.hw = model, hw
        self.n_ctx = int(model.cfg.n_ctx)
        self.device = model_device(model)

    def _run(self, tokens: Tensor, add: dict[int, Tensor] | None = None) -> tuple[list[Tensor], list[Tensor]]:
        cache: dict = {}
        self.model(tokens, cache=cache, adds=add)
        L, add = self.model.cfg.n_layers, add or {}
        # what each layer's attention added to the residual: with ``add``'s change, as the other runners record it
        out = [cache[f"attn_out.{l}"] + add[l] if l in add else cache[f"attn_out.{l}"] for l in range(L)]
        return [cache[f"resid_pre.{l}"] for l in range(L)], out
