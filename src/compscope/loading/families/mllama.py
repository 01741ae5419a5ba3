"""Llama 3.2 Vision's language model (``mllama``; its ``text_config``, ``mllama_text_model``): Llama 3's layers, with
a cross-attention layer in place of a self-attention one at each index of ``cross_attention_layers`` (3, 8, 13, ...).

A cross-attention layer's queries read the residual, its keys and values the vision encoder's states (a second stream),
and it writes through tanh gates; on text alone transformers runs none of them (no image states: the layer, its MLP
too, is passed over). compscope reads the self-attention layers alone, in order (its layer ``k`` is the model's
``k``-th self-attention layer; the notes say which); with an image, the cross-attention layers are writers to the
residual beside the heads, as MLPs are, and not read.

The token embedding holds ``vocab_size + 8`` rows (the image token's among the 8 after the vocabulary, which the LM
head does not score): ``W_E`` is read over the vocabulary alone, the tokens ``W_U`` scores. Everything else is Llama
3's: pre-RMSNorm, GQA, no biases, rotary with Llama 3's scaling.
"""

from __future__ import annotations

import dataclasses

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights
from ...errors import UnsupportedModelError
from . import register
from .base import MAX_LAYERS, attending, integer, prefix_of
from .llama import PREFIXES, LlamaLike, attention_layer_hooks, convert_llamalike

#: rows transformers adds to the token embedding after the vocabulary (``MllamaTextModel``'s ``vocab_size + 8``)
EXTRA_ROWS = 8


@register
class MllamaText(LlamaLike):
    name = "mllama_text"
    about = ("Llama 3.2 Vision's language model: Llama 3's self-attention layers; its cross-attention layers (to the "
             "image, none run on text) not read")
    model_types = ("mllama_text_model",)
    architectures = ("MllamaForCausalLM",)
    handled = LlamaLike.handled | {"cross_attention_layers"}
    ignored = LlamaLike.ignored | {"dropout"}
    hook_points = attention_layer_hooks
    other_layers = "cross-attention layers, which attend to the image's states and run only with one"

    @classmethod
    def attention_layers(cls, config: dict, n_layers: int, where: str = "config") -> list[int]:
        """Every layer not listed in ``cross_attention_layers``."""
        cross = config.get("cross_attention_layers") or []
        if not isinstance(cross, list) or any(isinstance(i, bool) or not isinstance(i, int) for i in cross):
            raise UnsupportedModelError(f"{where}: config key 'cross_attention_layers' = {cross!r} is not a list of "
                                        "layer indices")
        for i in cross:
            integer({"cross_attention_layers": i}, where, "cross_attention_layers", low=0, high=min(n_layers - 1,
                                                                                                      MAX_LAYERS))
        return attending([i for i in range(n_layers) if i not in cross], n_layers, where, "a cross-attention layer")

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where, ts = ckpt.config, ckpt.source, ckpt.tensors
        cls.check_config(cfg, where)
        vocab = integer(cfg, where, "vocab_size")
        first = cls.attention_layers(cfg, integer(cfg, where, "num_hidden_layers", high=MAX_LAYERS), where)[0]
        prefix = prefix_of(ts, f"layers.{first}.self_attn.q_proj.weight", PREFIXES)
        name = None if prefix is None else f"{prefix}embed_tokens.weight"
        if name is not None and name in ts:  # the table's first vocab_size rows: the tokens the head scores
            def text_rows(name=name):
                table = ts.take(name)
                if table.ndim != 2 or table.shape[0] != vocab + EXTRA_ROWS:
                    raise UnsupportedModelError(f"{ts.origin(name)}: tensor '{name}' has shape {tuple(table.shape)}: "
                                                f"expected (vocab_size + {EXTRA_ROWS} = {vocab + EXTRA_ROWS}, "
                                                "d_model), "
                                                "as transformers builds Llama 3.2 Vision's embedding")
                return table[:vocab]
            ckpt = dataclasses.replace(ckpt, tensors=ts.derived({name: (text_rows, name)}))
        hw = convert_llamalike(ckpt, cls, cls.options)
        return hw.replace(note=f"W_E is the embedding of the {vocab} vocabulary tokens the LM head scores: the "
                               f"{EXTRA_ROWS} rows after them (the image token's among them) not read")
