"""EuroBERT: Llama's layers as an encoder (every query attends to every key), RMSNorm before each
attention and at the end, rotary positions, grouped K/V heads where ``num_key_value_heads`` says.

The masked-LM head is one linear map of the final norm's output, but as for every encoder compscope
reads no unembedding (``W_U`` is None). EuroBERT has no sliding window: its bidirectional mask
takes none, so a config that states one is refused rather than read as a window the model does
not apply.
"""

from __future__ import annotations

from ...core.heads import HeadWeights
from ..checkpoint import Checkpoint
from . import register
from .llama import WINDOW_KEYS, Llama, LlamaLike, LlamaLikeOptions, convert_llamalike


@register
class EuroBert(LlamaLike):
    name = "eurobert"
    about = "EuroBERT: Llama's layers as an encoder (bidirectional, rotary, RMSNorm)"
    model_types = ("eurobert",)
    architectures = ("EuroBertModel", "EuroBertForMaskedLM", "EuroBertForSequenceClassification",
                     "EuroBertForTokenClassification")
    handled = Llama.handled - WINDOW_KEYS
    ignored = LlamaLike.ignored | {"mask_token_id", "classifier_pooling", "clf_pooling"}  # (the heads on top: not attention)
    accept = {**LlamaLike.accept, "is_decoder": lambda v: not v}
    options = LlamaLikeOptions(bidirectional=True)

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        """Every layer attends over the whole sequence."""
        return ["full_attention"] * n_layers

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        return convert_llamalike(ckpt, cls, cls.options)
