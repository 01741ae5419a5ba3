"""DeBERTa, DeBERTa-v2 and -v3 (Microsoft; mDeBERTa-v3): BERT's post-LN encoder layers with disentangled attention.

Each layer's logit of query ``i`` and key ``j`` is the content term plus, for ``pos_att_type``'s
``c2p`` and ``p2c``, the query against a position key and the key against a position query:

    ℓ_ij = (q_i · k_j + q_i · pos_K[ρ(i − j)] + k_j · pos_Q[ρ(i − j)]) / √(d_head · (1 + #terms))

where ``pos_K`` and ``pos_Q`` are the layer's own key and query projections (biases included) of
the relative-position embeddings ``encoder.rel_embeddings`` (after ``encoder.LayerNorm`` where
``norm_rel_ebd`` says ``layer_norm``), or its ``pos_key_proj`` / ``pos_query_proj`` where
``share_att_key`` is off, and ``ρ`` maps an offset to its row, in ``position_buckets`` log-spaced
buckets each side (:func:`compscope.core.attention.relative_index`). No position enters the
residual: compscope holds the position queries and keys themselves (``HeadWeights.pos_Q``,
``pos_K``), and ``W_Q``, ``W_K`` are the content-to-content part that Q- and K-composition score.
Without ``relative_attention`` the model is BERT's with the scale above (learned positions where
``position_biased_input``). The residual starts as the embeddings' LayerNorm of the token's
embedding (plus its type's); a convolution beside the first layer (``conv_kernel_size``: the
DeBERTa-v2 xlarge and xxlarge models) is refused by name. DeBERTa (v1, :class:`Deberta`) fuses its
projections and takes its position keys and queries from projections of their own, without buckets.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ...errors import LoadError, UnsupportedModelError
from . import register
from .base import MAX_WIDTH, integer, number
from .bert import Bert

#: the terms ``pos_att_type`` may list (DeBERTa-v2's attention computes these two)
TERMS = ("c2p", "p2c")


def _listed(value) -> list[str]:
    """``pos_att_type`` or ``norm_rel_ebd`` as the config class reads it: a list, or ``'a|b'``."""
    if value is None:
        return []
    items = value.split("|") if isinstance(value, str) else value
    return [str(x).strip().lower() for x in items] if isinstance(items, (list, tuple)) else [repr(value)]


@register
class DebertaV2(Bert):
    name = "deberta_v2"
    about = "DeBERTa-v2, DeBERTa-v3, mDeBERTa-v3: post-LN, disentangled attention (relative-position queries and keys)"
    model_types = ("deberta-v2",)
    architectures = ("DebertaV2Model", "DebertaV2ForMaskedLM", "DebertaV2ForSequenceClassification",
                     "DebertaV2ForTokenClassification", "DebertaV2ForQuestionAnswering", "DebertaV2ForMultipleChoice")
    handled = Bert.handled | frozenset(
        "relative_attention position_buckets max_relative_positions pos_att_type share_att_key norm_rel_ebd "
        "position_biased_input embedding_size attention_head_size".split())
    # the MLM head's layout (legacy), the pooler of the classification heads, and a convolution's settings (refused)
    ignored = frozenset("legacy pooler_hidden_size pooler_dropout pooler_hidden_act conv_act conv_groups".split())
    accept = {"conv_kernel_size": lambda v: not v}

    hf_base = "deberta"
    projections = ("attention.self.query_proj", "attention.self.key_proj", "attention.self.value_proj",
                   "attention.output.dense")

    @classmethod
    def sizes_and_eps(cls, config: dict, where: str) -> tuple[int, int, int, int, float]:
        d, H, L, r, _ = super().sizes_and_eps(config, where)
        for key, expected in (("embedding_size", d), ("attention_head_size", r)):
            if config.get(key) not in (None, expected):
                raise UnsupportedModelError(
                    f"{where}: config key '{key}' = {config[key]!r}: compscope reads DeBERTa with {key} "
                    f"{expected} (hidden_size, and hidden_size / num_attention_heads), as released")
        return d, H, L, r, number(config, where, "layer_norm_eps", default=1e-7)

    @classmethod
    def terms(cls, config: dict, where: str) -> list[str]:
        """The position terms ``pos_att_type`` names (each scales every logit down: ``1 + len`` in the root)."""
        terms = _listed(config.get("pos_att_type"))
        bad = [t for t in terms if t not in TERMS]
        if bad or len(set(terms)) != len(terms):
            raise UnsupportedModelError(f"{where}: config key 'pos_att_type' = {config.get('pos_att_type')!r}: "
                                        f"expected some of {', '.join(TERMS)}, each once")
        return terms

    @classmethod
    def positional(cls, config: dict, where: str, ts, e: str, d_head: int, n_layers: int) -> tuple[dict, list[str]]:
        terms = cls.terms(config, where)
        scale = (d_head * (1 + len(terms))) ** -0.5
        said = f"logit scale 1/sqrt(d_head x {1 + len(terms)}): one for the content and each position term"
        absolute = config.get("position_biased_input", True)
        if not config.get("relative_attention") or not terms:
            none = ["no positions: none learned (position_biased_input off) and no position terms (relative_attention "
                    "off, or pos_att_type empty)"]
            fields, notes = super().positional(config, where, ts, e, d_head, n_layers) if absolute else (
                dict(W_pos=None, positions="none"), none)
            return {**fields, "attn_scale": scale}, notes + [said]
        if absolute:
            raise UnsupportedModelError(
                f"{where}: config keys 'position_biased_input' and 'relative_attention' both on: learned absolute and "
                "relative positions together, which compscope does not hold (DeBERTa-v2 and -v3 are released with "
                "position_biased_input false)")
        prefix, d = e[: -len("embeddings.")], integer(config, where, "hidden_size")
        rel, buckets, how = cls.relative_table(config, where, ts, prefix, d)  # (2k, d) float64: offsets -k .. k-1
        fields = dict(W_pos=None, positions="relative", attn_scale=scale, rel_buckets=buckets)
        for term, field in (("c2p", "pos_K"), ("p2c", "pos_Q")):
            if term in terms:
                fields[field] = torch.stack([  # (layer, head, 2k, d_head)
                    cls.position_projection(config, ts, f"{prefix}{cls.layers_at}.{i}.", term, d)(rel)
                    .reshape(len(rel), -1, d_head).transpose(0, 1) for i in range(n_layers)]).float()
        which = " and ".join({"c2p": "content-to-position (q_i . pos_K)", "p2c": "position-to-content (k_j . pos_Q)"}[t]
                             for t in TERMS if t in terms)
        return fields, [f"disentangled attention: each logit adds {which} terms at the offset i - j, {how}; W_Q and "
                        "W_K (Q-/K-composition) are the content-to-content part", said]

    @classmethod
    def relative_table(cls, config: dict, where: str, ts, prefix: str, d: int) -> tuple[torch.Tensor, tuple, str]:
        """The relative-position embeddings ``(2k, d)`` (float64) as the layers project them, ``rel_buckets``, and
        in words where the position queries and keys come from: ``encoder.rel_embeddings`` (``position_buckets``
        rows each side, else ``max_relative_positions``), after ``encoder.LayerNorm`` where ``norm_rel_ebd`` says."""
        buckets = config.get("position_buckets", -1)
        top = cls.max_relative(config, where)
        if not isinstance(buckets, int) or isinstance(buckets, bool) or buckets > MAX_WIDTH:
            raise LoadError(f"{where}: config key 'position_buckets' = {buckets!r}: expected an integer (-1: none)")
        if buckets > 0 and (buckets < 2 or top - 1 <= buckets // 2):
            raise UnsupportedModelError(f"{where}: config keys 'position_buckets' = {buckets} and "
                                        f"'max_relative_positions' = {top}: log-spaced buckets need at least 2 buckets "
                                        "and a max position above half the buckets plus one")
        span = buckets if buckets > 0 else top
        rel = ts.take(prefix + "encoder.rel_embeddings.weight", (2 * span, d)).double()
        normed = "layer_norm" in _listed(config.get("norm_rel_ebd", "none"))
        if normed:
            eps = number(config, where, "layer_norm_eps", default=1e-7)
            rel = torch.nn.functional.layer_norm(rel, (d,), ts.take(prefix + "encoder.LayerNorm.weight", (d,)).double(),
                                                 ts.take(prefix + "encoder.LayerNorm.bias", (d,)).double(), eps)
        shared = config.get("share_att_key", False)
        return rel, (buckets, top) if buckets > 0 else (0, 0), (
            f"from the relative-position embeddings{' (LayerNorm-ed)' if normed else ''} through the layer's "
            f"{'own query and key' if shared else 'position'} projections")

    @classmethod
    def max_relative(cls, config: dict, where: str) -> int:
        """``max_relative_positions``, or ``max_position_embeddings`` where it is below 1 (the default, -1)."""
        top = config.get("max_relative_positions", -1)
        if not isinstance(top, int) or isinstance(top, bool) or top > MAX_WIDTH:
            raise LoadError(f"{where}: config key 'max_relative_positions' = {top!r}: expected an integer (-1: the "
                            "default)")
        return top if top >= 1 else integer(config, where, "max_position_embeddings", default=512)

    @classmethod
    def position_projection(cls, config: dict, ts, p: str, term: str, d: int) -> Callable[[torch.Tensor], torch.Tensor]:
        """The map ``(rows, d) -> (rows, H d_head)`` (float64) of the layer whose tensors start ``p`` that makes the
        position keys (``term`` c2p) or queries (p2c): its own key or query projection where ``share_att_key``,
        else ``pos_key_proj`` / ``pos_query_proj``, each with its bias."""
        own = {"c2p": "attention.self.pos_key_proj", "p2c": "attention.self.pos_query_proj"}
        name = p + (cls.projections[1 if term == "c2p" else 0] if config.get("share_att_key", False) else own[term])
        w, b = ts.take(name + ".weight", (d, d)).double(), ts.take(name + ".bias", (d,)).double()
        return lambda rel: rel @ w.T + b


@register
class Deberta(DebertaV2):
    """DeBERTa (v1): DeBERTa-v2's attention with a fused ``in_proj`` (rows per head ``[q | k | v]``, no bias) beside
    a query and a value bias (``q_bias``, ``v_bias``; no key bias), position keys from ``pos_proj`` (no bias) and
    queries from ``pos_q_proj``, no buckets; optional talking heads (logits mixed across heads) refused."""

    name = "deberta"
    about = "DeBERTa (v1): post-LN, disentangled attention, a fused in_proj with query and value biases"
    model_types = ("deberta",)
    architectures = ("DebertaModel", "DebertaForMaskedLM", "DebertaForSequenceClassification",
                     "DebertaForTokenClassification", "DebertaForQuestionAnswering")
    handled = Bert.handled | frozenset(
        "relative_attention max_relative_positions pos_att_type position_biased_input embedding_size".split())
    ignored = frozenset("legacy pooler_hidden_size pooler_dropout pooler_hidden_act".split())
    accept = {"talking_head": lambda v: not v}

    @classmethod
    def layer_projections(cls, ts, p: str, d: int, H: int, r: int) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
        w = ts.take(p + "attention.self.in_proj.weight", (3 * d, d)).reshape(H, 3, r, d)
        q_bias, v_bias = (ts.take(p + f"attention.self.{b}_bias", (d,)).reshape(H, r) for b in "qv")
        return [(w[:, 0], q_bias), (w[:, 1], None), (w[:, 2], v_bias)]

    @classmethod
    def relative_table(cls, config: dict, where: str, ts, prefix: str, d: int) -> tuple[torch.Tensor, tuple, str]:
        """``encoder.rel_embeddings`` as stored, ``max_relative_positions`` rows each side, no buckets (the model
        takes the rows of a sequence's offsets around the middle: the same rows)."""
        top = cls.max_relative(config, where)
        return (ts.take(prefix + "encoder.rel_embeddings.weight", (2 * top, d)).double(), (0, 0),
                "from the relative-position embeddings through the layer's pos_proj (keys) and pos_q_proj (queries)")

    @classmethod
    def position_projection(cls, config: dict, ts, p: str, term: str, d: int) -> Callable[[torch.Tensor], torch.Tensor]:
        """``pos_proj`` (no bias) for the position keys, ``pos_q_proj`` (with its bias) for the queries."""
        name = p + ("attention.self.pos_proj" if term == "c2p" else "attention.self.pos_q_proj")
        w = ts.take(name + ".weight", (d, d)).double()
        b = None if term == "c2p" else ts.take(name + ".bias", (d,)).double()
        return lambda rel: rel @ w.T if b is None else rel @ w.T + b
