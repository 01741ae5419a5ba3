"""CWM (Meta's Code World Model): Llama's attention without biases, every fourth layer (from the
first) attending over the whole sequence and the others within ``sliding_window``, as
``layer_types`` lists them; Llama 3's rope scaling, transformers' default where the config states
no rope settings."""

from __future__ import annotations

import dataclasses

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights
from . import register
from .llama import Llama, LlamaLike, convert_llamalike, listed_or

#: transformers' rope settings of a CWM config that states none
DEFAULT_ROPE = {"rope_type": "llama3", "rope_theta": 1_000_000.0, "factor": 16.0, "high_freq_factor": 4.0,
                "low_freq_factor": 1.0, "original_max_position_embeddings": 8192}


@register
class Cwm(LlamaLike):
    name = "cwm"
    about = "CWM (Meta's Code World Model): every fourth layer global, the others sliding"
    model_types = ("cwm",)
    architectures = ("CwmForCausalLM", "CwmModel")
    handled = Llama.handled

    @classmethod
    def attention_biases(cls, config: dict) -> tuple[bool, bool]:
        return False, False

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        """As listed, else transformers' rule: layers ``0, 4, 8, ...`` global, the others sliding."""
        return listed_or(config, n_layers, where, lambda i: i % 4 == 0)

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg = dict(ckpt.config)
        if cfg.get("rope_parameters") is None and cfg.get("rope_scaling") is None:
            cfg["rope_parameters"] = {**DEFAULT_ROPE, **({"rope_theta": cfg["rope_theta"]} if cfg.get("rope_theta") else {})}
        return convert_llamalike(dataclasses.replace(ckpt, config=cfg), cls, cls.options)
