"""Gemma, Gemma 2 and Gemma 3 (text) decoders: Llama-like with these twists.

- Every RMSNorm multiplies by ``1 + w`` (``Norm.offset = 1``).
- Embeddings enter the residual times ``sqrt(d_model)`` (folded into ``W_E``, not ``W_U``).
- Gemma 2 adds an RMSNorm on the attention output before the residual add, logit scale
  ``query_pre_attn_scalar^-1/2``, attention logits soft-capped to ``c tanh(ℓ / c)``
  (``attn_logit_softcapping``), and sliding-window layers alternating with global ones (the
  first sliding).
- Gemma 3 drops the soft cap and adds per-head RMSNorm on q and k (QK-norm), with every sixth
  layer global by default and separate rotary bases for the two kinds of layer.

T5Gemma's encoder (:class:`T5GemmaEncoder`) is Gemma 2's layers attending both ways.

The QK-norm, the soft cap and the post-attention norm sit inside the QK and OV paths: products
of the weights are approximations there, and the loaded ``HeadWeights`` says so in ``meta.notes``.
"""

from __future__ import annotations

import dataclasses

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights
from ...errors import LoadError, one_line
from . import register
from .base import integer, layer_hooks, number, rope_accept, transformers_at_least
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
    def options(cls, cfg: dict, where: str) -> LlamaLikeOptions:
        """How :func:`convert_llamalike` reads the family's layers under the config ``cfg``."""
        scalar = number(cfg, where, "query_pre_attn_scalar", default=256, open_low=True)
        cap = None if "attn_logit_softcapping" in cfg and cfg["attn_logit_softcapping"] is None else number(
            cfg, where, "attn_logit_softcapping", default=50.0, open_low=True)  # absent: HF's default 50
        d = integer(cfg, where, "hidden_size")
        return LlamaLikeOptions(norm_offset=1.0, embed_scale=d**0.5, post_attn_norm=cls.post_attn_norm,
                                attn_scale=scalar**-0.5, attn_softcap=cap)

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        return convert_llamalike(ckpt, cls, cls.options(ckpt.config, ckpt.source))


@register
class T5GemmaEncoder(Gemma2):
    """T5Gemma's encoder (``T5GemmaEncoderModel``; a whole T5Gemma's encoder, its decoder not read): Gemma 2's layers
    (``1 + w`` norms, the embedding scale, soft-capped logits, ``query_pre_attn_scalar``, a norm on the attention
    output) under ``pre_self_attn_layernorm`` and ``post_self_attn_layernorm``, attending both ways, the sliding layers
    within ``sliding_window`` tokens on either side (``|i − j| ≤ sliding_window``, as transformers 5 masks it: the window
    held as ``sliding_window + 1``). Its settings are the config's ``encoder``."""

    name = "t5gemma_encoder"
    about = ("the encoder of T5Gemma: Gemma 2's layers attending both ways, sliding_window tokens on either side in "
             "its local layers")
    part = "encoder"
    model_types = ("t5gemma",)
    architectures = ("T5GemmaEncoderModel", "T5GemmaForConditionalGeneration", "T5GemmaModel",
                     "T5GemmaForSequenceClassification", "T5GemmaForTokenClassification")
    ignored = Gemma2.ignored | frozenset({"dropout_rate"})
    hook_points = layer_hooks("pre_self_attn_layernorm", "post_self_attn_layernorm")
    runs_as_named = True  # (an encoder's folder as T5GemmaEncoderModel, a whole model's as the class it names)

    @classmethod
    def encoder_config(cls, config: dict, where: str) -> dict:
        """The encoder's settings (the config's ``encoder``)."""
        enc = config.get("encoder")
        if not isinstance(enc, dict):
            raise LoadError(f"{where}: config key 'encoder' = {enc!r}: expected the encoder's settings (a mapping)")
        return enc

    @classmethod
    def options(cls, cfg: dict, where: str) -> LlamaLikeOptions:
        return dataclasses.replace(super().options(cfg, where), bidirectional=True, radius="whole",
                                   input_norm_at="pre_self_attn_layernorm", post_attn_norm_at="post_self_attn_layernorm")

    @classmethod
    def base_model(cls, model):
        """The encoder: ``model.encoder``, in a whole model ``model.model.encoder``."""
        inner = getattr(model, "model", model)
        return getattr(inner, "encoder", inner)

    @classmethod
    def exact_context(cls, config: dict, where: str = "config") -> int | None:
        """transformers before 5 masks the sliding layers one token narrower (``|i − j| < sliding_window``): the
        two agree on sequences of up to ``sliding_window`` tokens."""
        enc = cls.encoder_config(config, where)
        types = enc.get("layer_types") or []
        if transformers_at_least(5) or not enc.get("sliding_window") or "sliding_attention" not in types:
            return None
        return integer(enc, where, "sliding_window")

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg = cls.encoder_config(ckpt.config, ckpt.source)
        hw = convert_llamalike(dataclasses.replace(ckpt, config=cfg), cls, cls.options(cfg, ckpt.source))
        if not any(name.startswith("model.decoder.") for name in ckpt.tensors.names()):
            return hw
        note = "the encoder alone: the decoder, whose cross-attention reads the encoder's output, is not read"
        return dataclasses.replace(hw, meta=dataclasses.replace(hw.meta, notes=(*hw.meta.notes, note)))


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
    def with_rope_defaults(cls, config: dict) -> dict:
        """``config`` with transformers' rotary bases where it states none: 1,000,000 globally, 10,000 on the sliding
        layers."""
        cfg = dict(config)
        if cfg.get("rope_parameters") is None and "rope_local_base_freq" not in cfg:
            cfg["rope_local_base_freq"] = 10000.0  # HF default for the sliding layers
        cfg.setdefault("rope_theta", 1_000_000.0)
        return cfg

    @classmethod
    def options(cls, cfg: dict, where: str) -> LlamaLikeOptions:
        """How :func:`convert_llamalike` reads the family's layers under the config ``cfg``."""
        scalar = number(cfg, where, "query_pre_attn_scalar", default=256, open_low=True)
        d = integer(cfg, where, "hidden_size")
        return LlamaLikeOptions(
            norm_offset=1.0, embed_scale=d**0.5, qk_norm=True, post_attn_norm=True,
            attn_scale=scalar**-0.5, default_theta=1_000_000.0,
            bidirectional=bool(cfg.get("use_bidirectional_attention")),  # EmbeddingGemma
        )

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg = cls.with_rope_defaults(ckpt.config)
        return convert_llamalike(dataclasses.replace(ckpt, config=cfg), cls, cls.options(cfg, ckpt.source))


