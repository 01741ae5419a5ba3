"""Cohere decoders: Command R and Aya (``cohere``), Command R7B and Command A (``cohere2``).

Llama-like with a parallel block (attention and MLP read the same normed residual: for attention,
a pre-norm), LayerNorm without bias (``layer_norm_eps``), rotary on interleaved pairs ``(2i, 2i + 1)``
(Cohere's own ``rotate_half``), the logits scaled by ``logit_scale`` (folded into ``W_U``, which is
the embedding where tied). Command R+ adds a per-head QK LayerNorm with a gain for each head
(``use_qk_norm``). Cohere 2 slides a window on three layers in four (``layer_types``, or
``sliding_window_pattern``, default 4) and rotates only there: its global layers have no rotary.
"""

from __future__ import annotations

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights
from . import register
from .base import number
from .llama import Llama, LlamaLike, LlamaLikeOptions, convert_llamalike, every_nth_global


def _second(config: dict) -> bool:
    return config.get("model_type") == "cohere2" or "Cohere2ForCausalLM" in (config.get("architectures") or [])


@register
class Cohere(LlamaLike):
    name = "cohere"
    about = "Command R, R+ and Aya (cohere), Command R7B and A (cohere2): parallel block, interleaved rotary"
    model_types = ("cohere", "cohere2")
    architectures = ("CohereForCausalLM", "Cohere2ForCausalLM")
    handled = Llama.handled | {"use_qk_norm", "layer_norm_eps", "logit_scale", "sliding_window_pattern",
                               "_sliding_window_pattern"}

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        """Cohere 2's as listed, else transformers' default: every ``sliding_window_pattern``-th layer (4) global."""
        if _second(config):
            return every_nth_global(config, n_layers, where, 4)
        return super().layer_types(config, n_layers, where)

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where = ckpt.config, ckpt.source
        second = _second(cfg)
        opts = LlamaLikeOptions(
            norm_kind="layernorm", eps_key="layer_norm_eps", rotary_style="interleaved",
            qk_norm=bool(cfg.get("use_qk_norm")), qk_norm_kind="layernorm", qk_gains_per_head=True,
            logit_scale=number(cfg, where, "logit_scale", default=0.0625, open_low=True),
            nope_layers="full_attention" if second else "",
            notes=("parallel block: the attention and the MLP read the same normed residual",))
        return convert_llamalike(ckpt, cls, opts)
