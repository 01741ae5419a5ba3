"""Llama-like decoders: Llama, Mistral, Mixtral, Qwen2, Qwen2-MoE, SmolLM (and the shared converter the
other Llama-like families use).

Pre-RMSNorm; separate ``q/k/v/o_proj`` (``nn.Linear``: weight ``(out, in)``, already the
column convention); rotary in the HF "rotate-half" layout; GQA with ``num_key_value_heads``
(query head ``h`` reads K/V head ``h // (n_heads / n_kv_heads)``); Qwen2's Q/K/V biases;
Mistral/Qwen2 sliding windows (a mask, not weights: recorded per layer).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import torch

from ..checkpoint import Checkpoint
from ...errors import LoadError, UnsupportedModelError
from ...core.heads import HeadWeights, Meta, Norm, Rotary, alibi_slopes
from . import register
from .base import (Family, MAX_HEADS, MAX_LAYERS, YARN_TYPES, attending, checkpoint_notes, config_attention_bias,
                   integer, inv_freq, kv_groups, layer_hooks, number, prefix_of, rope_accept_yarn,
                   rope_attention_factor, rope_settings, rotary_dim, split_cols, split_rows, stack, unembedding)

#: where the layers are: a causal LM, a base model, a vision-language model's language model (as transformers
#: saves one since 4.52, and before), Nemotron-H's files (backbone.), EXAONE 3's (transformer.), a multimodal
#: encoder's text model (EmbeddingGemma 2's: language_model.)
PREFIXES = ("model.", "", "model.language_model.", "language_model.model.", "backbone.", "transformer.",
            "language_model.", "model.text_model.", "text_model.",  # (Idefics3, SmolVLM, Granite-Docling;
            # UltraVBERT: the language model as text_model)
            "thinker.model.language_model.", "thinker.model.",  # (Qwen-Omni's thinker: as loaded, as released)
            "text_model.model.",  # (Emu3's files: its causal language model as text_model)
            "esmc.",  # (ESM C's head models)
            "vlm.language_model.", "vlm.model.language_model.", "vlm.model.", "vlm.",  # (ColQwen2's: transformers 5's,
            # 4's, the Qwen2-VL layout before the language model had a module of its own (and 5.5's), 5.6-5.8's)
            "encoder.", "model.encoder.",  # (T5Gemma's encoder, alone or in the whole model; T5Gemma 2's files)
            "model.encoder.text_model.", "encoder.text_model.",  # (T5Gemma 2's encoder's text model as loaded)
            "llm.model.", "model.model.")  # (Ovis2.5's files; LLaVA-OneVision-1.5's as transformers saves them)
#: (each also tried with one more ``model.`` after it, by ``prefix_of``: Qwen2-Audio's, Voxtral's and Granite
#: Speech's language models as transformers 5.17 saves them, ``language_model.model.model.``; LLaVA's and other
#: wrappers' as 5.4 and 5.5 do, ``model.language_model.model.``)


@dataclass
class LlamaLikeOptions:
    norm_offset: float = 0.0  # Gemma: gain = 1 + w
    embed_scale: float = 1.0  # Gemma: embeddings times sqrt(d_model)
    qk_norm: bool = False  # Gemma 3, Qwen3: RMSNorm on each q and k head
    qk_norm_scope: str = "head"  # OLMo-2: 'layer', one RMSNorm over all of a layer's q (k) heads
    qk_norm_kind: str = "rmsnorm"  # StableLM: 'layernorm'
    qk_gains_per_head: bool = False  # StableLM: one norm module per head (q_layernorm.norms.{h}), each its own gain
    qk_norm_bias: bool = False  # Chameleon: a LayerNorm bias for each head beside its gain (with qk_gains_per_head)
    qk_norm_eps: float | None = None  # the QK norms' epsilon where it is not the other norms' (Chameleon: 1e-5)
    input_norm: bool = True  # OLMo-2: False, the attention reads the raw residual
    input_norm_at: str = "input_layernorm"  # its module's name (Apertus: attention_layernorm)
    norm_kind: str = "rmsnorm"  # OLMo: 'layernorm'
    norm_gains: bool = True  # OLMo: False, norms without parameters (no tensors to read)
    norm_eps: float | None = None  # None: the config's value under eps_key
    eps_key: str = "rms_norm_eps"  # StableLM: layer_norm_eps; StarCoder2: norm_epsilon
    norm_bias: bool = False  # StableLM, StarCoder2: LayerNorms with a bias (input and final norms)
    final_norm_bias: bool | None = None  # whether the final norm has one (None: as norm_bias; ESM C: False)
    post_attn_norm: bool = False  # Gemma 3: RMSNorm on the attention output
    post_attn_norm_at: str = "post_attention_layernorm"  # its module's name (GLM-4: post_self_attn_layernorm)
    attn_scale: float = 0.0  # 0: d_head ** -0.5
    attn_softcap: float | None = None  # Gemma 2: logits soft-capped to c tanh(l / c)
    fused_qkv: bool = False  # Phi-3: one qkv_proj, rows [q heads | k heads | v heads]
    fused_qkv_at: str = "qkv_proj"  # its module's name (Sarvam's files: query_key_value)
    default_theta: float = 10000.0
    notes: tuple[str, ...] = ()  # more for meta.notes (StableLM: the parallel residual)
    partial_rotary: float = 1.0  # the share of each head rotated when the config does not say (StableLM: 0.25)
    default_head_dim: int | None = None  # the head width where the config states none (transformers' default for
    # Nemotron-H, MiniMax-M2, Solar Open: 128); None: the residual width over the heads
    nope_layers: str | tuple[int, ...] = ""  # layers without rotary, frequency 0: a tuple of the model's layers, or
    # 'no_rope_layers' (SmolLM3, as that key says),
    # 'full_attention' (Cohere 2: its global layers), 'all' (Granite 4's hybrids)
    rotary_style: str = "half"  # Cohere: 'interleaved', pairs (2i, 2i + 1)
    logit_scale: float = 1.0  # Cohere: logits = scale · W_U x, the scale folded into W_U
    final_norm: str = "norm"  # the final norm's module name (Jamba: final_layernorm)
    layers_at: str = "layers"  # the layers' module list (EXAONE 3's files: h)
    attn_at: str = "self_attn"  # the attention's module name in a layer (Nemotron-H: mixer)
    embed_at: str = "embed_tokens"  # the token embedding's module name (Nemotron-H: embeddings)
    out_proj_at: str = "o_proj"  # the output projection's module name (LFM2: out_proj)
    qk_norm_at: tuple[str, str] = ("q_norm", "k_norm")  # the QK norms' module names (LFM2: q_layernorm, k_layernorm)
    qk_norm_gains: bool = True  # Llama 4: False, a QK-norm without gains (no tensors) whatever norm_gains says
    qk_norm_on: str = "all"  # the layers QK-norm applies to: 'all', or 'rotary' (Llama 4: not on its NoPE layers)
    sinks: bool = False  # gpt-oss: a learned sink logit per head (self_attn.sinks)
    alibi: bool = False  # llama.cpp's Refact and Baichuan 13B graphs: ALiBi (maximum bias 8) in place of rotary
    rope_kinds: tuple[str, ...] = YARN_TYPES  # the rope types read (LFM3 adds 'proportional')
    bidirectional: bool = False  # EmbeddingGemma: every query sees keys on both sides, a window of sliding_window // 2
    # on either side (the window held as sliding_window // 2 + 1); an encoder, so no unembedding
    radius: str = "half"  # a bidirectional window's keys on either side: 'half' of sliding_window (EmbeddingGemma),
    # 'whole' (UltraBERT: |i − j| ≤ sliding_window, held as sliding_window + 1), 'split' (T5Gemma 2: the query and
    # (w − 1) // 2 keys behind it, w // 2 ahead, held as (w + 1) // 2, |i − j| ≤ (w − 1) // 2; the family's
    # exact_context keeps data runs where the one more key ahead of an even window never shows)


LAYER_TYPES = ("full_attention", "sliding_attention")
#: the config keys of sliding windows, which a family whose mask takes none leaves out of what it handles (then refused)
WINDOW_KEYS = frozenset({"sliding_window", "layer_types", "max_window_layers", "use_sliding_window"})


def listed_layer_types(config: dict, n_layers: int, where: str = "config") -> list[str] | None:
    """The config's ``layer_types`` (per layer 'full_attention' / 'sliding_attention'), checked, or
    None where it lists none; any other layer type (chunked, linear, ...) is refused by name, not
    read as full attention."""
    if not config.get("layer_types"):
        return None
    types = config["layer_types"]
    if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
        raise LoadError(f"{where}: config key 'layer_types' = {types!r} is not a list of layer type names")
    if len(types) != n_layers:
        raise UnsupportedModelError(f"{where}: layer_types lists {len(types)} layers, num_hidden_layers is {n_layers}")
    unknown = sorted({t for t in types if t not in LAYER_TYPES})
    if unknown:
        raise UnsupportedModelError(
            f"{where}: layer_types {unknown} are not supported (supported: {', '.join(LAYER_TYPES)})"
        )
    if "sliding_attention" in types and not config.get("sliding_window"):
        raise UnsupportedModelError(f"{where}: layer_types has sliding_attention layers but sliding_window is not set")
    if "sliding_attention" in types:
        integer(config, where, "sliding_window")  # a positive size
    return types


def linear_hybrid_layers(types, n_layers: int, where: str = "config") -> list[int]:
    """The ``full_attention`` layers of a hybrid's ``layer_types`` whose other layers are linear attention
    (OLMo-hybrid's and Qwen3.5's gated DeltaNet), the list checked: refused by name where it is not one of
    the two types per layer, or holds no attention layer."""
    if (not isinstance(types, list) or len(types) != n_layers
            or any(t not in ("full_attention", "linear_attention") for t in types)):
        raise UnsupportedModelError(f"{where}: config key 'layer_types' = {types!r}: expected 'full_attention' or "
                                    f"'linear_attention' for each of the {n_layers} layers")
    return attending([i for i, t in enumerate(types) if t == "full_attention"], n_layers, where, "linear attention")


def listed_or(config: dict, n_layers: int, where: str, is_global: Callable[[int], bool],
              window: int | None = None) -> list[str]:
    """The listed layer types, else a family's default rule as transformers builds it: layer ``i``
    global where ``is_global(i)``, the others sliding (at ``window`` where the config states no
    ``sliding_window`` key; a window must be set, checked)."""
    listed = listed_layer_types(config, n_layers, where)
    if listed is not None:
        return listed
    types = ["full_attention" if is_global(i) else "sliding_attention" for i in range(n_layers)]
    stated = config if window is None else {"sliding_window": window, **config}
    return listed_layer_types({**stated, "layer_types": types}, n_layers, where)


def every_nth_global(config: dict, n_layers: int, where: str, pattern_default: int) -> list[str]:
    """The listed layer types, else transformers' default for Gemma 2/3, Cohere 2 and OLMo-3: every
    ``sliding_window_pattern``-th layer global (the config's, else ``pattern_default``), the rest sliding."""
    if config.get("layer_types"):
        return listed_or(config, n_layers, where, bool)
    pattern = integer(config, where, "sliding_window_pattern", "_sliding_window_pattern", default=pattern_default,
                      high=MAX_LAYERS)
    return listed_or(config, n_layers, where, lambda i: (i + 1) % pattern == 0)


def upper_layers_slide(config: dict, n_layers: int, where: str, on: bool) -> list[str]:
    """Qwen2's and Qwen3's rule: with the window switched on, the layers from ``max_window_layers`` up slide."""
    first = integer(config, where, "max_window_layers", default=n_layers, low=0, high=MAX_LAYERS)
    return ["sliding_attention" if on and i >= first else "full_attention" for i in range(n_layers)]


def window_switch(config: dict, where: str) -> bool:
    """Qwen's and SmolLM3's ``use_sliding_window`` with a window size set (checked)."""
    if config.get("sliding_window"):
        integer(config, where, "sliding_window")
    return bool(config.get("use_sliding_window") and config.get("sliding_window"))


def rope_layers(config: dict, n_layers: int, where: str = "config") -> list[bool]:
    """Per layer, whether it rotates queries and keys (SmolLM3's ``no_rope_layers``: 1 rotary, 0
    none; where absent, every ``no_rope_layer_interval``-th layer (default 4) has none, as
    transformers builds it)."""
    flags = config.get("no_rope_layers")
    if flags is None:
        every = integer(config, where, "no_rope_layer_interval", default=4)
        return [(i + 1) % every != 0 for i in range(n_layers)]
    if not isinstance(flags, list) or len(flags) != n_layers or any(f not in (0, 1) or isinstance(f, float) for f in flags):
        raise LoadError(f"{where}: config key 'no_rope_layers' = {flags!r} is not one 0 or 1 per layer ({n_layers})")
    return [bool(f) for f in flags]


#: Llama-like decoder layers: ``input_layernorm`` reads the residual, ``self_attn`` returns what is
#: added (after ``o_proj``); shared by the families that keep Llama's module names
llamalike_hooks = layer_hooks("input_layernorm", "self_attn")


def normed_after(config, key: str) -> bool:
    """Whether the switch ``key`` of ``config`` (a dict, or a transformers config) is on: Chameleon's
    ``swin_norm``, Molmo 2's ``norm_after``, which move each layer's ``input_layernorm`` from the
    attention's input to its output."""
    return bool(config.get(key) if isinstance(config, dict) else getattr(config, key, False))


def input_norm_moved_after(opts: LlamaLikeOptions) -> LlamaLikeOptions:
    """``opts`` for layers whose ``input_layernorm`` normalises the attention's output (the heads read
    the raw residual), as OLMo-2's ``post_attention_layernorm`` does."""
    return dataclasses.replace(opts, input_norm=False, post_attn_norm=True, post_attn_norm_at="input_layernorm")


def switched_norm_hooks(key: str) -> classmethod:
    """``Family.hook_points`` for Llama's layers whose ``input_layernorm`` moves after the attention
    where the running model's config switches ``key`` on (:func:`normed_after`)."""
    def hook_points(cls, model) -> list[tuple]:
        base = cls.base_model(model)
        if normed_after(base.config, key):
            return [(b.self_attn, b.input_layernorm) for b in base.layers]
        return [(b.input_layernorm, b.self_attn) for b in base.layers]
    hook_points.__doc__ = (f"Per layer: ``input_layernorm`` reads the residual and ``self_attn`` returns what is "
                           f"added; with ``{key}``, ``self_attn`` reads it and ``input_layernorm`` returns what is added.")
    return classmethod(hook_points)


#: hybrid models (Granite 4, Jamba): the layers that attend, ``input_layernorm`` reading the residual
#: and ``self_attn`` returning what is added; the others (Mamba layers) have no ``self_attn``
attention_layer_hooks = layer_hooks("input_layernorm", "self_attn", attending="self_attn")


def _per_head_gains(ts, p: str, which: str, n: int, r: int) -> torch.Tensor:
    """The gains of ``n`` per-head QK norms side by side, ``(n * r,)``: one module per head
    (``{which}_layernorm.norms.{h}``, StableLM in HF files), or stacked ``(n, r)`` as llama.cpp
    writes them (``{which}_norm``, GGUF)."""
    stacked = f"{p}self_attn.{which}_norm.weight"
    if stacked in ts:
        return ts.take(stacked, (n, r)).reshape(n * r)
    return torch.cat([ts.take(f"{p}self_attn.{which}_layernorm.norms.{h}.weight", (r,)) for h in range(n)])


def no_unembedding(ckpt: Checkpoint, heads: tuple[str, ...], why: str) -> tuple[None, str]:
    """What :meth:`LlamaLike.unembedding_of` returns for a model whose head is no ``W_U`` (it scores other tokens
    than ``W_E`` embeds): None, each of ``heads`` the checkpoint holds marked as left unread, and the note, ``why``."""
    for name in heads:
        if name in ckpt.tensors:
            ckpt.tensors.leave(name)
    return None, f"no unembedding read (W_U is None): {why}"


def convert_llamalike(ckpt: Checkpoint, family: type[LlamaLike], opts: LlamaLikeOptions) -> HeadWeights:
    cfg, where, ts = ckpt.config, ckpt.source, ckpt.tensors
    family.check_config(cfg, where)
    d = integer(cfg, where, "hidden_size")
    H = integer(cfg, where, "num_attention_heads", high=MAX_HEADS)
    if "head_dim" in cfg and cfg["head_dim"] is not None:
        r = integer(cfg, where, "head_dim")
    elif opts.default_head_dim is not None:
        r = opts.default_head_dim
    elif d % H:
        raise LoadError(f"{where}: config key 'num_attention_heads' = {H} does not divide 'hidden_size' = {d} "
                        "(and no head_dim is given)")
    else:
        r = d // H
    n_model = integer(cfg, where, "num_hidden_layers", high=MAX_LAYERS)
    layers = family.attention_layers(cfg, n_model, where)  # the model's layers that attend (a hybrid's: some)
    L = len(layers)
    G, kv_map, own_kv = layer_kv_groups(family, cfg, n_model, H, layers, where)
    if len(set(own_kv)) > 1 and (opts.fused_qkv or opts.qk_norm):
        raise UnsupportedModelError(f"{where}: K/V head counts that differ between layers beside a fused qkv "
                                    "projection or QK-norm: not supported")
    eps = number(cfg, where, opts.eps_key) if opts.norm_eps is None else opts.norm_eps
    probe = f"{opts.layers_at}.{layers[0]}.{opts.attn_at}." + (opts.fused_qkv_at if opts.fused_qkv else "q_proj") + ".weight"
    prefix = prefix_of(ts, probe, PREFIXES)
    if prefix is None:
        raise UnsupportedModelError(f"{where}: no tensor named like '{probe}' (tried prefixes {PREFIXES}, "
                                    "each also with 'model.' after it)")

    wq, wk, wv, wo, bq, bk, bv, bo, g_in, b_in, qn, kn, qb, kb, g_post, sinks = ([] for _ in range(16))
    for k, i in enumerate(layers):
        p, g = f"{prefix}{opts.layers_at}.{i}.", own_kv[k]
        if opts.fused_qkv:  # rows (and bias entries) [q heads | k heads | v heads]
            cut = lambda t: (t[: H * r], t[H * r : (H + G) * r], t[(H + G) * r :])  # noqa: E731
            parts = cut(ts.take(f"{p}{opts.attn_at}.{opts.fused_qkv_at}.weight", ((H + 2 * G) * r, d)))
            b = ts.take(f"{p}{opts.attn_at}.{opts.fused_qkv_at}.bias", ((H + 2 * G) * r,), required=False)
            biases = (None,) * 3 if b is None else cut(b)
        else:
            at, heads = f"{p}{opts.attn_at}.", (("q", H), ("k", g), ("v", g))
            parts = tuple(ts.take(f"{at}{x}_proj.weight", (n * r, d)) for x, n in heads)
            biases = tuple(ts.take(f"{at}{x}_proj.bias", (n * r,), required=False) for x, n in heads)
        wq.append(split_rows(parts[0], H, r))
        wk.append(_repeated(split_rows(parts[1], g, r), G // g))  # (a layer of fewer K/V heads than G: each
        wv.append(_repeated(split_rows(parts[2], g, r), G // g))  # G / g times, read by the same query heads)
        wo.append(split_cols(ts.take(f"{p}{opts.attn_at}.{opts.out_proj_at}.weight", (d, H * r)), H, r))
        for out, b, n, held in ((bq, biases[0], H, H), (bk, biases[1], g, G), (bv, biases[2], g, G)):
            out.append(None if b is None else _repeated(b.reshape(n, r), held // n))
        bo.append(ts.take(f"{p}{opts.attn_at}.{opts.out_proj_at}.bias", (d,), required=False))
        if opts.input_norm and opts.norm_gains:
            g_in.append(ts.take(p + opts.input_norm_at + ".weight", (d,)))
        if opts.norm_bias:
            b_in.append(ts.take(p + opts.input_norm_at + ".bias", (d,)))
        if opts.qk_norm and opts.qk_gains_per_head:  # one gain row per head, side by side: (heads * d_head,)
            qn.append(_per_head_gains(ts, p, "q", H, r))
            kn.append(_per_head_gains(ts, p, "k", G, r))
            if opts.qk_norm_bias:  # and one bias row per head beside it (Chameleon's (heads, d_head) tensors)
                qb.append(ts.take(f"{p}{opts.attn_at}.{opts.qk_norm_at[0]}.bias", (H, r)).reshape(H * r))
                kb.append(ts.take(f"{p}{opts.attn_at}.{opts.qk_norm_at[1]}.bias", (G, r)).reshape(G * r))
        elif opts.qk_norm and opts.norm_gains and opts.qk_norm_gains:  # (without gains, as nanochat's, no tensor)
            layer_wide = opts.qk_norm_scope == "layer"
            qn.append(ts.take(f"{p}{opts.attn_at}.{opts.qk_norm_at[0]}.weight", (H * r if layer_wide else r,)))
            kn.append(ts.take(f"{p}{opts.attn_at}.{opts.qk_norm_at[1]}.weight", (G * r if layer_wide else r,)))
        if opts.post_attn_norm:
            g_post.append(ts.take(p + opts.post_attn_norm_at + ".weight", (d,)))
        if opts.sinks:
            sinks.append(ts.take(f"{p}{opts.attn_at}.sinks", (H,)))

    emb = ts.take(f"{prefix}{opts.embed_at}.weight")
    if emb.ndim != 2 or emb.shape[1] != d:
        raise UnsupportedModelError(f"{ts.origin(f'{prefix}{opts.embed_at}.weight')}: {opts.embed_at} has shape "
                                    f"{tuple(emb.shape)}")
    W_U, head_note = family.unembedding_of(ckpt, emb, prefix)

    every_type = family.layer_types(cfg, n_model, where)  # per model layer, once
    types = [every_type[i] for i in layers]
    window = cfg.get("sliding_window")
    if opts.bidirectional:
        W_U, head_note = None, "bidirectional attention (an encoder): no unembedding read (W_U is None)"
        if window is not None:  # (EmbeddingGemma's transformers halves the stated window, both sides of the query)
            size = integer(cfg, where, "sliding_window")
            window = {"whole": size + 1, "split": (size + 1) // 2}.get(opts.radius, size // 2 + 1)
    freqs, rope_notes, amplitudes, kinds, mrope = [], [], set(), set(), None
    rot_dim = r
    for t in () if opts.alibi else types:  # (ALiBi: no rotary, no rope settings read)
        s = rope_settings(cfg, t)
        if t == "sliding_attention" and "rope_local_base_freq" in cfg and "sliding_attention" not in (cfg.get("rope_parameters") or {}):
            s = {**s, "rope_theta": cfg["rope_local_base_freq"], "rope_type": "default"}
        if opts.partial_rotary != 1.0:
            s.setdefault("partial_rotary_factor", opts.partial_rotary)
        rot_dim = rotary_dim(r, s, where)
        freqs.append(inv_freq(rot_dim, s, where, opts.default_theta, kinds=opts.rope_kinds))
        amplitudes.add(rope_attention_factor(s, where))
        kinds.add(s.get("rope_type") or "default")
        if "mrope_section" in s:  # checked on every layer, said once (after the loop), beside any scaling's note
            mrope = mrope_note(s, rot_dim, where)
        if s.get("rope_type") == "yarn" and not rope_notes:
            rope_notes.append(f"YaRN rope scaling (factor {s['factor']:g}, original context "
                              f"{s['original_max_position_embeddings']:g}): the slow pairs' frequencies interpolated")
        if s.get("rope_type") == "longrope" and not rope_notes:
            rope_notes.append(f"LongRoPE rope scaling: the frequencies of sequences up to the original context "
                              f"({s['original_max_position_embeddings']:g} tokens), each divided by its short factor "
                              "(longer sequences turn at the long factors, not read)")
        if s.get("rope_type") == "llama3" and not rope_notes:
            rope_notes.append(
                f"rotary frequencies rescaled as Llama 3 does (factor {s['factor']:g}, original context "
                f"{s['original_max_position_embeddings']:g}): the slow ones divided by the factor, the fast ones kept"
            )
        if s.get("llama_4_scaling_beta") and not any("Llama 4's" in n for n in rope_notes):  # Ministral 3's queries
            beta = number(s, where, "llama_4_scaling_beta", low=0.0)
            n = number(s, where, "original_max_position_embeddings", open_low=True)
            rope_notes.append(f"queries scaled by 1 + {beta:g} log(1 + floor(i / {n:g})) at position i (Llama 4's "
                              f"temperature): 1 on the first {n:g} positions, which is what is read")
    if mrope is not None:
        rope_notes.append(mrope)

    turning = [True] * L  # per layer read, whether it rotates queries and keys
    if opts.nope_layers:  # no rotary: frequency 0, every position turned by nothing
        if isinstance(opts.nope_layers, tuple):
            turning = [i not in opts.nope_layers for i in layers]
        elif opts.nope_layers == "no_rope_layers":
            rotating = rope_layers(cfg, n_model, where)
            turning = [rotating[i] for i in layers]
        else:
            turning = [opts.nope_layers != "all" and t != opts.nope_layers for t in types]
        plain = [i for i, on in enumerate(turning) if not on]
        freqs = [torch.zeros_like(f) if i in plain else f for i, f in enumerate(freqs)]
        if len(plain) == L:
            rope_notes.append("no rotary (NoPE) on any layer: the heads see positions only through the causal mask")
        elif plain:
            rope_notes.append(f"no rotary (NoPE) on layers {', '.join(map(str, plain))}: their heads see positions "
                              "only through the causal mask")
    attn_scale = opts.attn_scale
    if amplitudes - {1.0} and any(turning):  # YaRN, LongRoPE scale rotated queries and keys by a factor a (on the
        # layers that rotate them: transformers applies no rotary, so no factor, on a NoPE layer)
        scaling = ", ".join(sorted(kinds))
        if len(amplitudes) > 1:
            raise UnsupportedModelError(f"{where}: the attention factors {sorted(amplitudes)} of its rope scaling "
                                        f"({scaling}) differ between layers")
        a = amplitudes.pop()
        if rot_dim == r and all(turning):  # the whole head on every layer: the logits by a²
            attn_scale = (attn_scale or r**-0.5) * a * a
            rope_notes.append(f"the rope scaling's attention factor {a:.6g} on queries and keys is folded into the "
                              "logit scale as its square")
        elif opts.qk_norm:  # the rows it would scale feed a norm, which would undo it
            what = f"{rot_dim} of {r} head dims" if rot_dim < r else "the layers with rotary alone"
            raise UnsupportedModelError(f"{where}: the attention factor {a:.6g} of its rope scaling ({scaling}) on "
                                        f"{what}, beside QK-norm: not supported")
        else:  # the rotated dims alone: a rotation commutes with a scale, so their rows of W_Q, W_K (and biases) take it
            for ws in (wq, wk, bq, bk):
                for i, w in enumerate(ws):
                    if w is not None and turning[i]:
                        ws[i] = torch.cat([w[:, :rot_dim] * a, w[:, rot_dim:]], dim=1)
            on = "" if all(turning) else " of the layers with rotary"
            rope_notes.append(f"the rope scaling's attention factor {a:.6g} on the {rot_dim} rotated dims of queries "
                              f"and keys{on} is folded into those rows of W_Q and W_K (and their biases)")
    divisors = None if opts.alibi else ts.take("rope_freqs.weight", (rot_dim // 2,), required=False)  # (GGUF's)
    if divisors is not None:  # llama.cpp's form of a frequency scaling (Llama 3.1): f_i / divisor_i
        if bool((divisors <= 0).any()):  # take() has refused non-finite values already
            raise LoadError(f"{ts.origin('rope_freqs.weight')}: rotary frequency divisors must be finite and positive")
        freqs = [f / divisors.double() for f in freqs]
        rope_notes.append("rotary frequencies divided per dimension by the file's rope_freqs (llama.cpp's form of "
                          "Llama 3 rope scaling)")
    qk_layers = [bool(f.any()) for f in freqs] if opts.qk_norm and opts.qk_norm_on == "rotary" else [True] * L
    notes = checkpoint_notes(ckpt, head_note) + rope_notes + list(opts.notes)
    if opts.alibi:
        notes.append("ALiBi positions (maximum bias 8), no rotary: each head's logits get -m_h (i - j), no position "
                     "enters the residual")
    if len(set(own_kv)) > 1:
        notes.append(f"K/V head counts differ between layers ({', '.join(map(str, own_kv))}): each layer's K/V heads "
                     f"are held {G} to a layer, each repeated for the query heads that read it")
    if L != n_model:
        notes.append(f"attention on {L} of the model's {n_model} layers ({', '.join(map(str, layers))}; compscope's layer "
                     f"k is the k-th of these): the others ({family.other_layers}) write to the residual too, and are "
                     "not read")
    if opts.qk_norm:
        over = "per head" if opts.qk_norm_scope == "head" else "over all heads of a layer at once"
        how = "LayerNorm-ed" if opts.qk_norm_kind == "layernorm" else "RMS-normalised"
        each = " (a gain and a bias for each head)" if opts.qk_norm_bias else " (a gain for each head)"
        gains = each if opts.qk_gains_per_head else "" if opts.qk_norm_gains else " (no gains)"
        plain = [str(i) for i, on in enumerate(qk_layers) if not on]
        on = f" on every layer but {', '.join(plain)}" if plain else ""
        notes.append(
            f"QK-norm: q and k are {how} {over}{gains}{on} before the dot product, so W_QK-based "
            "scores (Q/K-composition) describe the bilinear part only; they are approximations"
        )
    if not opts.input_norm:
        notes.append("no norm before the attention: the heads read the raw residual")
    if opts.post_attn_norm:
        notes.append(
            "post-attention norm: each layer's attention output is RMS-normalised before entering "
            "the residual, so W_OV describes what a head writes only up to that per-token scale"
        )
    if opts.sinks:
        notes.append("attention sinks: each head's softmax also spans a learned logit with no value, so its pattern "
                     "sums to less than 1; W_QK-based scores describe the logits before it")
    if opts.attn_softcap is not None:
        notes.append(
            f"attention logits are soft-capped, c tanh(l / c) with c = {opts.attn_softcap:g}: a monotone map of the "
            "bilinear logit, which W_QK-based scores describe before the cap"
        )
    if opts.embed_scale != 1.0:
        why = " (sqrt(d_model))" if abs(opts.embed_scale - d**0.5) <= 1e-9 * d else ""
        notes.append(f"W_E includes the embedding scale {opts.embed_scale:g}{why}; W_U does not")
    residual = family.residual_scale(cfg, where)
    if residual != 1.0 and opts.post_attn_norm:  # the residual receives residual · N(attention output): into N's gain
        g_post = [(g + opts.norm_offset) * residual - opts.norm_offset for g in g_post]
        notes.append(f"the attention-output norm's gain includes the residual multiplier {residual:g}: the residual "
                     "receives that multiple of the norm's output")
    elif residual != 1.0:  # what each head adds to the residual: residual · W_O z (+ residual · b_O)
        wo = [w * residual for w in wo]
        bo = [None if b is None else b * residual for b in bo]
        notes.append(f"W_O (and b_O) include the residual multiplier {residual:g}: the residual receives that "
                     "multiple of the attention output")
    if opts.logit_scale != 1.0 and W_U is not None:
        W_U = W_U * opts.logit_scale
        notes.append(f"W_U includes the logit scale {opts.logit_scale:g} (logits = scale · W_U x)")
    if any(t == "sliding_attention" for t in types):
        sides = f", keys within {window - 1} tokens on either side of the query" if opts.bidirectional else ""
        notes.append(f"sliding-window attention (window {window}{sides}) on {types.count('sliding_attention')} of {L} "
                     "layers")

    def norm(ws, kind=opts.norm_kind, bs=(), at=eps):
        return Norm(kind, torch.stack(ws) if ws else None, torch.stack(bs) if bs else None, at, opts.norm_offset)

    qk_eps = eps if opts.qk_norm_eps is None else opts.qk_norm_eps

    if opts.norm_gains:
        final = ts.take(f"{prefix}{opts.final_norm}.weight", (d,), required=False)
        final_has_bias = opts.norm_bias if opts.final_norm_bias is None else opts.final_norm_bias
        final_bias = [ts.take(f"{prefix}{opts.final_norm}.bias", (d,))] if final is not None and final_has_bias else []
        final_norm = None if final is None else norm([final], bs=final_bias)
    else:  # a norm without parameters has no tensor to say it is there: it always is
        final_norm = norm([])
    return HeadWeights(
        W_Q=torch.stack(wq), W_K=torch.stack(wk), W_V=torch.stack(wv), W_O=torch.stack(wo),
        b_Q=stack(bq), b_K=stack(bk), b_V=stack(bv), b_O=stack(bo),
        W_E=(emb * opts.embed_scale).T if opts.embed_scale != 1.0 else emb.T,
        W_pos=None,
        W_U=W_U, b_U=None,
        kv_map=kv_map,
        attn_norm=norm(g_in, bs=b_in) if opts.input_norm else None,
        final_norm=final_norm,
        norm_placement="pre" if opts.input_norm else "none",
        qk_norm=((norm(qn, opts.qk_norm_kind, qb, qk_eps), norm(kn, opts.qk_norm_kind, kb, qk_eps)) if opts.qk_norm
                 else None),
        qk_norm_scope=opts.qk_norm_scope,
        qk_norm_layers=() if all(qk_layers) else tuple(qk_layers),
        attn_out_norm=norm(g_post) if opts.post_attn_norm else None,
        sinks=torch.stack(sinks) if opts.sinks else None,
        rotary=None if opts.alibi else Rotary(rot_dim, torch.stack(freqs), opts.rotary_style),
        positions="alibi" if opts.alibi else "rotary",
        alibi=alibi_slopes(H).float() if opts.alibi else None,
        attn_scale=attn_scale,
        attn_softcap=opts.attn_softcap,
        causal=not opts.bidirectional,
        sliding_window=tuple(window if t == "sliding_attention" else None for t in types),
        meta=Meta(family.name, where, ckpt.name, "float32", ts.source_dtypes, (), tuple(notes),
                  tuple(own_kv) if len(set(own_kv)) > 1 else ()),
    )


def layer_kv_groups(family: type[LlamaLike], cfg: dict, n_model: int, H: int, layers: list[int], where: str
                    ) -> tuple[int, tuple[int, ...], list[int]]:
    """``(G, kv_map, own)``: the K/V heads held per layer ``G``, the query heads' map onto them, and each read
    layer's own K/V head count ``own``. One count (``num_key_value_heads``) is :func:`kv_groups`'; counts that
    differ between layers (:meth:`LlamaLike.kv_heads_per_layer`, each dividing ``H``) are held at their least
    common multiple ``G``: a layer of ``g`` heads holds each ``G / g`` times, so that query head ``h`` reads
    ``h // (H / G)``, the copy of the head ``h // (H / g)`` it reads in the model."""
    counts = family.kv_heads_per_layer(cfg, n_model, H, where)
    if counts is None:
        G, kv_map = kv_groups(cfg, where, H)
        return G, kv_map, [G] * len(layers)
    own = [counts[i] for i in layers]
    G = math.lcm(*own)  # (each divides H: so does G)
    return G, tuple(h // (H // G) for h in range(H)), own


def _repeated(heads: torch.Tensor, times: int) -> torch.Tensor:
    """``heads: (n, ...)`` with each head ``times`` times in a row, ``(n * times, ...)``; itself once."""
    return heads if times == 1 else heads.repeat_interleave(times, dim=0)


def gated_queries(ckpt: Checkpoint, layers: list[int], H: int, r: int, d: int, prefix: str, at: str = "q_proj",
                  bias: bool = True) -> tuple[Checkpoint, dict[int, torch.Tensor], dict[int, torch.Tensor]]:
    """``ckpt`` whose attending layers' ``self_attn.{at}`` holds, per head, the query's ``r`` rows and then as many
    rows of an output gate (Qwen3.5's ``q_proj``, MiniCPM 5's ``q_gate_proj``), read as a ``q_proj`` of the queries
    alone (and its bias, where stored); with the gates' weights ``(H, r, d)`` and, where ``bias``, biases ``(H, r)``
    per layer, filled as the queries are read."""
    ts = ckpt.tensors
    gates: dict[int, torch.Tensor] = {}
    gate_biases: dict[int, torch.Tensor] = {}

    def query(i: int, name: str) -> torch.Tensor:
        both = ts.take(name, (2 * H * r, d)).reshape(H, 2, r, d)
        gates[i] = both[:, 1].clone()
        return both[:, 0].reshape(H * r, d)

    def query_bias(i: int, name: str) -> torch.Tensor:
        both = ts.take(name, (2 * H * r,)).reshape(H, 2, r)
        if bias:
            gate_biases[i] = both[:, 1].clone()
        return both[:, 0].reshape(H * r)

    made = {}
    for i in layers:
        attn = f"{prefix}layers.{i}.self_attn"
        made[f"{attn}.q_proj.weight"] = (lambda i=i, n=f"{attn}.{at}.weight": query(i, n)), f"{attn}.{at}.weight"
        if f"{attn}.{at}.bias" in ts:
            made[f"{attn}.q_proj.bias"] = (lambda i=i, n=f"{attn}.{at}.bias": query_bias(i, n)), f"{attn}.{at}.bias"
    return dataclasses.replace(ckpt, tensors=ts.derived(made)), gates, gate_biases


def with_output_gates(hw: HeadWeights, gates: list[torch.Tensor], per: str = "per-dimension",
                      biases: list[torch.Tensor] | None = None) -> HeadWeights:
    """``hw`` with each layer's output gate ``W_G`` (``(head, d_head, d_model)`` per layer: Qwen3.5's, AFMoE's;
    LFM3's one row per head, repeated over the head's dims: ``per='per-head'``), its bias ``b_G`` where
    ``biases`` gives one (``(head, d_head)`` per layer), and the note that says what a gate does to what
    ``W_OV`` describes."""
    gate = "sigmoid(W_G x)" if biases is None else "sigmoid(W_G x + b_G)"
    return hw.replace(W_G=torch.stack(gates), b_G=None if biases is None else torch.stack(biases), note=(
        f"gated attention: each head's z is multiplied by {gate} of its query's input before W_O, so W_OV "
        f"describes what a head writes up to that per-token, {per} gate"))


class LlamaLike(Family):
    """The base of the Llama-like families: Llama's module names (hooks), config keys and rotary
    settings, one ``attention_bias`` switch (default off), which layers attend
    (:meth:`attention_layers`) and which of them slide a window (:meth:`layer_types`), and the
    converter run with the family's ``options``. A subclass states its names, the config keys and
    options that differ (and a ``convert`` of its own where it first reads options from its config)."""

    handled = frozenset(
        "hidden_size num_attention_heads num_key_value_heads head_dim num_hidden_layers rms_norm_eps "
        "rope_theta attention_bias qkv_bias sliding_window layer_types max_window_layers use_sliding_window".split()
    )
    ignored = frozenset("pretraining_tp num_local_experts num_experts_per_tok output_router_logits router_aux_loss_coef "
                        "router_jitter_noise num_experts moe_intermediate_size shared_expert_intermediate_size "
                        "decoder_sparse_step norm_topk_prob mlp_only_layers bias moe_num_experts moe_topk "
                        "moe_num_shared_experts".split())  # Mixtral's, Qwen2-MoE's, Aria's MLP; InternLM3's 'bias',
    # its mlp_bias
    accept = {"rope_parameters": rope_accept_yarn, "rope_scaling": rope_accept_yarn}
    options = LlamaLikeOptions()

    hook_points = llamalike_hooks
    attention_biases = config_attention_bias("attention_bias", False)
    other_layers: ClassVar[str] = "Mamba layers"  # a hybrid's layers without attention, as its notes name them

    @classmethod
    def attention_layers(cls, config: dict, n_layers: int, where: str = "config") -> list[int]:
        """The model's layers that hold an attention (all of them; a hybrid's some), in order: the
        ``HeadWeights``' layer ``k`` is the model's layer ``attention_layers(...)[k]``."""
        return list(range(n_layers))

    @classmethod
    def kv_heads_per_layer(cls, config: dict, n_layers: int, n_heads: int, where: str = "config") -> list[int] | None:
        """Each layer's K/V head count where layers differ in it (each dividing ``n_heads``; Nemotron-NAS), or
        None: every layer ``num_key_value_heads``."""
        return None

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        """Per layer 'full_attention' or 'sliding_attention', as transformers builds this family's
        model from ``config``: here as ``layer_types`` lists them, else a window on every layer
        where ``sliding_window`` is set (Mistral). Families with another rule override this."""
        listed = listed_layer_types(config, n_layers, where)
        if listed is not None:
            return listed
        if config.get("sliding_window"):
            integer(config, where, "sliding_window")
        return ["sliding_attention" if config.get("sliding_window") else "full_attention"] * n_layers

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        return convert_llamalike(ckpt, cls, cls.options)

    @classmethod
    def unembedding_of(cls, ckpt: Checkpoint, emb: torch.Tensor, prefix: str) -> tuple[torch.Tensor | None, str | None]:
        """``W_U`` and its note: the model's ``lm_head`` (under the prefixes its wrappers give it), else the tied
        embedding ``emb`` (:func:`~compscope.loading.families.base.unembedding`); a family whose head is no ``W_U``
        says so here."""
        return unembedding(ckpt, ["lm_head.weight", prefix + "lm_head.weight", "language_model.lm_head.weight",
                                  "thinker.lm_head.weight", "text_model.lm_head.weight", "llm.lm_head.weight"], emb)

    @classmethod
    def exact_context(cls, config: dict, where: str = "config") -> int | None:
        """The original context of a LongRoPE rope, or of Llama 4's query temperature (Ministral 3's
        ``llama_4_scaling_beta``): past it the model turns or scales queries otherwise than is read."""
        limits = []
        for t in LAYER_TYPES:
            s = rope_settings(config, t)
            if s.get("rope_type") == "longrope" or s.get("llama_4_scaling_beta"):
                limits.append(int(number(s, where, "original_max_position_embeddings", open_low=True)))
        return min(limits, default=None)


def mrope_note(settings: dict, rot_dim: int, where: str) -> str:
    """Multimodal rotary (Qwen2-VL's ``mrope_section``): the rotated pairs split in sections that
    turn by the temporal, height and width positions of a token. On text all three are the token's
    position, so every pair turns by it, as in the ordinary rotary map, which is what is read. The
    sections must cover the rotated pairs exactly (transformers' split needs it)."""
    sec = settings["mrope_section"]
    if (not isinstance(sec, list) or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in sec)
            or sum(sec) != rot_dim // 2):
        raise LoadError(f"{where}: rope setting 'mrope_section' = {sec!r} is not a list of counts summing to the "
                        f"{rot_dim // 2} rotated pairs of a head")
    return (f"multimodal rotary (mrope sections {sec}): on text the temporal, height and width positions of a token "
            "are its position, so it is the ordinary rotary map, read as such (positions of images not modelled)")


#: Qwen2 and the language models of Qwen2-VL and Qwen2.5-VL (Qwen2's attention; their multimodal
#: rotary is the ordinary one on text: :func:`mrope_note`)
QWEN2 = ("qwen2", "qwen2_vl_text", "qwen2_5_vl_text", "qwen2_5_omni_text")


@register
class Llama(LlamaLike):
    """Llama, Mistral, Ministral, Mixtral, Qwen2, Qwen2-MoE, SmolLM and Arcee checkpoints (the experts
    are MLP: not read), and the language models of Qwen2-VL, Qwen2.5-VL, Aria and DeepSeek-OCR 2."""

    name = "llama"
    about = ("Llama 1-3, Mistral, Ministral, Ministral 3, Mixtral, Qwen2 and 2.5, Qwen2-MoE, the language models of "
             "Qwen2-VL, Qwen2.5-Omni, Aria and DeepSeek-OCR 2, SmolLM, SmolLM2, Arcee, InternLM3, IQuest-Coder")
    model_types = ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "smollm", "smollm2",
                   "qwen2_vl_text", "qwen2_5_vl_text",  # (the language models of Qwen2-VL and Qwen2.5-VL)
                   "qwen2_5_omni_text",  # (Qwen2.5-Omni's thinker's: Qwen2-VL's attention)
                   "arcee", "ministral",  # (Arcee's AFM: Llama's attention; Ministral: Mistral's, per-layer windows)
                   "ministral3",  # (Ministral 3: Mistral's, its queries scaled past the original context)
                   "internlm3", "iquestcoder",  # (InternLM3, IQuest-Coder: configs of transformers' Llama)
                   "aria_text",  # (Aria's language model: Llama's attention in OLMoE's layers, MoE MLPs)
                   "deepseek_ocr2_text")  # (DeepSeek-OCR 2's: Llama's attention in DeepSeek-V2's layers, MoE MLPs)
    architectures = ("LlamaForCausalLM", "MistralForCausalLM", "MixtralForCausalLM", "Qwen2ForCausalLM",
                     "Qwen2MoeForCausalLM", "LlamaModel")
    ignored = LlamaLike.ignored | {"n_group", "n_routed_experts", "n_shared_experts", "routed_scaling_factor",
                                   "topk_group", "topk_method", "mlp_layer_types"}  # (DeepSeek-V2's MoE MLPs)

    @classmethod
    def attention_biases(cls, config: dict) -> tuple[bool, bool]:
        kind = config.get("model_type")
        if kind in ("mistral", "mixtral", "ministral"):
            return False, False
        if kind in QWEN2:
            return True, False  # q/k/v_proj with, o_proj without a bias, whatever the config says
        if kind == "qwen2_moe":
            return bool(config.get("qkv_bias", True)), False  # its switch, default on
        if kind == "internlm3":  # its configs' qkv_bias is transformers' attention_bias (one switch for all four)
            return (bool(config.get("attention_bias") or config.get("qkv_bias") or False),) * 2
        return (bool(config.get("attention_bias") or False),) * 2  # Llama: one switch, default off

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        """Qwen2's windows only with ``use_sliding_window`` on, on the layers from ``max_window_layers``
        up; Qwen2-MoE's only as ``layer_types`` lists them (transformers 4 and 5 slide different
        layers otherwise: refused); Llama's and Mistral's as :meth:`LlamaLike.layer_types`."""
        kind = config.get("model_type")
        if kind not in (*QWEN2, "qwen2_moe"):
            return super().layer_types(config, n_layers, where)
        on = window_switch(config, where)
        listed = listed_layer_types(config, n_layers, where)
        if listed is not None:
            return listed
        if kind == "qwen2_moe" and on:
            raise UnsupportedModelError(f"{where}: use_sliding_window is on and layer_types does not list the sliding "
                                        "layers: transformers 4 slides the layers from max_window_layers up, 5 the "
                                        "even-numbered ones below it; save the config with transformers 5, which lists them")
        return upper_layers_slide(config, n_layers, where, on)


@register
class LlamaAlibi(Llama):
    """Llama's layers with ALiBi in place of rotary, as llama.cpp's Refact and Baichuan 13B graphs run their GGUF
    files: no positions in the residual, each head's logits biased by ``-m_h (i - j)`` with BLOOM's slopes at
    llama.cpp's maximum bias 8 (:func:`~compscope.core.heads.alibi_slopes`), at ``d_head^-1/2``. No HuggingFace model
    type names it (the models' own code is remote): GGUF files alone are read as it (:attr:`gguf_types`), for the
    weight-only commands."""

    name = "llama_alibi"
    about = "Refact, Baichuan 13B (GGUF files, as llama.cpp runs them): Llama's layers with ALiBi in place of rotary"
    model_types = ()
    gguf_types = ("llama_alibi",)
    architectures = ()
    options = LlamaLikeOptions(alibi=True)
