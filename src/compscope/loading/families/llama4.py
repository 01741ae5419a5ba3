"""Llama 4 language models (Scout, Maverick): Llama's attention with interleaved NoPE layers.

Every ``no_rope_layer_interval``-th layer (4; or as ``no_rope_layers`` lists them, 1 rotary, 0 none)
leaves queries and keys unrotated (frequency 0, as SmolLM3's). The other layers rotate them with
interleaved pairs (the complex form ``(q_{2i} + i q_{2i+1}) e^{i p θ_i}``) and then, with
``use_qk_norm`` (Scout; not Maverick), divide each head's query and key by its RMS, without gains:
``q / sqrt(mean q² + ε)``. A rotation keeps the RMS, so norming before or after it is the same map;
compscope holds it as a gainless QK-norm on those layers only (``HeadWeights.qk_norm_layers``).

Two settings change attention only on long sequences, and compscope reads the short ones:

- chunked attention on the rotary layers: a token sees the keys of its own chunk of
  ``attention_chunk_size`` tokens (8192), which within the first chunk is full causal attention;
- the NoPE layers' query temperature ``1 + attn_scale · log(1 + ⌊(p + 1) / floor_scale⌋)`` at
  position ``p``, which is 1 on the first ``floor_scale − 1`` positions (8191).

The data-based commands run sequences no longer than either (:meth:`Llama4.exact_context`).
Rope types that scale rotated queries and keys (YaRN, LongRoPE) are refused: the QK-norm after the
rotation would undo that scale on some layers and not on others. The experts are MLP: not read.
A GGUF file of it is read by llama.cpp's rules (``formats.gguf``: none of these settings is stored).
"""

from __future__ import annotations

import dataclasses

from . import register
from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights
from ...errors import LoadError, UnsupportedModelError
from .base import ROPE_TYPES, integer, number, rope_accept
from .llama import Llama, LlamaLike, LlamaLikeOptions, convert_llamalike, rope_layers

#: transformers' chunk size where a config states none
CHUNK = 8192
#: the layer types a Llama 4 config lists
_TYPES = ("full_attention", "chunked_attention")


def _config(config: dict) -> dict:
    """``config`` as transformers reads it: an empty ``no_rope_layers`` means the default pattern."""
    return {k: v for k, v in config.items() if k != "no_rope_layers"} if config.get("no_rope_layers") == [] else config


@register
class Llama4(LlamaLike):
    name = "llama4"
    about = ("Llama 4 Scout and Maverick (their language model): no rotary on every fourth layer, a QK-norm without "
             "gains on the others (Scout)")
    model_types = ("llama4_text",)
    architectures = ("Llama4ForCausalLM", "Llama4TextModel")
    handled = LlamaLike.handled | {"no_rope_layers", "no_rope_layer_interval", "use_qk_norm", "attention_chunk_size",
                                   "attn_temperature_tuning", "floor_scale", "attn_scale"}
    ignored = Llama.ignored | {"intermediate_size_mlp", "moe_layers", "interleave_moe_layer_step"}
    accept = {"rope_parameters": rope_accept, "rope_scaling": rope_accept}
    options = LlamaLikeOptions(qk_norm=True, qk_norm_gains=False, qk_norm_on="rotary", nope_layers="no_rope_layers",
                               rotary_style="interleaved", default_theta=500_000.0, rope_kinds=ROPE_TYPES)

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        config = _config(ckpt.config)
        notes = list(cls.options.notes)
        chunk = cls._chunk(config, ckpt.source)
        if chunk is not None:
            notes.append(f"chunked attention on the layers with rotary: a token sees the keys of its own chunk of "
                         f"{chunk} tokens, the same as full causal attention on sequences up to {chunk} tokens, which "
                         "is what is read")
        exact = cls._exact(config, ckpt.source)
        if exact is not None:
            scale = number(config, ckpt.source, "attn_scale", default=0.1)
            notes.append(f"the NoPE layers' queries scaled by 1 + {scale:g} log(1 + "
                         f"floor((p + 1) / {exact + 1})) at position p (Llama 4's temperature): 1 on the first {exact} "
                         "positions, which is what is read")
        opts = dataclasses.replace(cls.options, qk_norm=bool(config.get("use_qk_norm", True)), notes=tuple(notes))
        return convert_llamalike(dataclasses.replace(ckpt, config=config), cls, opts)

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        """Full attention on every layer: the chunked layers attend as full causal attention within
        a chunk, and the data-based commands run no sequence longer than one (module docstring)."""
        types = config.get("layer_types")
        if types:
            if not isinstance(types, list) or len(types) != n_layers or not all(isinstance(t, str) for t in types):
                raise LoadError(f"{where}: config key 'layer_types' = {types!r} is not one layer type name per layer "
                                f"({n_layers})")
            unknown = sorted(set(types) - set(_TYPES))
            if unknown:
                raise UnsupportedModelError(f"{where}: layer_types {unknown} are not supported (supported: "
                                            f"{', '.join(_TYPES)})")
        return ["full_attention"] * n_layers

    @classmethod
    def _chunk(cls, config: dict, where: str) -> int | None:
        """The chunk size where some layer attends in chunks (transformers: the rotary layers, or as
        ``layer_types`` lists them), else None (``config`` as :func:`_config` leaves it, as below)."""
        if config.get("attention_chunk_size", CHUNK) is None:
            return None
        size = integer(config, where, "attention_chunk_size", default=CHUNK)
        types = config.get("layer_types")
        if types:
            return size if "chunked_attention" in types else None
        n = integer(config, where, "num_hidden_layers")
        return size if any(rope_layers(config, n, where)) else None

    @classmethod
    def _exact(cls, config: dict, where: str) -> int | None:
        """The first position the NoPE layers' query temperature changes (``floor_scale − 1``), where
        it is on and some layer has no rotary, else None."""
        if not config.get("attn_temperature_tuning", True):
            return None
        n = integer(config, where, "num_hidden_layers")
        if all(rope_layers(config, n, where)):
            return None
        return integer(config, where, "floor_scale", default=8192, low=2) - 1

    @classmethod
    def exact_context(cls, config: dict, where: str = "config") -> int | None:
        """The longest sequence on which the model computes what is read: one chunk of the chunked
        layers, and the ``floor_scale − 1`` positions before the NoPE layers' temperature turns on."""
        config = _config(config)
        return min((n for n in (cls._chunk(config, where), cls._exact(config, where)) if n is not None), default=None)
