"""Nemotron (NVIDIA Nemotron-3, Minitron, Nemotron-Mini): Llama-like with LayerNorms whose gain is
``1 + w`` and which have a bias ("LayerNorm1P", eps ``norm_eps``), rotary on part of each head
(``partial_rotary_factor``, transformers' default one half; rotate-half within the rotated dims),
and one ``attention_bias`` switch (default off) for all four projections."""

from __future__ import annotations

from . import register
from .llama import Llama, LlamaLike, LlamaLikeOptions


@register
class Nemotron(LlamaLike):
    name = "nemotron"
    about = "Nemotron-3, Minitron, Nemotron-Mini (NVIDIA): LayerNorm1P, partial rotary"
    model_types = ("nemotron",)
    architectures = ("NemotronForCausalLM", "NemotronModel")
    handled = Llama.handled | {"norm_eps", "partial_rotary_factor"}
    options = LlamaLikeOptions(norm_kind="layernorm", norm_offset=1.0, norm_bias=True, eps_key="norm_eps",
                               partial_rotary=0.5)
