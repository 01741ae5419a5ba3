"""MPNet (Microsoft; all-mpnet-base-v2 and the sentence encoders built on it): BERT's post-LN layers
under its own names (``attention.attn.q/k/v/o``, ``attention.LayerNorm``), RoBERTa's learned
positions (numbered from 2 whatever the config's pad token: its embeddings fix the padding index at
1), no token types, and a learned bias on every logit by the offset's bucket, one table
(``encoder.relative_attention_bias``: bucket x head) shared by all layers, added after the logit
scale: ``ℓ_ij = q_i·k_j / √d_head + B[h, β(i − j)]``, with T5's bidirectional buckets, 32 of them up
to a distance of 128, as transformers computes them whatever ``relative_attention_num_buckets`` says
(:func:`compscope.core.attention.bias_bucket`). The bias enters no residual: compscope holds it per
layer (``HeadWeights.rel_bias``) beside the weights.
"""

from __future__ import annotations

from ...errors import UnsupportedModelError
from . import register
from .base import integer
from .bert import Roberta

#: the buckets and the farthest distance transformers' MPNet computes its bias with (fixed in its code)
BUCKETS, MAX_DISTANCE = 32, 128


@register
class MPNet(Roberta):
    name = "mpnet"
    about = "MPNet, all-mpnet-base-v2: BERT's post-LN layers, RoBERTa's positions, a learned bias by offset bucket"
    model_types = ("mpnet",)
    architectures = ("MPNetModel", "MPNetForMaskedLM", "MPNetForSequenceClassification", "MPNetForTokenClassification",
                     "MPNetForQuestionAnswering", "MPNetForMultipleChoice")
    handled = Roberta.handled | {"relative_attention_num_buckets"}
    hf_base = "mpnet"
    projections = ("attention.attn.q", "attention.attn.k", "attention.attn.v", "attention.attn.o")

    @classmethod
    def hook_points(cls, model):
        """MPNet layers (post-LN): ``attention.attn`` reads the residual, its ``o`` returns what is added."""
        return [(b.attention.attn, b.attention.attn.o) for b in cls.blocks(model)]

    @classmethod
    def post_norm_points(cls, model):
        """``LN(h + Attn(h))`` is ``attention.LayerNorm``, ``LN(m + MLP(m))`` is ``output.LayerNorm``."""
        return [(b.attention.LayerNorm, b.output.LayerNorm) for b in cls.blocks(model)]

    @classmethod
    def first_position(cls, config: dict, where: str) -> int:
        return 2  # (the padding index 1 is fixed in MPNet's embeddings: the first token takes position 2)

    @classmethod
    def first_position_note(cls, start: int) -> str:
        return (f"positions numbered from {start} (MPNet's embeddings fix the padding index at 1, whatever "
                f"pad_token_id says): W_pos is the position table from row {start} on")

    @classmethod
    def positional(cls, config: dict, where: str, ts, e: str, d_head: int, n_layers: int) -> tuple[dict, list[str]]:
        buckets = integer(config, where, "relative_attention_num_buckets", default=BUCKETS)
        if buckets != BUCKETS:
            raise UnsupportedModelError(
                f"{where}: config key 'relative_attention_num_buckets' = {buckets}: transformers' MPNet computes its "
                f"bias with {BUCKETS} buckets whatever this says, which compscope reads as it runs only at {BUCKETS}")
        fields, notes = super().positional(config, where, ts, e, d_head, n_layers)
        name = e[: -len("embeddings.")] + "encoder.relative_attention_bias.weight"
        heads = integer(config, where, "num_attention_heads")
        table = ts.take(name, (BUCKETS, heads)).T  # (head, bucket)
        return {**fields, "rel_bias": table.expand(n_layers, *table.shape).contiguous(),
                "rel_bias_buckets": (BUCKETS, MAX_DISTANCE)}, notes + [
            f"a learned bias on the logits by the offset's bucket ({BUCKETS} buckets, both ways, up to {MAX_DISTANCE}), "
            "one table for every layer, after the logit scale"]
