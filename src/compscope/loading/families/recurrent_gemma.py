"""RecurrentGemma (Google's Griffin: RecurrentGemma-2B and 9B): residual blocks whose temporal
mixer is an RG-LRU recurrence in two layers of three and local attention in the third (as
``block_types`` cycles), each block's MLP after it.

compscope reads the attention blocks alone, in order (its layer ``k`` is the model's k-th attention
block; the notes say which), the recurrent blocks being other writers to the residual, as MLPs are.
The attention reads Gemma's ``1 + w`` RMSNorm of the residual (``temporal_pre_norm``), has grouped
(multi-query, in the released models) K/V heads, rotary on the first half of each head
(``partial_rotary_factor`` 0.5, rotate-half within it), queries scaled by ``d_head^-1/2``, q/k/v
biases where ``attention_bias`` is set and always one on the output projection. Each query attends
to the ``attention_window_size`` keys up to it. The embeddings are multiplied by ``sqrt(d_model)``
rounded to bfloat16, as the model holds that factor; the logits are soft-capped at
``logits_soft_cap`` after the unembedding, which ``W_U`` describes before the cap.
"""

from __future__ import annotations

import dataclasses

import torch

from ...core.heads import HeadWeights
from ...errors import LoadError
from ..checkpoint import Checkpoint
from . import register
from .base import MAX_HEADS, MAX_LAYERS, attending, integer, rope_accept_of
from .llama import LlamaLike, LlamaLikeOptions, convert_llamalike

#: the block types of ``block_types`` and transformers' default cycle
BLOCKS = ("recurrent", "attention")
DEFAULT_BLOCKS = ("recurrent", "recurrent", "attention")


def bf16_sqrt(d: int) -> float:
    """``sqrt(d)`` as the model multiplies its embeddings by it: a bfloat16 number."""
    return float(torch.tensor(d**0.5, dtype=torch.bfloat16))


@register
class RecurrentGemma(LlamaLike):
    name = "recurrent_gemma"
    about = "RecurrentGemma (Griffin): local attention blocks among RG-LRU recurrent blocks"
    model_types = ("recurrent_gemma",)
    architectures = ("RecurrentGemmaForCausalLM", "RecurrentGemmaModel")
    handled = frozenset("hidden_size num_attention_heads num_key_value_heads num_hidden_layers rms_norm_eps rope_theta "
                        "partial_rotary_factor attention_bias attention_window_size sliding_window block_types head_dim".split())
    ignored = frozenset("lru_width conv1d_width w_init_variance_scale final_w_init_variance_scale logits_soft_cap "
                        "embeddings_scale_by_sqrt_dim".split())  # (the recurrence's; the cap after the unembedding)
    accept = {"rope_parameters": rope_accept_of(("default",)), "rope_scaling": lambda v: v is None}
    other_layers = "RG-LRU recurrent blocks"

    @classmethod
    def hook_points(cls, model):
        """``temporal_pre_norm`` reads the residual; ``temporal_block`` (an attention block's) returns
        what it adds. The recurrent blocks are passed over."""
        return [(b.temporal_pre_norm, b.temporal_block) for b in cls.base_model(model).layers
                if hasattr(b.temporal_block, "q_proj")]

    @classmethod
    def attention_biases(cls, config: dict) -> tuple[bool, bool]:
        return bool(config.get("attention_bias") or False), True  # (the output projection's bias always)

    @classmethod
    def blocks(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        """Per model layer, 'recurrent' or 'attention': ``block_types`` repeated over the layers."""
        types = config.get("block_types", list(DEFAULT_BLOCKS))
        if (not isinstance(types, (list, tuple)) or not types or len(types) > MAX_LAYERS
                or any(t not in BLOCKS for t in types)):
            raise LoadError(f"{where}: config key 'block_types' = {types!r} is not a list of {' / '.join(BLOCKS)}")
        return [types[i % len(types)] for i in range(n_layers)]

    @classmethod
    def attention_layers(cls, config: dict, n_layers: int, where: str = "config") -> list[int]:
        layers = [i for i, t in enumerate(cls.blocks(config, n_layers, where)) if t == "attention"]
        return attending(layers, n_layers, where, "recurrent", unit="block",
                         detail=f" (block_types {config.get('block_types')!r})")

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        return ["sliding_attention"] * n_layers  # (read on the attention blocks alone)

    @classmethod
    def window(cls, config: dict, where: str = "config") -> int:
        """``attention_window_size`` (transformers' name for it: ``sliding_window``; default 2048)."""
        keys = [k for k in ("attention_window_size", "sliding_window") if config.get(k) is not None]
        sizes = {integer(config, where, k) for k in keys}
        if len(sizes) > 1:
            raise LoadError(f"{where}: config keys 'attention_window_size' and 'sliding_window' (its other name) differ: "
                            f"{config['attention_window_size']!r} and {config['sliding_window']!r}")
        return sizes.pop() if sizes else 2048

    @classmethod
    def runs_windows(cls, config) -> bool:
        """transformers 5 names the window ``sliding_window`` and applies it; transformers 4 knows no
        such name and applies none within one forward pass (the two agree on sequences up to it)."""
        return getattr(config, "sliding_window", None) is not None

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where = dict(ckpt.config), ckpt.source
        cfg["sliding_window"] = cls.window(cfg, where)
        d = integer(cfg, where, "hidden_size")
        H = integer(cfg, where, "num_attention_heads", high=MAX_HEADS)
        if d % H:
            raise LoadError(f"{where}: config key 'num_attention_heads' = {H} does not divide 'hidden_size' = {d}")
        cfg["head_dim"] = d // H  # (transformers' head width, whatever the config states)
        opts = LlamaLikeOptions(
            norm_offset=1.0, embed_scale=bf16_sqrt(d), partial_rotary=0.5, input_norm_at="temporal_pre_norm",
            attn_at="temporal_block", final_norm="final_norm", eps_key="rms_norm_eps",
            notes=(f"embeddings times sqrt(d_model) rounded to bfloat16 ({bf16_sqrt(d):g}), as the model multiplies "
                   "them", "logits soft-capped (logits_soft_cap) after the unembedding: W_U is the map before the cap"))
        ckpt = dataclasses.replace(ckpt, config=cfg)
        return convert_llamalike(ckpt, cls, opts)
