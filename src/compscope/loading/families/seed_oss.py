"""Seed-OSS (ByteDance Seed-OSS-36B): Llama's attention with two bias switches, ``attention_bias``
on q, k and v (default on) and ``attention_out_bias`` on the output projection (default off)."""

from __future__ import annotations

from . import register
from .llama import Llama, LlamaLike


@register
class SeedOss(LlamaLike):
    name = "seed_oss"
    about = "Seed-OSS-36B (ByteDance): two bias switches"
    model_types = ("seed_oss",)
    architectures = ("SeedOssForCausalLM", "SeedOssModel")
    handled = Llama.handled | {"attention_out_bias"}
    ignored = Llama.ignored | {"residual_dropout"}

    @classmethod
    def attention_biases(cls, config: dict) -> tuple[bool, bool]:
        qkv, out = config.get("attention_bias"), config.get("attention_out_bias")
        return (True if qkv is None else bool(qkv)), bool(out or False)  # transformers' defaults: on, off
