"""BROS (NAVER Clova's document encoder) on words alone: BERT's post-LN layers and embeddings under ``bros.``, beside
a bias on every logit from the pair's box offset, ``q_i · P(box_i − box_j)`` (``P``: sinusoids of the offset's eight
coordinates, projected to ``d_head``, one projection for every head and layer). transformers requires boxes; compscope
runs it with every box ``(0, 0, 0, 0)`` (``Family.run_inputs``), where the offset of every pair is 0 and the bias is
``q_i · P(0)``, one value per query, which the softmax removes: the heads are BERT's, the box projection not read.
"""

from __future__ import annotations

import torch

from . import register
from .bert import Bert


@register
class Bros(Bert):
    name = "bros"
    about = "BROS on words alone: BERT's layout, every token's box (0, 0, 0, 0), whose logit bias the softmax removes"
    model_types = ("bros",)
    architectures = ("BrosModel", "BrosForTokenClassification", "BrosSpadeEEForTokenClassification",
                     "BrosSpadeELForTokenClassification")
    # (the boxes' sinusoids and their projection, and the relation heads: not read)
    ignored = frozenset("dim_bbox bbox_scale n_relations dim_bbox_sinusoid_emb_2d dim_bbox_sinusoid_emb_1d "
                        "dim_bbox_projection classifier_dropout_prob".split())
    hf_base = "bros"

    @classmethod
    def run_inputs(cls, tokens: torch.Tensor) -> dict[str, torch.Tensor]:
        """Every token's box ``(0, 0, 0, 0)``: ``bbox`` ``(batch, seq, 4)``, zeros."""
        return {"bbox": tokens.new_zeros((*tokens.shape, 4), dtype=torch.float32)}

    @classmethod
    def embedding_extras(cls, config: dict, where: str, ts, e: str, d: int) -> tuple[dict[str, torch.Tensor], list[str]]:
        extra, notes = super().embedding_extras(config, where, ts, e, d)
        return extra, notes + ["words alone: every token's box is (0, 0, 0, 0), so the boxes' bias on a logit is one "
                               "value per query, which the softmax removes; boxes change no head"]
