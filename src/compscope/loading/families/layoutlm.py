"""LayoutLM (v1) and LayoutLMv3 (Microsoft's document models) on words alone: BERT's and RoBERTa's layouts
beside 2-D position tables, each token adding rows for its box ``(x0, y0, x1, y1)``. compscope reads and runs them
as transformers does without ``bbox`` (and, for LayoutLMv3, without an image): every box ``(0, 0, 0, 0)``, so
every token adds the same vector of those tables, kept as ``embed_extra['W_box']`` ``(d_model, 1)``. The heads do
not depend on the boxes.
"""

from __future__ import annotations

import torch

from ...errors import LoadError, UnsupportedModelError
from . import register
from .base import integer
from .bert import Bert, Roberta


def _box_rows(ts, e: str, widths) -> dict[str, torch.Tensor]:
    """Row 0 (a coordinate or size of 0) of each 2-D position table ``{e}{a}_position_embeddings.weight`` for ``a``
    in ``xyhw``, each checked to be as wide as ``widths(x width, h width)`` says for it (``{a: width}``)."""
    tables = {a: ts.take(f"{e}{a}_position_embeddings.weight") for a in "xyhw"}
    want = widths(*(int(tables[a].shape[-1]) for a in "xh"))
    for a, t in tables.items():
        if t.ndim != 2 or t.shape[1] != want[a]:
            name = f"{e}{a}_position_embeddings.weight"
            raise LoadError(f"{ts.origin(name)}: tensor '{name}' has shape {tuple(t.shape)}: expected (positions, "
                            f"{want[a]})")
    return {a: t[0] for a, t in tables.items()}


@register
class LayoutLM(Bert):
    """LayoutLM (v1): BERT's layout under ``layoutlm.``, beside tables of 2-D positions that each token adds for
    its box ``(x0, y0, x1, y1)``: ``x[x0] + y[y0] + x[x1] + y[y1] + h[y1 − y0] + w[x1 − x0]``. On words alone, as
    compscope runs it (transformers' default without ``bbox``), every box is ``(0, 0, 0, 0)`` and every token adds
    the same vector ``2 x[0] + 2 y[0] + h[0] + w[0]``, kept as ``embed_extra['W_box']`` ``(d_model, 1)``; the heads
    are BERT's whatever the boxes."""

    name = "layoutlm"
    about = "LayoutLM (v1) on words alone: BERT's layout, every token's box (0, 0, 0, 0)"
    model_types = ("layoutlm",)
    architectures = ("LayoutLMModel", "LayoutLMForMaskedLM", "LayoutLMForTokenClassification",
                     "LayoutLMForSequenceClassification", "LayoutLMForQuestionAnswering")
    ignored = frozenset({"max_2d_position_embeddings"})  # (the box tables' rows: the boxes, not read)
    hf_base = "layoutlm"

    @classmethod
    def embedding_extras(cls, config: dict, where: str, ts, e: str, d: int) -> tuple[dict[str, torch.Tensor], list[str]]:
        extra, notes = super().embedding_extras(config, where, ts, e, d)
        rows = _box_rows(ts, e, lambda x, h: dict.fromkeys("xyhw", d))
        extra["W_box"] = (2 * rows["x"] + 2 * rows["y"] + rows["h"] + rows["w"])[:, None]
        return extra, notes + ["words alone: every token's box is (0, 0, 0, 0), so each adds the same vector of the "
                               "2-D position tables (embed_extra['W_box']); boxes change no head"]


