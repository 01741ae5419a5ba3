"""PLaMo 3 and PLaMo 2 (Preferred Networks) as llama.cpp runs their GGUF files. PLaMo 3: Llama's layers with one
fused ``qkv_proj`` (rows [q heads | k heads | v heads]), an RMSNorm on each query and key head before rotate-half
rotary, an RMSNorm on each attention output before the residual (``post_attention_layernorm``), and sliding-window
layers among global ones
(:func:`compscope.loading.formats.gguf.rules.plamo3` states which, and their own rotary base). Its norms' gains are
as llama.cpp's converter stores them (the model's offsets added in). No HuggingFace model type names it here (its model
is remote code): GGUF files alone are read as it (``gguf_types``), for the weight-only commands.
"""

from __future__ import annotations

import dataclasses

from ...errors import LoadError
from . import register
from .base import attending
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


@register
class Plamo2(Plamo3):
    """PLaMo 2 as llama.cpp runs its GGUF files: PLaMo 3's attention layers (without windows), each query and key head
    normed with gains of its own (``{q,k}_norm`` stacked ``(heads, d_head)``), among Mamba layers (``layer_types``
    ``mamba``; their K/V head count 0 in the file), which write to the residual too and are not read."""

    name = "plamo2"
    about = ("PLaMo 2 (GGUF files, as llama.cpp runs them): its attention layers alone among Mamba layers, per-head "
             "QK-norm with each head's own gains, a norm on each attention output")
    gguf_types = ("plamo2_gguf",)
    handled = LlamaLike.handled
    options = dataclasses.replace(Plamo3.options, qk_gains_per_head=True)

    @classmethod
    def attention_layers(cls, config: dict, n_layers: int, where: str = "config") -> list[int]:
        """The layers ``layer_types`` calls ``attention`` (the others ``mamba``)."""
        types = config.get("layer_types")
        if not isinstance(types, list) or len(types) != n_layers or any(t not in ("attention", "mamba") for t in types):
            raise LoadError(f"{where}: config key 'layer_types' = {types!r} is not 'attention' or 'mamba' for each of "
                            f"the {n_layers} layers")
        return attending([i for i, t in enumerate(types) if t == "attention"], n_layers, where, "a Mamba layer")

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        """Every attention layer global."""
        return ["full_attention"] * n_layers
