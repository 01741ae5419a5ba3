"""Evolla (a protein-language model): Llama 3's decoder whose every ``num_hidden_layers // aligner_num_add_layers``-th
layer adds a gated cross-attention to a protein encoder's features (its sequence aligner) after its own attention.
That cross-attention runs only with protein inputs; on text, which is what compscope reads and runs, the layers are
Llama's. transformers' auto classes do not build it, so the data runner builds the class its folder names."""

from __future__ import annotations

from . import register
from .llama import Llama, LlamaLikeOptions

#: the protein side's settings (its encoder, the sequence aligner, the resampler), which no self-attention weight
#: depends on
_PROTEIN_KEYS = frozenset(
    "protein_encoder_config aligner_ffn_mult aligner_enable_bias aligner_attention_probs_dropout_prob "
    "aligner_num_add_layers resampler_depth resampler_dim_head resampler_heads resampler_num_latents "
    "resampler_ff_mult".split())


@register
class Evolla(Llama):
    name = "evolla"
    about = ("Evolla's language model: Llama 3's decoder; its cross-attention to protein features (which runs only "
             "with protein inputs) not read")
    model_types = ("evolla",)
    architectures = ("EvollaForProteinText2Text", "EvollaModel")
    ignored = Llama.ignored | _PROTEIN_KEYS
    options = LlamaLikeOptions(default_theta=500_000.0, notes=(
        "Evolla's sequence aligner, a gated cross-attention to a protein encoder's features in some layers, not read: "
        "it runs only with protein inputs (on text, as compscope runs it, the layers are Llama's)",))
    runs_as_named = True  # (transformers' auto classes fail on its config: the class its folder names)
