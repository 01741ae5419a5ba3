"""SqueezeBERT: BERT's post-LN layers (positions from 0, token types) in which every linear map is a 1x1
convolution over channels-first activations ``(batch, d_model, seq)``, grouped: ``q_groups`` (``k_groups``,
``v_groups``, ``post_attention_groups``) blocks of channels, each mapped by its own block, so that the map is
block-diagonal. Each is read as its dense ``(d, d)`` matrix, zeros off the blocks. The running model keeps its
residual channels-first: the data runner turns what it hooks and what it adds (``Family.channels_first``).
"""

from __future__ import annotations

import torch

from ...errors import LoadError
from . import register
from .bert import Bert, embeddings_as_wide


def grouped_1x1(w: torch.Tensor, name: str, d: int, origin: str) -> torch.Tensor:
    """A grouped 1x1 convolution's weight ``(d, d / g, 1)`` as its dense ``(d, d)`` matrix: output channels
    ``[k d/g, (k + 1) d/g)`` read input channels ``[k d/g, (k + 1) d/g)`` through block ``k``."""
    if w.ndim != 3 or w.shape[0] != d or w.shape[2] != 1 or w.shape[1] < 1 or d % w.shape[1]:
        raise LoadError(f"{origin}: tensor '{name}' has shape {tuple(w.shape)}: expected a grouped 1x1 convolution "
                        f"({d}, {d} / groups, 1)")
    return torch.block_diag(*w[:, :, 0].split(w.shape[1]))


@register
class SqueezeBert(Bert):
    name = "squeezebert"
    about = "SqueezeBERT: BERT's post-LN layers as grouped 1x1 convolutions over channels-first activations"
    model_types = ("squeezebert",)
    architectures = ("SqueezeBertModel", "SqueezeBertForMaskedLM", "SqueezeBertForSequenceClassification",
                     "SqueezeBertForTokenClassification", "SqueezeBertForQuestionAnswering",
                     "SqueezeBertForMultipleChoice")
    # (the groups are read from the weights' shapes; the MLP's are not attention's)
    handled = Bert.handled | frozenset("q_groups k_groups v_groups post_attention_groups embedding_size".split())
    ignored = frozenset({"intermediate_groups", "output_groups"})
    hf_base = "transformer"
    layers_at = "encoder.layers"
    projections = ("attention.query", "attention.key", "attention.value", "post_attention.conv1d")
    output_norm = "output.layernorm"
    channels_first = True
    layers_are_modules = False  # (each layer returns a dict, which a left-out layer's stand-in would have to build)

    @classmethod
    def check_config(cls, config: dict, where: str) -> None:
        super().check_config(config, where)
        embeddings_as_wide(config, where, " (transformers' SqueezeBERT builds no projection between them)")

    @classmethod
    def weight(cls, ts, name: str, d: int) -> torch.Tensor:
        return grouped_1x1(ts.take(name + ".weight"), name + ".weight", d, ts.origin(name + ".weight"))

    @classmethod
    def hook_points(cls, model):
        """SqueezeBERT layers (post-LN, channels-first): ``attention`` reads the residual, ``post_attention.conv1d``
        returns what is added (before dropout, the residual and ``post_attention.layernorm``)."""
        return [(b.attention, b.post_attention.conv1d) for b in cls.blocks(model)]

    @classmethod
    def post_norm_points(cls, model):
        """``LN(h + Attn(h))`` is ``post_attention.layernorm``, ``LN(m + MLP(m))`` is ``output.layernorm``, both
        over the channels of channels-first activations."""
        return [(b.post_attention.layernorm, b.output.layernorm) for b in cls.blocks(model)]
