"""Dia's text encoder (Nari Labs' text-to-speech model: a whole model, ``dia``, or its encoder alone, ``dia_encoder``).

Pre-norm layers, each ``pre_sa_norm`` (an RMSNorm with a gain) before ``self_attention`` (``q_proj``, ``k_proj``,
``v_proj``, ``o_proj``, no biases; grouped K/V heads where ``num_key_value_heads`` says so; ``head_dim`` per head, so
``H d_head`` need not be ``hidden_size``), attending both ways, queries and keys turned by the rotary map on every head
dim (rotate-half) at the encoder's base, and logits not scaled: Dia's attention multiplies ``q·k`` by 1
(``attn_scale = 1``). ``norm`` ends the stack. The residual starts as the token's row of ``embedding`` (Dia's tokens
are bytes), unscaled, with nothing added for its position. A whole model's settings for it are its
``encoder_config``. The decoder is not read: each of its positions sums one embedding per audio channel, and its
cross-attention reads the encoder's output.
"""

from __future__ import annotations

import dataclasses

from ...core.heads import HeadWeights
from ...errors import LoadError
from ..checkpoint import Checkpoint
from . import register
from .base import layer_hooks, rope_accept_yarn
from .llama import LlamaLike, LlamaLikeOptions, convert_llamalike


@register
class DiaEncoder(LlamaLike):
    name = "dia_encoder"
    about = ("the text encoder of Dia (Nari Labs' text-to-speech): pre-RMSNorm rotary layers attending both ways, "
             "unscaled logits; its audio decoder not read")
    part = "encoder"
    model_types = ("dia", "dia_encoder")
    architectures = ("DiaForConditionalGeneration", "DiaModel", "DiaEncoder")
    # no window, no biases: the encoder's transformers class takes neither key
    handled = frozenset("hidden_size num_attention_heads num_key_value_heads head_dim num_hidden_layers norm_eps "
                        "rope_theta".split())
    ignored = frozenset()
    accept = {"rope_parameters": rope_accept_yarn, "rope_scaling": rope_accept_yarn}
    options = LlamaLikeOptions(attn_at="self_attention", embed_at="embedding", input_norm_at="pre_sa_norm",
                               eps_key="norm_eps", attn_scale=1.0, bidirectional=True, notes=(
                                   "logits unscaled (attn_scale 1): Dia's attention multiplies q.k by 1",))
    hook_points = layer_hooks("pre_sa_norm", "self_attention")
    runs_as_named = True  # (the class the folder names: the encoder alone, or a whole model whose encoder is hooked)

    @classmethod
    def attention_biases(cls, config: dict) -> tuple[bool, bool]:
        return False, False  # (transformers builds every projection without one)

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        """No window: every token attends to every token."""
        return ["full_attention"] * n_layers

    @classmethod
    def base_model(cls, model):
        """The encoder: the model itself when built alone, ``model.encoder`` of a ``DiaModel``,
        ``model.model.encoder`` of a ``DiaForConditionalGeneration``."""
        inner = getattr(model, "model", model)
        return getattr(inner, "encoder", inner)

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        whole = ckpt.config.get("model_type") == "dia"
        cfg = ckpt.config.get("encoder_config") if whole else ckpt.config
        if not isinstance(cfg, dict):
            raise LoadError(f"{ckpt.source}: config key 'encoder_config' = {cfg!r}: expected the text encoder's "
                            "settings (a mapping)")
        hw = convert_llamalike(dataclasses.replace(ckpt, config=cfg), cls, cls.options)
        if not whole:
            return hw
        note = ("the text encoder alone: the audio decoder (each position a sum of one embedding per audio channel, "
                "its cross-attention reading the encoder's output) is not read")
        return dataclasses.replace(hw, meta=dataclasses.replace(hw.meta, notes=(*hw.meta.notes, note)))
