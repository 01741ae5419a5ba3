"""Falcon-H1 (TII: 0.5B to 34B): a Mamba-2 mixer and an attention side by side in every layer,
both reading the layer's RMSNorm (``input_layernorm``), their outputs added to the residual together.

The attention is Llama's (rotary, GQA, one ``attention_bias`` switch for all four projections) with
five scalars of its own (muP), each folded into the weights where it acts:

- ``attention_in_multiplier`` ``a``: the attention reads ``a`` times the normed residual (into
  ``W_Q``, ``W_K`` and ``W_V``, not their biases);
- ``key_multiplier`` ``k``: keys are ``k`` times the key projection (into ``W_K`` and ``b_K``);
- ``attention_out_multiplier`` ``m``: the residual receives ``m`` times the attention's output
  (into ``W_O`` and ``b_O``; :meth:`Family.residual_scale` tells the data runner);
- ``embedding_multiplier`` ``e``: the residual starts at ``e · W_E[t]`` (into ``W_E``);
- ``lm_head_multiplier`` ``s``: logits are ``s · W_U x`` (into ``W_U``).

The Mamba mixers (whose own multipliers these are not) write to the residual as MLPs do, and are
not read. The final norm is ``final_layernorm``.
"""

from __future__ import annotations

import dataclasses

from ...core.heads import HeadWeights
from ..checkpoint import Checkpoint
from . import register
from .base import MAMBA2_SETTINGS, PROJECTIONS, number
from .llama import Llama, LlamaLike, LlamaLikeOptions, convert_llamalike

#: the Mamba mixers' and the MLP's settings (and multipliers): the attention does not depend on them
_NOT_ATTENTION = MAMBA2_SETTINGS | frozenset(
    "mamba_d_ssm mamba_norm_before_gate mamba_rms_norm mamba_use_mlp projectors_bias mlp_multipliers ssm_multipliers "
    "ssm_in_multiplier ssm_out_multiplier mlp_bias intermediate_size num_logits_to_keep".split())
_SCALARS = ("attention_in_multiplier", "key_multiplier", "attention_out_multiplier", "embedding_multiplier",
            "lm_head_multiplier")


def _multipliers(config: dict, where: str, *keys: str) -> tuple[float, ...]:
    """The config's multipliers under ``keys``, each a number > 0 (transformers' default 1)."""
    return tuple(number(config, where, key, default=1.0, open_low=True) for key in keys)


@register
class FalconH1(LlamaLike):
    name = "falcon_h1"
    about = "Falcon-H1 (TII): a Mamba-2 mixer beside the attention in every layer, muP multipliers folded"
    model_types = ("falcon_h1",)
    architectures = ("FalconH1ForCausalLM", "FalconH1Model")
    handled = (Llama.handled - {"sliding_window", "use_sliding_window", "max_window_layers"}) | frozenset(_SCALARS)
    ignored = Llama.ignored | _NOT_ATTENTION
    options = LlamaLikeOptions(final_norm="final_layernorm",
                               notes=("parallel block: the attention and a Mamba-2 mixer read the same normed "
                                      "residual",))

    @classmethod
    def residual_scale(cls, config: dict, where: str = "config") -> float:
        return _multipliers(config, where, "attention_out_multiplier")[0]

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        return ["full_attention"] * n_layers  # no window: transformers' Falcon-H1 reads no sliding_window

    @classmethod
    def projections_as_read(cls, config: dict, where: str, parts: dict) -> dict:
        """The input multiplier on ``W_Q``, ``W_K``, ``W_V`` (not their biases), the key multiplier on ``W_K``
        and ``b_K``."""
        a, k = _multipliers(config, where, "attention_in_multiplier", "key_multiplier")
        scales = {"W_Q": a, "W_K": a * k, "W_V": a, "b_K": k}
        return {name: t if t is None else t * scales.get(name, 1.0) for name, t in parts.items()}

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where = ckpt.config, ckpt.source
        e, s = _multipliers(cfg, where, "embedding_multiplier", "lm_head_multiplier")
        hw = convert_llamalike(ckpt, cls, dataclasses.replace(cls.options, embed_scale=e, logit_scale=s))
        a, k = _multipliers(cfg, where, "attention_in_multiplier", "key_multiplier")
        said = f"attention_in_multiplier {a:g} folded into W_Q, W_K and W_V, key_multiplier {k:g} into W_K and b_K"
        parts = cls.projections_as_read(cfg, where, {n: getattr(hw, n) for n in PROJECTIONS})
        return dataclasses.replace(hw, **parts,
                                   meta=dataclasses.replace(hw.meta, notes=hw.meta.notes + (said,)))