#: the token whose embedding T5Gemma 2's encoder takes from ``eoi_embedding`` where nothing says another (transformers'
#: T5Gemma2Encoder built alone always takes it)
EOI_TOKEN = 256_000
#: where its encoder's text model's tensors are: as loaded (a whole model's, with a head or without), as saved (the
#: same), the encoder's alone
_T5GEMMA2_PREFIXES = ("model.encoder.text_model.", "encoder.text_model.", "model.encoder.", "encoder.", "text_model.",
                      "")


def _t5gemma2_text_completed(text: dict, where: str) -> dict:
    """T5Gemma 2's text settings with the defaults of transformers' ``T5Gemma2TextConfig`` under those it leaves out (a
    config saved as what differs from them, as transformers 4 saved nested configs, reads as the model transformers
    builds from it); as they are where transformers has no T5Gemma 2 (a setting missing is then refused by name)."""
    try:
        from transformers import T5Gemma2TextConfig
    except ImportError:
        return text
    try:
        full = T5Gemma2TextConfig(**{k: v for k, v in text.items() if k != "model_type"}).to_dict()
    except Exception as e:  # noqa: BLE001  (transformers raises several kinds for settings it cannot build)
        raise LoadError(f"{where}: transformers cannot build T5Gemma 2's text_config from these settings "
                        f"({type(e).__name__}: {one_line(e)[:300]})") from e
    return full  # (what it holds beside the model's settings, every family ignores: base.COMMON_IGNORED)


