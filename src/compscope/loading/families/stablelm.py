"""StableLM decoders (StableLM-3B-4E1T, StableLM 2): Llama's module names with LayerNorms.

Pre-LayerNorm with gain and bias (``layer_norm_eps``); separate ``q/k/v_proj`` with biases when
``use_qkv_bias``, ``o_proj`` without; GQA; partial rotary in the rotate-half layout
(``partial_rotary_factor``, 0.25 in the released models); ``use_parallel_residual``: attention
and MLP read the same residual (the heads' weights are the same; recorded in the notes). The
per-head QK LayerNorm of the 12B model (``qk_layernorm``: one LayerNorm module per head, each with
its own gain, no bias) is read as a per-head QK-norm whose gains sit side by side.
"""

from __future__ import annotations

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights
from . import register
from .llama import LlamaLike, LlamaLikeOptions, convert_llamalike


@register
class StableLm(LlamaLike):
    name = "stablelm"
    about = "StableLM-3B-4E1T, StableLM 2: LayerNorms, partial rotary, parallel residual"
    model_types = ("stablelm",)
    architectures = ("StableLmForCausalLM", "StableLmModel")
    handled = frozenset("hidden_size num_attention_heads num_key_value_heads num_hidden_layers layer_norm_eps "
                        "use_qkv_bias use_parallel_residual rope_theta partial_rotary_factor qk_layernorm".split())
    ignored = frozenset()

    @classmethod
    def attention_biases(cls, config: dict) -> tuple[bool, bool]:
        return bool(config.get("use_qkv_bias") or False), False

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        parallel = ("parallel residual: attention and MLP of a layer read the same residual",)
        return convert_llamalike(ckpt, cls, LlamaLikeOptions(
            norm_kind="layernorm", norm_bias=True, eps_key="layer_norm_eps", partial_rotary=0.25,  # transformers' default
            qk_norm=bool(ckpt.config.get("qk_layernorm")), qk_norm_kind="layernorm", qk_gains_per_head=True,
            notes=parallel if ckpt.config.get("use_parallel_residual") else ()))
