"""PLaMo 3 (Preferred Networks) as llama.cpp runs its GGUF files: Llama's layers with one fused ``qkv_proj`` (rows
[q heads | k heads | v heads]), an RMSNorm on each query and key head before rotate-half rotary, an RMSNorm on each
attention output before the residual (``post_attention_layernorm``), and sliding-window layers among global ones
(:func:`compscope.loading.formats.gguf.rules.plamo3` states which, and their own rotary base). Its norms' gains are
as llama.cpp's converter stores them (the model's offsets added in). No HuggingFace model type names it here (its model
is remote code): GGUF files alone are read as it (``gguf_types``), for the weight-only commands.
"""

from __future__ import annotations

from . import register
from .llama import LlamaLike, LlamaLikeOptions


@register
class Plamo3(LlamaLike):
    name = "plamo3"
    about = ("PLaMo 3 (GGUF files, as llama.cpp runs them): per-head QK-norm, a norm on each attention output, "
             "sliding layers with a rotary base of their own")
    model_types = ()
    gguf_types = ("plamo3_gguf",)
    handled = LlamaLike.handled | {"rope_local_base_freq"}
    options = LlamaLikeOptions(qk_norm=True, post_attn_norm=True, fused_qkv=True)
    runs_on_data = False  # (transformers has no model of it)