@register
class T5Gemma2Encoder(Gemma3):
    """T5Gemma 2's encoder (a whole model, ``t5gemma2``, or its encoder alone, ``t5gemma2_encoder``), its text model:
    Gemma 3's layers (``1 + w`` norms, the embedding scale, per-head QK-norm, ``query_pre_attn_scalar``, a norm on the
    attention output, local and global rotary bases) under ``pre_self_attn_layernorm`` and
    ``post_self_attn_layernorm``, attending both ways. Its settings are the encoder's ``text_config``.

    - A sliding layer's query at ``i`` sees ``j`` with ``i − (w − 1) // 2 ≤ j ≤ i + w // 2`` (``w = sliding_window``:
      transformers' mask takes ``(w + 1) // 2`` keys behind, the query's own among them, and ``w // 2`` ahead). Held
      as the symmetric window ``(w + 1) // 2``; for an even ``w`` the one more key ahead shows only on sequences longer
      than ``w // 2`` tokens, so the data runner keeps to that length (:meth:`exact_context`).
    - The token ``eoi_token_index`` enters as ``eoi_embedding``, unscaled, not as its row of ``embed_tokens`` times
      ``sqrt(d_model)``: that column of ``W_E``. A whole model takes the index from its config; an encoder built alone
      takes 256,000 whatever its config says (transformers' constructor default), so compscope does too.
    - The vision tower and its projector, and a whole model's decoder, are not read."""

    name = "t5gemma2_encoder"
    about = ("the encoder of T5Gemma 2: Gemma 3's layers attending both ways, its sliding layers' window split around "
             "each token as transformers masks it; the vision tower not read")
    part = "encoder"
    model_types = ("t5gemma2", "t5gemma2_encoder")
    architectures = ("T5Gemma2Model", "T5Gemma2ForConditionalGeneration", "T5Gemma2Encoder",
                     "T5Gemma2ForSequenceClassification", "T5Gemma2ForTokenClassification")
    handled = Gemma3.handled - {"use_bidirectional_attention"}
    ignored = Gemma3.ignored | frozenset({"dropout_rate", "attn_logit_softcapping"})
    accept = {**Gemma3.accept, "attn_logit_softcapping": lambda v: v is None}
    hook_points = layer_hooks("pre_self_attn_layernorm", "post_self_attn_layernorm")
    runs_as_named = True  # (the class the folder names: the encoder alone, or a whole model whose encoder is hooked)

    @classmethod
    def text_config(cls, config: dict, where: str) -> tuple[dict, int]:
        """The encoder's text model's settings (``text_config``, of the config's ``encoder`` in a whole model) and the
        token that takes ``eoi_embedding``."""
        whole = config.get("model_type") == "t5gemma2"
        enc = config.get("encoder") if whole else config
        if not isinstance(enc, dict) or not isinstance(enc.get("text_config"), dict):
            key = "encoder" if whole else "text_config"
            raise LoadError(f"{where}: config key {key!r}: expected the encoder's settings with its text_config (a "
                            "mapping)")
        eoi = integer(config, where, "eoi_token_index", low=0, default=EOI_TOKEN) if whole else EOI_TOKEN
        return _t5gemma2_text_completed(enc["text_config"], where), eoi

    @classmethod
    def options(cls, cfg: dict, where: str) -> LlamaLikeOptions:
        return dataclasses.replace(super().options(cfg, where), bidirectional=True, radius="split",
                                   input_norm_at="pre_self_attn_layernorm",
                                   post_attn_norm_at="post_self_attn_layernorm")

    @classmethod
    def base_model(cls, model):
        """The encoder's text model: ``model.text_model`` of the encoder alone, ``model.encoder.text_model`` of a
        whole model (``model.model.encoder.text_model`` under a head)."""
        inner = getattr(model, "model", model)
        enc = getattr(inner, "encoder", inner)
        return getattr(enc, "text_model", enc)

    @classmethod
    def exact_context(cls, config: dict, where: str = "config") -> int | None:
        """``sliding_window // 2`` where a sliding layer's window is even: on longer sequences its one more key ahead
        of the query shows, which the symmetric window held leaves out."""
        text, _ = cls.text_config(config, where)
        types = text.get("layer_types") or []
        w = text.get("sliding_window")
        if not w or "sliding_attention" not in types or integer(text, where, "sliding_window") % 2:
            return None
        return integer(text, where, "sliding_window") // 2

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        where, ts = ckpt.source, ckpt.tensors
        text, eoi = cls.text_config(ckpt.config, where)
        cfg = cls.with_rope_defaults(text)
        hw = convert_llamalike(dataclasses.replace(ckpt, config=cfg), cls, cls.options(cfg, where))
        notes = []
        name = next((f"{p}embed_tokens.eoi_embedding" for p in _T5GEMMA2_PREFIXES
                     if f"{p}embed_tokens.weight" in ts and f"{p}embed_tokens.eoi_embedding" in ts), None)
        if name is None:
            raise LoadError(f"{where}: no tensor 'embed_tokens.eoi_embedding' beside the encoder's embed_tokens: "
                            "T5Gemma 2's encoder embeds its end-of-image token with it")
        e = ts.take(name, (hw.d_model,))
        W_E = hw.W_E
        if eoi < W_E.shape[1]:
            W_E = W_E.clone()
            W_E[:, eoi] = e.to(W_E.dtype)
            notes.append(f"W_E's column {eoi} (eoi_token_index) is eoi_embedding, which the encoder takes for that "
                         "token unscaled")
        if any(w is not None for w in hw.sliding_window):
            window = integer(cfg, where, "sliding_window")
            notes.append(f"the sliding layers' window held as |i - j| <= {(window - 1) // 2}: transformers' mask takes "
                         f"the query, {(window - 1) // 2} keys behind it and {window // 2} ahead"
                         + (f"; the last of these, beyond what is held, shows only on sequences longer than "
                            f"{window // 2} tokens, the longest the data runner takes" if window % 2 == 0 else ""))
        whole = ckpt.config.get("model_type") == "t5gemma2"
        notes.append("the encoder's text model alone: the vision tower" + (", its projector and the decoder" if whole
                                                                           else " and its projector") + " not read")
        meta = dataclasses.replace(hw.meta, notes=(*hw.meta.notes, *notes))
        return dataclasses.replace(hw, W_E=W_E, meta=meta)