@register
class LayoutLMv3(Roberta):
    """LayoutLMv3 on words alone: RoBERTa's layers and positions under ``layoutlmv3.``; each token's box rows
    concatenated, ``[x[x0], y[y0], x[x1], y[y1], h[y1 − y0], w[x1 − x0]]`` (``4 · coordinate_size + 2 · shape_size =
    d_model``), which for boxes of 0 is one vector (``embed_extra['W_box']``). With ``has_relative_attention_bias``
    a learned bias by the offset's bucket (T5's, both ways: ``rel_pos_bins`` up to ``max_rel_pos``), one table
    for every layer, and with ``has_spatial_attention_bias`` as well one by the boxes' x and y offsets, which for
    boxes of 0 is one value per head on every logit: both divided by ``√d_head`` and added after the logit scale,
    held as ``rel_bias``. No image: its patch embeddings are not read."""

    name = "layoutlmv3"
    about = ("LayoutLMv3 on words alone: RoBERTa's layers and positions, a learned bias by offset bucket, every box "
             "(0, 0, 0, 0), no image")
    model_types = ("layoutlmv3",)
    architectures = ("LayoutLMv3Model", "LayoutLMv3ForTokenClassification", "LayoutLMv3ForSequenceClassification",
                     "LayoutLMv3ForQuestionAnswering")
    handled = Roberta.handled | frozenset(
        "has_relative_attention_bias rel_pos_bins max_rel_pos has_spatial_attention_bias rel_2d_pos_bins "
        "max_rel_2d_pos coordinate_size shape_size".split())
    # (the box tables' rows, and the image's patches, not read)
    ignored = frozenset("max_2d_position_embeddings visual_embed input_size num_channels patch_size".split())
    accept = {**Roberta.accept, "text_embed": lambda v: v in (True, None)}
    hf_base = "layoutlmv3"

    @classmethod
    def embedding_extras(cls, config: dict, where: str, ts, e: str, d: int) -> tuple[dict[str, torch.Tensor], list[str]]:
        extra, notes = super().embedding_extras(config, where, ts, e, d)
        def widths(coordinate: int, shape: int) -> dict[str, int]:  # four coordinates and two sizes make d_model
            if 4 * coordinate + 2 * shape != d:
                raise LoadError(f"{ts.origin(e + 'x_position_embeddings.weight')}: the 2-D position tables are "
                                f"{coordinate} (x, y) and {shape} (h, w) wide: 4 x {coordinate} + 2 x {shape} is not "
                                f"d_model = {d}")
            return {"x": coordinate, "y": coordinate, "h": shape, "w": shape}

        rows = _box_rows(ts, e, widths)
        extra["W_box"] = torch.cat([rows["x"], rows["y"], rows["x"], rows["y"], rows["h"], rows["w"]])[:, None]
        return extra, notes + ["words alone, no image: every token's box is (0, 0, 0, 0), so each adds the same "
                               "vector of the 2-D position tables (embed_extra['W_box']); boxes change no head"]

    @classmethod
    def positional(cls, config: dict, where: str, ts, e: str, d_head: int, n_layers: int) -> tuple[dict, list[str]]:
        fields, notes = super().positional(config, where, ts, e, d_head, n_layers)
        if not config.get("has_relative_attention_bias", True):  # (transformers' default: on; the spatial bias
            return fields, notes  # is only used with it)
        heads = integer(config, where, "num_attention_heads")
        bins = integer(config, where, "rel_pos_bins", default=32)
        far = integer(config, where, "max_rel_pos", default=128)
        if bins % 4 or bins < 4 or far <= bins // 4:
            raise UnsupportedModelError(f"{where}: 'rel_pos_bins' = {bins}, 'max_rel_pos' = {far}: compscope reads "
                                        "T5's buckets, a multiple of 4 of them up to a distance beyond a quarter")
        encoder = e[: -len("embeddings.")] + "encoder."
        table = ts.take(f"{encoder}rel_pos_bias.weight", (heads, bins))  # (head, bucket)
        said = [f"a learned bias on the logits by the offset's bucket ({bins} buckets, both ways, up to {far}), one "
                "table for every layer, divided by sqrt(d_head) after the logit scale"]
        if config.get("has_spatial_attention_bias", True):  # boxes of 0: every x and y offset 0, bucket 0
            bins_2d = integer(config, where, "rel_2d_pos_bins", default=64)
            table = table + sum(ts.take(f"{encoder}rel_pos_{a}_bias.weight", (heads, bins_2d))[:, :1] for a in "xy")
            said.append("the spatial bias by the boxes' offsets, at boxes of 0 one value per head on every logit "
                        "(bucket 0 of its x and y tables), is in that table")
        return {**fields, "rel_bias": (table / d_head**0.5).expand(n_layers, *table.shape).contiguous(),
                "rel_bias_buckets": (bins, far)}, notes + said
