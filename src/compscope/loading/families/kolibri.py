"""Kolibri 1 (Aleph Alpha): EXAONE 4's attention in GLM-4's layers, with mixture-of-experts MLPs.

Each layer reads an RMSNorm of the residual (``input_layernorm``) and normalises its attention
output before the residual (``post_self_attn_layernorm``; ``post_attn_norm`` in the files, which
transformers renames), read as Gemma's post-attention norm. The attention has no biases, per-head
QK-norm before the rotary map, and, where a window is set, rotary on the sliding layers alone, the
global ones without positional encoding (NoPE), as ``layer_types`` lists them (transformers'
default: every fifth layer global). The experts (and the shared expert) are MLP, not read.
"""

from __future__ import annotations

import dataclasses

from ...core.heads import HeadWeights
from ..checkpoint import Checkpoint
from . import register
from .base import layer_hooks
from .llama import Llama, LlamaLike, LlamaLikeOptions, convert_llamalike, listed_or


#: the window where the config states none (transformers' default)
KOLIBRI_WINDOW = 513


@register
class Kolibri1(LlamaLike):
    name = "kolibri1"
    about = "Kolibri 1 (Aleph Alpha): QK-norm, a norm on the attention output, NoPE global layers"
    model_types = ("kolibri1",)
    architectures = ("Kolibri1ForCausalLM", "Kolibri1Model")
    handled = Llama.handled - {"max_window_layers", "use_sliding_window"}
    ignored = Llama.ignored | {"shared_expert_intermediate_size", "n_group", "topk_group", "routed_scaling_factor"}
    options = LlamaLikeOptions(qk_norm=True, post_attn_norm=True, post_attn_norm_at="post_self_attn_layernorm")
    saved_names = ((r"\.post_attn_norm\.weight$", ".post_self_attn_layernorm.weight"),)  # (its files' name)
    hook_points = layer_hooks("input_layernorm", "post_self_attn_layernorm")

    @classmethod
    def attention_biases(cls, config: dict) -> tuple[bool, bool]:
        return False, False  # (EXAONE 4's projections: none, whatever the config says)

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        """As listed, else transformers' default: every fifth layer global, the others sliding."""
        return listed_or(config, n_layers, where, lambda i: (i + 1) % 5 == 0, KOLIBRI_WINDOW)

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        windowed = ckpt.config.get("sliding_window", KOLIBRI_WINDOW) is not None  # (transformers: rotary on every
        # layer where there is no window)
        opts = dataclasses.replace(cls.options, nope_layers="full_attention" if windowed else "")
        if "sliding_window" not in ckpt.config:
            ckpt = dataclasses.replace(ckpt, config={**ckpt.config, "sliding_window": KOLIBRI_WINDOW})
        return convert_llamalike(ckpt, cls, opts)
