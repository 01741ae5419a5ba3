"""ESM-2 (Meta's protein language models, and the encoders fine-tuned from them): pre-LN layers
under BERT's names, rotary positions, a LayerNorm after the last layer.

Each layer's heads read ``attention.LayerNorm`` of the residual and ``attention.output.dense``
adds to it; ``encoder.emb_layer_norm_after`` is the final norm. No position table: queries (scaled
by ``d_head^-1/2`` first) and keys turn by the rotary map on all of each head, in the rotate-half
layout, at base 10000. With ``token_dropout`` on (ESM-2's configs), the model zeroes the mask
token's embedding and multiplies every embedding by ``(1 − 0.15 · 0.8) / (1 − m)``, ``m`` the share
of mask tokens in the sequence: ``W_E`` is the word embeddings times 0.88 with the mask token's
column zero, what a sequence without mask tokens starts from (the data runner's random sequences
leave the mask token out). The masked-LM head (a dense layer, GELU and a LayerNorm before the
decoder) is no linear unembedding: ``W_U`` is None. ESM-1b and ESM-1v (learned positions under a
LayerNorm of the summed embeddings) and ESMFold are refused with their reasons.
"""

from __future__ import annotations

import torch

from ...core.heads import Rotary
from ...errors import UnsupportedModelError
from . import register
from .base import MAX_WIDTH, inv_freq, integer
from .bert import XlmRobertaXl

#: the share of tokens ESM's training masked (its code's constant): embeddings are scaled by 1 minus it
MASK_RATIO_TRAIN = 0.15 * 0.8


@register
class Esm(XlmRobertaXl):
    name = "esm"
    about = "ESM-2 protein language models: pre-LN encoder, rotary, token dropout's embedding scale"
    model_types = ("esm",)
    architectures = ("EsmModel", "EsmForMaskedLM", "EsmForSequenceClassification", "EsmForTokenClassification")
    handled = frozenset("hidden_size num_attention_heads num_hidden_layers layer_norm_eps position_embedding_type "
                        "emb_layer_norm_before token_dropout mask_token_id".split())
    ignored = frozenset({"vocab_list", "esmfold_config"})  # (a folding model's: refused by is_folding_model)
    accept = {
        "rope_theta": lambda v: v in (None, 10000, 10000.0),  # transformers 4 turns at 10000 whatever the config says
        "add_cross_attention": lambda v: not v,
        "is_decoder": lambda v: not v,
    }
    hf_base = "esm"
    pre_norm = "attention.LayerNorm"
    last_norm = "encoder.emb_layer_norm_after"

    @classmethod
    def check_config(cls, config: dict, where: str) -> None:
        if config.get("is_folding_model"):
            raise UnsupportedModelError(f"{where}: is_folding_model is set: ESMFold's folding trunk is no stack of "
                                        "attention heads on one residual stream (its ESM-2 language model is read "
                                        "from that model's own folder)")
        kind = config.get("position_embedding_type", "absolute")
        if kind != "rotary" or config.get("emb_layer_norm_before"):
            raise UnsupportedModelError(
                f"{where}: position_embedding_type {kind!r}, emb_layer_norm_before "
                f"{config.get('emb_layer_norm_before')!r}: compscope reads ESM-2's rotary positions without a "
                "LayerNorm on the embeddings; ESM-1b's and ESM-1v's LayerNorm over the sum of token and position "
                "embeddings starts the residual as no sum of a token column and a position column")
        super().check_config(config, where)

    @classmethod
    def token_embeddings(cls, config: dict, where: str, wte: torch.Tensor) -> tuple[torch.Tensor, list[str]]:
        """The word embeddings; with ``token_dropout``, times ``1 − 0.12`` and the mask token's zero."""
        if not config.get("token_dropout"):
            return wte.T, []
        mask = integer(config, where, "mask_token_id", low=0, high=MAX_WIDTH)
        if mask >= wte.shape[0]:
            raise UnsupportedModelError(f"{where}: config key 'mask_token_id' = {mask} is past the {wte.shape[0]} "
                                        "word embeddings")
        W_E = wte.T * (1 - MASK_RATIO_TRAIN)
        W_E[:, mask] = 0.0
        return W_E, [f"token dropout: W_E is the word embeddings times {1 - MASK_RATIO_TRAIN:g} with the mask token's "
                     f"column ({mask}) zero, as the model starts a sequence without mask tokens (each mask token in "
                     "a sequence rescales all its embeddings)"]

    @classmethod
    def positional(cls, config: dict, where: str, ts, e: str, d_head: int, n_layers: int) -> tuple[dict, list[str]]:
        """Rotary on all of each head, rotate-half, base 10000; no position table."""
        f = inv_freq(d_head, {"rope_theta": 10000.0}, where)
        return dict(W_pos=None, rotary=Rotary(d_head, f.expand(n_layers, -1).clone()), positions="rotary"), [
            "rotary positions on every head dimension (base 10000), no position table"]
