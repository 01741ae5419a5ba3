"""UltraBERT: Llama's layers as an encoder (RMSNorm before each attention and at the end, rotary
positions, grouped K/V heads), with local and global layers.

A local ("sliding_attention") layer's query sees the keys within ``sliding_window`` tokens on
either side, ``|i − j| ≤ sliding_window`` (held as the window ``sliding_window + 1``); a global one
sees every key. Each layer type turns at its own rotary base. Where a config lists no layer types,
every third layer (the 3rd, 6th, ...) is global, as transformers builds the model; configs saved
before transformers had the model state one window per layer (``attention_windows``, 0 for a
global layer) and one rotary base per layer (a list under ``rope_theta``), which are read as
transformers reads them: the first non-zero window for every local layer, the last base listed
for each layer type. As for every encoder, no unembedding is read (``W_U`` is None).
"""

from __future__ import annotations

import dataclasses

from ...core.heads import HeadWeights
from ...errors import LoadError
from ..checkpoint import Checkpoint
from . import register
from .base import MAX_WIDTH, integer
from .eurobert import EuroBert
from .llama import LlamaLike, LlamaLikeOptions, convert_llamalike, listed_layer_types

#: transformers' defaults: the local window's radius, and each layer type's rotary base
ULTRABERT_WINDOW = 128
ULTRABERT_THETA = {"sliding_attention": 10_000.0, "full_attention": 2_560_000.0}


@register
class UltraBert(EuroBert):
    name = "ultrabert"
    about = "UltraBERT: Llama's layers as an encoder, local (both-sided window) and global layers, a base per type"
    model_types = ("ultrabert",)
    architectures = ("UltrabertModel", "UltrabertForMaskedLM", "UltrabertForSequenceClassification",
                     "UltrabertForTokenClassification", "UltrabertForQuestionAnswering")
    handled = LlamaLike.handled - {"max_window_layers", "use_sliding_window"} | {"attention_windows"}
    ignored = EuroBert.ignored | {"prediction_head_size", "classifier_dropout"}  # (the heads on top: not attention)
    options = LlamaLikeOptions(bidirectional=True, radius="whole")

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        """As listed; else from the released ``attention_windows`` (0: global); else every third
        layer global."""
        config = cls.as_transformers_reads(config, n_layers, where)
        return listed_layer_types(config, n_layers, where)

    @classmethod
    def as_transformers_reads(cls, config: dict, n_layers: int, where: str) -> dict:
        """``config`` with its layer types, window and per-type rotary bases stated, as transformers'
        config class fills them in from older keys or its defaults."""
        out = dict(config)
        windows = out.pop("attention_windows", None)
        if windows is not None:
            if (not isinstance(windows, list) or len(windows) != n_layers
                    or any(isinstance(w, bool) or not isinstance(w, int) or w < 0 for w in windows)):
                raise LoadError(f"{where}: config key 'attention_windows' = {windows!r} is not one window size (0: "
                                f"global) per layer ({n_layers})")
            out["sliding_window"] = next((w for w in windows if w), out.get("sliding_window", ULTRABERT_WINDOW))
            if not out.get("layer_types"):
                out["layer_types"] = ["sliding_attention" if w else "full_attention" for w in windows]
        out.setdefault("sliding_window", ULTRABERT_WINDOW)
        if out["sliding_window"] is not None:
            integer(out, where, "sliding_window", high=MAX_WIDTH)
        if not out.get("layer_types"):
            out["layer_types"] = ["sliding_attention" if (i + 1) % 3 else "full_attention" for i in range(n_layers)]
        thetas = out.pop("rope_theta", None)
        if isinstance(thetas, list) and out.get("rope_parameters") is None:
            if len(thetas) != len(out["layer_types"]):
                raise LoadError(f"{where}: config key 'rope_theta' lists {len(thetas)} bases for {n_layers} layers")
            out["rope_parameters"] = {t: {"rope_type": "default", "rope_theta": theta}
                                      for t, theta in zip(out["layer_types"], thetas)}
        elif thetas is not None:
            out["rope_theta"] = thetas
        if out.get("rope_parameters") is None and "rope_theta" not in out:
            out["rope_parameters"] = {t: {"rope_type": "default", "rope_theta": theta}
                                      for t, theta in ULTRABERT_THETA.items()}
        return out

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        n_layers = integer(ckpt.config, ckpt.source, "num_hidden_layers")
        config = cls.as_transformers_reads(ckpt.config, n_layers, ckpt.source)
        return convert_llamalike(dataclasses.replace(ckpt, config=config), cls, cls.options)
