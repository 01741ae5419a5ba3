"""ESM C (EvolutionaryScale's protein language models, ESMC-300M and -600M): Llama's module names as an
encoder, with LayerNorms and each residual branch scaled down.

- Pre-LN layers: a LayerNorm with a bias before each attention, a LayerNorm without one at the end.
- QK-norm: one LayerNorm without bias over all of a layer's query heads at once, and one over its key
  heads (``q_norm``, ``k_norm``, ``hidden_size`` wide), before the rotary map (rotate-half, whole heads).
- Every layer adds its attention output (and its MLP's) divided by ``sqrt(L / 36)``, ``L`` the number
  of layers (ESM3's residual scaling): folded into ``W_O`` as the residual scale ``sqrt(36 / L)``.
- Every query attends to every key; no position table. The masked-LM head (a dense layer, GELU and
  a LayerNorm before the decoder) is no linear unembedding: ``W_U`` is None, as for every encoder.
"""

from __future__ import annotations

import math

from ...core.heads import HeadWeights
from ..checkpoint import Checkpoint
from . import register
from .base import MAX_LAYERS, integer
from .llama import Llama, LlamaLike, LlamaLikeOptions, convert_llamalike


@register
class Esmc(LlamaLike):
    name = "esmc"
    about = ("ESM C protein language models: Llama's names as an encoder, LayerNorms, a layer-wide QK LayerNorm, "
             "each residual branch divided by sqrt(layers / 36)")
    model_types = ("esmc",)
    architectures = ("EsmcModel", "EsmcForMaskedLM", "EsmcForSequenceClassification", "EsmcForTokenClassification")
    handled = Llama.handled - {"sliding_window", "layer_types", "max_window_layers", "use_sliding_window",
                               "rms_norm_eps"}
    ignored = LlamaLike.ignored | {"mask_token_id", "classifier_dropout", "mlp_bias"}  # (the MLP's and the heads' on top)
    accept = {**LlamaLike.accept, "is_decoder": lambda v: not v}
    hf_base = "esmc"
    options = LlamaLikeOptions(bidirectional=True, norm_kind="layernorm", norm_bias=True, final_norm_bias=False,
                               norm_eps=1e-5, qk_norm=True, qk_norm_scope="layer", qk_norm_kind="layernorm",
                               notes=("LayerNorms at transformers' epsilon 1e-5 (the config states none)",))

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        """Every layer attends over the whole sequence."""
        return ["full_attention"] * n_layers

    @classmethod
    def residual_scale(cls, config: dict, where: str = "config") -> float:
        """``sqrt(36 / L)``: each layer divides what its attention returns by ``sqrt(L / 36)``."""
        return math.sqrt(36 / integer(config, where, "num_hidden_layers", high=MAX_LAYERS))

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        return convert_llamalike(ckpt, cls, cls.options)
