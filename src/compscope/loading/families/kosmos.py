"""Kosmos-2.5's language model (``kosmos_2_5_text_model``; Microsoft's document-reading model): a pre-LN decoder in
XGLM's layout (``self_attn_layer_norm`` before each attention, ``layer_norm`` after the last layer, q/k/v and output
projections with biases), token embeddings times ``sqrt(embed_dim)`` (``scale_embedding``), every LayerNorm at the
config's ``layer_norm_eps``. Positions are M2M100's tensor2tensor sinusoids, which the model computes rather than
stores, position ``p`` at the table's row ``p + pad_token_id + 1``; to every position the model adds row 0 of its
segment embedding (row 1 marks image embeddings, which text never holds), held in ``W_pos`` with them. Read from the
text model's own folder (``model.``) or the whole model's (``text_model.model.``; the vision encoder not read).
"""

from __future__ import annotations

import torch

from ...errors import UnsupportedModelError
from . import register
from .base import number, sinusoids_after_pad, sizes
from .opt import Xglm


@register
class Kosmos25Text(Xglm):
    name = "kosmos_2_5_text"
    about = ("Kosmos-2.5's language model: XGLM's layout, embeddings times sqrt(d), sinusoidal positions from row "
             "pad_token_id + 1 and a segment embedding")
    model_types = ("kosmos_2_5_text_model",)
    architectures = ("Kosmos2_5TextForCausalLM", "Kosmos2_5TextModel")
    handled = frozenset("embed_dim attention_heads layers scale_embedding max_position_embeddings layer_norm_eps "
                        "pad_token_id".split())
    ignored = frozenset("ffn_dim dropout layerdrop init_std activation_dropout activation_function".split())
    accept = {}
    prefixes = ("text_model.model.", "model.", "")
    heads = ("text_model.lm_head.weight", "lm_head.weight")
    runs_as_named = True  # (no auto class builds the text model alone: the class its folder names)

    @classmethod
    def sizes(cls, config: dict, where: str) -> tuple[int, int, int, int]:
        return sizes(config, where, width=("embed_dim",), heads=("attention_heads",), layers=("layers",))

    @classmethod
    def base_model(cls, model):
        """The decoder: ``model.text_model.model`` of the whole model, ``model.model`` of the text model."""
        text = getattr(model, "text_model", model)
        return getattr(text, "model", text)

    @classmethod
    def layer_norm_eps(cls, config: dict, where: str) -> float:
        return number(config, where, "layer_norm_eps", default=1e-5, open_low=True)

    @classmethod
    def position_table(cls, ts, prefix: str, config: dict, where: str, d: int) -> tuple[torch.Tensor, str]:
        """The sinusoids from row ``pad_token_id + 1``, ``max_position_embeddings`` of them, plus segment row 0."""
        table, said = sinusoids_after_pad(config, where, d, "embed_dim", "Kosmos-2.5", 4096)
        segment = ts.take(prefix + "segment_emb.weight")
        if segment.ndim != 2 or segment.shape[0] < 1 or segment.shape[1] != d:
            raise UnsupportedModelError(f"{ts.origin(prefix + 'segment_emb.weight')}: segment_emb has shape "
                                        f"{tuple(segment.shape)}, expected (2, {d})")
        return table + segment[0][:, None], (f"{said}, each plus row 0 of the segment embedding (the text segment's), "
                                              "as the model adds it to every position")
