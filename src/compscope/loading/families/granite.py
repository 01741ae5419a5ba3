"""IBM Granite decoders (Granite 3.x dense: ``granite``; their mixture-of-experts siblings:
``granitemoe``, ``granitemoeshared``): Llama-like with four scalars in place of Llama's
implicit ones, each folded into the weights where it acts.

- ``embedding_multiplier`` ``e``: the residual starts at ``e · W_E[t]`` (into ``W_E``).
- ``attention_multiplier`` ``a``: the logit is ``a · q·k``, in place of ``d_head^-1/2``
  (``HeadWeights.attn_scale``).
- ``residual_multiplier`` ``m``: each layer adds ``m`` times its attention output to the residual
  (into ``W_O`` and ``b_O``; :meth:`Family.residual_scale` tells the data runner).
- ``logits_scaling`` ``s``: logits are ``W_U x / s`` (``1/s`` into ``W_U``).

The experts (and the shared expert) are MLP: not read. GraniteMoeHybrid (Mamba layers) is
another model type and is not read.
"""

from __future__ import annotations

import dataclasses

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights
from . import register
from .base import number
from .llama import Llama, LlamaLike, convert_llamalike

_SCALARS = ("embedding_multiplier", "attention_multiplier", "residual_multiplier", "logits_scaling")


@register
class Granite(LlamaLike):
    name = "granite"
    model_types = ("granite", "granitemoe", "granitemoeshared")
    architectures = ("GraniteForCausalLM", "GraniteModel", "GraniteMoeForCausalLM", "GraniteMoeSharedForCausalLM")
    handled = Llama.handled | frozenset(_SCALARS)
    ignored = Llama.ignored | {"shared_intermediate_size"}
    accept = {**LlamaLike.accept, "position_embedding_type": lambda v: v == "rope"}  # transformers 4's MoE configs

    @classmethod
    def residual_scale(cls, config: dict, where: str = "config") -> float:
        return number(config, where, "residual_multiplier", default=1.0, open_low=True)  # transformers' default 1

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where = ckpt.config, ckpt.source
        e, a, s = (number(cfg, where, k, default=1.0, open_low=True)
                   for k in ("embedding_multiplier", "attention_multiplier", "logits_scaling"))
        opts = dataclasses.replace(cls.options, embed_scale=e, attn_scale=a, logit_scale=1.0 / s)
        return convert_llamalike(ckpt, cls, opts)
