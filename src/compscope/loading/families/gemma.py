"""Gemma, Gemma 2 and Gemma 3 (text) decoders: Llama-like with these twists.

- Every RMSNorm multiplies by ``1 + w`` (``Norm.offset = 1``).
- Embeddings enter the residual times ``sqrt(d_model)`` (folded into ``W_E``, not ``W_U``).
- Gemma 2 adds an RMSNorm on the attention output before the residual add, logit scale
  ``query_pre_attn_scalar^-1/2``, attention logits soft-capped to ``c tanh(ℓ / c)``
  (``attn_logit_softcapping``), and sliding-window layers alternating with global ones (the
  first sliding).
- Gemma 3 drops the soft cap and adds per-head RMSNorm on q and k (QK-norm), with every sixth
  layer global by default and separate rotary bases for the two kinds of layer.

The QK-norm, the soft cap and the post-attention norm sit inside the QK and OV paths: products
of the weights are approximations there, and the loaded ``HeadWeights`` says so in ``meta.notes``.
"""

from __future__ import annotations

import dataclasses

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights
from . import register
from .base import integer, layer_hooks, number, rope_accept
from .llama import Llama, LlamaLike, LlamaLikeOptions, convert_llamalike, every_nth_global, llamalike_hooks


@register
class Gemma(LlamaLike):
    name = "gemma"
    about = "Gemma: embeddings times sqrt(d_model), norm gains 1 + w"
    model_types = ("gemma",)
    architectures = ("GemmaForCausalLM",)
    ignored = frozenset()
    accept = {"rope_parameters": rope_accept, "rope_scaling": rope_accept, "use_bidirectional_attention": lambda v: not v}

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        d = integer(ckpt.config, ckpt.source, "hidden_size")
        return convert_llamalike(ckpt, cls, LlamaLikeOptions(norm_offset=1.0, embed_scale=d**0.5))


#: Gemma 2 and 3 layers: ``input_layernorm`` reads the residual; what is added is the output of
#: ``post_attention_layernorm`` (the attention-output norm)
_post_norm_hooks = layer_hooks("input_layernorm", "post_attention_layernorm")


@register
class Gemma2(Gemma):
    name = "gemma2"
    about = "Gemma 2: soft-capped logits, local and global layers, a norm on the attention output"
    model_types = ("gemma2",)
    architectures = ("Gemma2ForCausalLM",)
    handled = Llama.handled | {"query_pre_attn_scalar", "attn_logit_softcapping"}
    ignored = frozenset({"final_logit_softcapping", "cache_implementation"})
    hook_points = _post_norm_hooks
    post_attn_norm = True  # an RMSNorm on the attention output (VaultGemma has none)

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        """As listed, else transformers' default: even layers slide, odd ones are global."""
        return every_nth_global(config, n_layers, where, 2)

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg = dict(ckpt.config)
        scalar = number(cfg, ckpt.source, "query_pre_attn_scalar", default=256, open_low=True)
        cap = None if "attn_logit_softcapping" in cfg and cfg["attn_logit_softcapping"] is None else number(
            cfg, ckpt.source, "attn_logit_softcapping", default=50.0, open_low=True)  # absent: HF's default 50
        d = integer(cfg, ckpt.source, "hidden_size")
        opts = LlamaLikeOptions(norm_offset=1.0, embed_scale=d**0.5, post_attn_norm=cls.post_attn_norm,
                                attn_scale=scalar**-0.5, attn_softcap=cap)
        return convert_llamalike(ckpt, cls, opts)


@register
class VaultGemma(Gemma2):
    """VaultGemma (Google's differentially private Gemma): Gemma 2's attention (``1 + w`` norms, the
    embedding scale, soft-capped logits, ``query_pre_attn_scalar``, alternating windows) without the
    norm on the attention output: what a layer's attention returns is added as it is."""

    name = "vaultgemma"
    about = "VaultGemma: Gemma 2's attention without the norm on its output"
    model_types = ("vaultgemma",)
    architectures = ("VaultGemmaForCausalLM", "VaultGemmaModel")
    hook_points = llamalike_hooks
    post_attn_norm = False


@register
class Gemma3(Gemma):
    name = "gemma3"
    about = ("Gemma 3, and the language model of its vision-language models: per-head QK-norm, local and global "
             "layers; EmbeddingGemma, attending both ways")
    model_types = ("gemma3_text",)
    architectures = ("Gemma3ForCausalLM", "Gemma3TextModel")
    handled = Llama.handled | {"query_pre_attn_scalar", "rope_local_base_freq", "sliding_window_pattern", "_sliding_window_pattern",
                               "use_bidirectional_attention"}
    ignored = frozenset({"final_logit_softcapping", "cache_implementation"})
    accept = {
        "rope_parameters": rope_accept,
        "rope_scaling": rope_accept,
        "attn_logit_softcapping": lambda v: v is None,
    }

    hook_points = _post_norm_hooks

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        """As listed, else transformers' default: every ``sliding_window_pattern``-th layer (6) global."""
        return every_nth_global(config, n_layers, where, 6)

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg = dict(ckpt.config)
        if cfg.get("rope_parameters") is None and "rope_local_base_freq" not in cfg:
            cfg["rope_local_base_freq"] = 10000.0  # HF default for the sliding layers
        cfg.setdefault("rope_theta", 1_000_000.0)
        scalar = number(cfg, ckpt.source, "query_pre_attn_scalar", default=256, open_low=True)
        ckpt = dataclasses.replace(ckpt, config=cfg)
        d = integer(cfg, ckpt.source, "hidden_size")
        opts = LlamaLikeOptions(
            norm_offset=1.0, embed_scale=d**0.5, qk_norm=True, post_attn_norm=True,
            attn_scale=scalar**-0.5, default_theta=1_000_000.0,
            bidirectional=bool(cfg.get("use_bidirectional_attention")),  # EmbeddingGemma
        )
        return convert_llamalike(ckpt, cls, opts)
