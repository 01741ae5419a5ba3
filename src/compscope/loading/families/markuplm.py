"""MarkupLM (Microsoft's model of web pages) on words alone: RoBERTa's layout under ``markuplm.``, and an XPath
embedding added to each token: per depth ``i < max_depth`` a row of a tag table and one of a subscript table for
the token's XPath, concatenated, summed, and passed through ``inner2emb(relu(xpath_unitseq2_inner(·)))``. Without
XPaths, as compscope runs it (transformers' default), every depth holds the pad tag (``tag_pad_id``) and pad
subscript (``subs_pad_id``): every token adds the same vector, computed here in float64 from those rows and kept
as ``embed_extra['W_xpath']`` ``(d_model, 1)``. The heads do not depend on the XPaths.
"""

from __future__ import annotations

import torch

from ...errors import LoadError
from . import register
from .base import integer
from .bert import Roberta


@register
class MarkupLM(Roberta):
    name = "markuplm"
    about = "MarkupLM on words alone: RoBERTa's layout, every token's XPath the pad one (one vector added)"
    model_types = ("markuplm",)
    architectures = ("MarkupLMModel", "MarkupLMForQuestionAnswering", "MarkupLMForTokenClassification",
                     "MarkupLMForSequenceClassification")
    handled = Roberta.handled | frozenset(
        "max_depth tag_pad_id subs_pad_id xpath_unit_hidden_size max_xpath_tag_unit_embeddings "
        "max_xpath_subs_unit_embeddings".split())
    hf_base = "markuplm"

    @classmethod
    def embedding_extras(cls, config: dict, where: str, ts, e: str, d: int) -> tuple[dict[str, torch.Tensor], list[str]]:
        extra, notes = super().embedding_extras(config, where, ts, e, d)
        depth = integer(config, where, "max_depth", default=50, low=1)
        pads = {"tag": integer(config, where, "tag_pad_id", default=216, low=0),
                "subs": integer(config, where, "subs_pad_id", default=1001, low=0)}
        x = e + "xpath_embeddings."
        parts = []
        for kind, pad in pads.items():
            rows = []
            for i in range(depth):
                name = f"{x}xpath_{kind}_sub_embeddings.{i}.weight"
                t = ts.take(name)
                if t.ndim != 2 or t.shape[0] <= pad:
                    raise LoadError(f"{ts.origin(name)}: tensor '{name}' has shape {tuple(t.shape)}: its pad row "
                                    f"{kind}_pad_id = {pad} is not in it")
                rows.append(t[pad].double())
            parts.append(torch.cat(rows))
        unit = parts[0] + parts[1]
        inner_w = ts.take(x + "xpath_unitseq2_inner.weight", (4 * d, unit.shape[0])).double()
        inner_b = ts.take(x + "xpath_unitseq2_inner.bias", (4 * d,)).double()
        out_w = ts.take(x + "inner2emb.weight", (d, 4 * d)).double()
        out_b = ts.take(x + "inner2emb.bias", (d,)).double()
        extra["W_xpath"] = (out_w @ torch.relu(inner_w @ unit + inner_b) + out_b).float()[:, None]
        return extra, notes + ["words alone: every token's XPath is the pad one at every depth, so each adds the same "
                               "vector of the XPath embedding (embed_extra['W_xpath']); XPaths change no head"]
