"""Gemma 4 (text): Gemma 3's layout with layers that differ from each other.

- Local (sliding-window) and global layers have different head widths (256 and 512 in the
  released models) and K/V head counts; with ``attention_k_eq_v`` a global layer's values are its
  keys' projection (no ``v_proj``).
- QK-norm on queries and keys, and an RMS norm without gain on each value head (``v_norm``);
  logit scale 1; norms multiply by their stored weight (not ``1 + w``).
- Rotary per layer type: the local layers' ordinary map, the global layers' "proportional" one
  (the first quarter of the pairs turn, at the frequencies of the full width; the rest do not).
- After each layer the whole residual is multiplied by a learned scalar (``layer_scalar``).

The canonical form holds one head width and one K/V grouping, so every head is held at the widest
width ``r``: a narrower head's ``w`` dims sit in the slots ``0 .. w/2 - 1`` and ``r/2 .. r/2 + w/2 - 1``
(so that rotate-half pairs stay pairs), the other slots zero; its ``W_Q``, ``W_K``, ``W_V`` rows times
``c = sqrt(r / w)`` and its ``W_O`` columns and QK-norm gains divided by ``c``, so that each norm's
mean over ``r`` slots is the model's over ``w`` dims: every head computes exactly what the model's
does. K/V heads are repeated to the least common multiple of the layers' counts. The residual is
read as the model's divided by the product of the layer scalars before each layer (the norms the
heads read are blind to that scale, up to their epsilon): what layer ``l`` adds is divided by it,
folded into its attention-output norm's gain, and the data runner divides what it hooks.

EmbeddingGemma 2 (:class:`EmbeddingGemma2`) is these layers as an encoder.
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import torch

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights, Norm, Rotary
from ...errors import LoadError, UnsupportedModelError
from . import register
from .base import MAX_HEADS, MAX_LAYERS, integer, number, prefix_of
from .gemma import Gemma, _post_norm_hooks
from .llama import PREFIXES, Llama, LlamaLikeOptions, convert_llamalike, every_nth_global

#: transformers' defaults for the global layers where a config states none
_GLOBAL_HEAD_DIM = 512
_DEFAULT_ROPE = {"sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
                 "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                    "rope_theta": 1_000_000.0}}
_ROPE_TYPES = ("default", "proportional")
#: the per-layer settings a saved config may override (transformers writes ``per_layer_config``)
_PER_LAYER = ("head_dim", "num_key_value_heads")
KV_SHARING = ("its last layers reuse the keys and values of an earlier layer (num_kv_shared_layers, the E2B and E4B "
              "models): those heads' keys and values read the residual at another layer than their queries")


def _rope_ok(v) -> bool:
    return v is None or (isinstance(v, dict) and all(
        isinstance(s, dict) and s.get("rope_type", "default") in _ROPE_TYPES for s in v.values()))


@register
class Gemma4(Gemma):
    name = "gemma4"
    about = ("Gemma 4 31B and 26B-A4B (their language model), and Gemma 4's unified models (their language model: "
             "Gemma 2's layers): local and global layers of different head widths, QK-norm and a value norm, a "
             "residual scale per layer; E2B and E4B refused (shared K/V layers)")
    model_types = ("gemma4_text", "gemma4_unified_text")
    architectures = ("Gemma4ForCausalLM", "Gemma4UnifiedForCausalLM")
    handled = Llama.handled | {"global_head_dim", "num_global_key_value_heads", "per_layer_config", "attention_k_eq_v",
                               "hidden_size_per_layer_input", "vocab_size_per_layer_input"}
    ignored = frozenset({"final_logit_softcapping", "enable_moe_block", "use_double_wide_mlp", "num_experts",
                         "top_k_experts", "moe_intermediate_size", "cache_implementation",
                         "sliding_window_pattern", "_sliding_window_pattern"})  # (transformers: every sixth, whatever)
    accept = {
        "rope_parameters": _rope_ok,
        "use_bidirectional_attention": lambda v: v in (None, "vision"),  # (vision: image tokens only; text is causal)
        "num_kv_shared_layers": lambda v: not v,
        "attention_bias": lambda v: not v,
    }
    hook_points = _post_norm_hooks
    per_layer_heads = True
    default_rope: ClassVar[dict] = _DEFAULT_ROPE  # rope_parameters where a config states none
    global_kv_heads: ClassVar[int | None] = None  # the global layers' K/V heads where no config key states them
    # (None: Gemma 4's rule, the local layers' count)
    encoder: ClassVar[bool] = False  # EmbeddingGemma 2: every query sees keys on both sides, no unembedding

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        """As listed, else every sixth layer global (transformers' rule, which takes no pattern from the
        config); the last layer is global whatever is listed (transformers makes it so)."""
        plain = {k: v for k, v in config.items() if k not in ("sliding_window_pattern", "_sliding_window_pattern")}
        types = every_nth_global(plain, n_layers, where, 6)
        return types[:-1] + ["full_attention"]

    @classmethod
    def residual_divisors(cls, model) -> list[float]:
        scalars = [float(layer.layer_scalar.float().reshape(-1)[0]) for layer in cls.base_model(model).layers]
        return [math.prod(scalars[:i]) for i in range(len(scalars))]

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where = ckpt.config, ckpt.source
        if cfg.get("num_kv_shared_layers"):
            raise UnsupportedModelError(f"{where}: Gemma 4 with shared K/V layers is not read: {KV_SHARING}")
        cls.check_config(cfg, where)
        d = integer(cfg, where, "hidden_size")
        H = integer(cfg, where, "num_attention_heads", high=MAX_HEADS)
        n = integer(cfg, where, "num_hidden_layers", high=MAX_LAYERS)
        types = cls.layer_types(cfg, n, where)
        shapes = _layer_shapes(cfg, where, types, H, cls.global_kv_heads)
        r = max(w for w, _ in shapes)
        G = math.lcm(*(g for _, g in shapes))  # divides H: every count does
        prefix = prefix_of(ckpt.tensors, "layers.0.self_attn.q_proj.weight", PREFIXES, "model.")
        scalars = [ckpt.tensors.take(f"{prefix}layers.{i}.layer_scalar", (1,), required=False) for i in range(n)]
        scalars = [1.0 if s is None else float(s[0]) for s in scalars]
        bad = next((i for i, s in enumerate(scalars) if not s > 0), None)
        if bad is not None:
            raise LoadError(f"{ckpt.tensors.origin(f'{prefix}layers.{bad}.layer_scalar')}: layer_scalar of layer {bad} "
                            f"is {scalars[bad]:g}; a residual scale must be positive")
        divisors = [math.prod(scalars[:i]) for i in range(n)]
        k_eq_v = bool(cfg.get("attention_k_eq_v"))
        made = {}
        for i, ((w, g), t) in enumerate(zip(shapes, types)):
            p = f"{prefix}layers.{i}."
            made.update(_uniform_layer(ckpt.tensors, p, d, H, w, g, r, G, divisors[i],
                                       values_from_keys=k_eq_v and t == "full_attention"))
        plain = {k: v for k, v in cfg.items() if k not in ("per_layer_config", "global_head_dim",
                                                          "num_global_key_value_heads", "rope_parameters")}
        plain.update(head_dim=r, num_key_value_heads=G, layer_types=types)
        eps = number(cfg, where, "rms_norm_eps", default=1e-6)
        opts = LlamaLikeOptions(embed_scale=d**0.5, qk_norm=True, post_attn_norm=True, attn_scale=1.0,
                                norm_eps=eps, bidirectional=cls.encoder, radius="whole")
        tensors = ckpt.tensors.derived(made, hidden=("rope_freqs.weight",))  # (read below, for the global layers)
        hw = convert_llamalike(dataclasses.replace(ckpt, config=plain, tensors=tensors), cls, opts)
        rope = cfg.get("rope_parameters") or cls.default_rope
        freqs = torch.stack([_inv_freq(rope, t, w, r, where) for (w, _), t in zip(shapes, types)])
        rope_divisors = ckpt.tensors.take("rope_freqs.weight", required=False)  # GGUF files only (llama.cpp's)
        if rope_divisors is not None:
            freqs = _divided(freqs, rope_divisors, types, shapes, r, ckpt.tensors.origin("rope_freqs.weight"))
        proportional = any(isinstance(v, dict) and v.get("rope_type") == "proportional" for v in rope.values())
        notes = _notes(cfg, types, shapes, r, G, scalars, k_eq_v, rope_divisors is not None,
                       proportional or rope_divisors is not None)
        counts = tuple(g for _, g in shapes)
        meta = dataclasses.replace(hw.meta, notes=hw.meta.notes + tuple(notes),
                                   kv_heads_own=counts if len(set(counts)) > 1 else ())
        return hw.replace(rotary=Rotary(r, freqs, "half"), v_norm=Norm("rmsnorm", None, None, eps), meta=meta)


#: EmbeddingGemma 2's rotary bases where its config states none (the ordinary map on both layer types)
_ENCODER_ROPE = {"sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
                 "full_attention": {"rope_type": "default", "rope_theta": 1_000_000.0}}


@register
class EmbeddingGemma2(Gemma4):
    """EmbeddingGemma 2: Gemma 4's layers as an encoder. Every query sees the keys within
    ``sliding_window`` tokens on either side on a local layer (``|i − j| ≤ sliding_window``: the
    config states a radius, held as the window ``sliding_window + 1``), every key on a global one;
    the global layers' K/V heads one by default and no ``attention_k_eq_v``; both layer types turn by
    the ordinary rotary map at their own width. Its per-layer inputs are projected from the token
    embeddings alone, another writer (as Gemma 4's per-layer embeddings are), not read. The sentence
    embedding (a projection after the final norm) is no unembedding: ``W_U`` is None."""

    name = "embedding_gemma2"
    about = ("EmbeddingGemma 2: Gemma 4's layers as an encoder (local layers seeing sliding_window tokens on either "
             "side, global ones every key)")
    model_types = ("embedding_gemma2_text",)
    architectures = ("EmbeddingGemma2TextModel",)
    handled = Gemma4.handled - {"max_window_layers", "use_sliding_window", "attention_k_eq_v"} | {"sliding_window_pattern"}
    ignored = Gemma4.ignored - {"sliding_window_pattern", "_sliding_window_pattern"} | {"embedding_dim"}
    accept = {"rope_parameters": _rope_ok, "attention_bias": lambda v: not v, "is_decoder": lambda v: not v}
    default_rope = _ENCODER_ROPE
    global_kv_heads = 1
    encoder = True

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        """As listed, else every ``sliding_window_pattern``-th layer (default 6) global; the last layer
        global whatever is listed (transformers makes it so)."""
        return every_nth_global(config, n_layers, where, 6)[:-1] + ["full_attention"]


def _notes(cfg: dict, types: list[str], shapes: list[tuple[int, int]], r: int, G: int, scalars: list[float],
           k_eq_v: bool, rope_freqs: bool, proportional: bool = True) -> list[str]:
    """What Gemma 4's ``meta.notes`` say beside the Llama-like ones: the value norm and the rotary map
    per layer type, and, where the model has them, llama.cpp's rope_freqs, the widths held at one, the K/V
    counts repeated, the values from the keys, the per-layer embeddings and the layer scalars."""
    widths = sorted({w for w, _ in shapes})
    counts = [g for _, g in shapes]
    notes = [
        "value norm: each value head is RMS-normalised (no gain) before W_O, so W_OV describes what a head writes "
        "up to that per-token scale",
        "rotary per layer type (rope_parameters): a head turns its own pairs at its own width's frequencies"
        + ("; the proportional map of the global layers turns only the first of them" if proportional else ""),
    ]
    if rope_freqs:
        notes.append("global layers' rotary frequencies divided by the file's rope_freqs (llama.cpp's form of the "
                     "proportional map: a divisor of 1e30 leaves a pair unturned)")
    if len(widths) > 1:
        notes.append(f"heads of widths {', '.join(map(str, widths))} are all held {r} wide: a narrower head's dims "
                     "in half of the slots of each rotary half, the rest zero, scaled so that its norms are the "
                     "model's (exact)")
    if len(set(counts)) > 1:
        notes.append(f"K/V heads per layer {'/'.join(map(str, sorted(set(counts))))}: held as {G} per layer, "
                     "a layer with fewer repeating each for the query heads that share it (exact)")
    if k_eq_v and "full_attention" in types:
        notes.append("global layers' values come from the key projection (attention_k_eq_v): W_V = W_K there, "
                     "before the key's norm and rotary map")
    if cfg.get("hidden_size_per_layer_input"):
        notes.append("per-layer embeddings: after each layer a gated projection of a per-layer token embedding is "
                     "added to the residual, another writer (as the MLPs are), not read")
    if any(s != 1.0 for s in scalars):
        notes.append(f"the residual is scaled after every layer (layer scalars {min(scalars):.3g} to "
                     f"{max(scalars):.3g}): compscope reads it divided by the product of the scales before each "
                     "layer, and what layer l adds (its attention-output norm's gain) divided by that product")
    return notes


def _layer_shapes(cfg: dict, where: str, types: list[str], n_heads: int,
                  global_kv: int | None = None) -> list[tuple[int, int]]:
    """Per layer ``(head width, K/V heads)``: the config's ``head_dim`` and ``num_key_value_heads``
    (transformers' defaults 256 and 4), the global layers' ``global_head_dim`` (512) and, with
    ``attention_k_eq_v``, ``num_global_key_value_heads``; or as a saved ``per_layer_config`` overrides them.
    ``global_kv``: the global layers' count by default, whatever ``attention_k_eq_v`` says (EmbeddingGemma 2)."""
    w0 = integer(cfg, where, "head_dim", default=256)
    g0 = integer(cfg, where, "num_key_value_heads", default=4, high=MAX_HEADS)
    shapes = [(w0, g0)] * len(types)
    per = cfg.get("per_layer_config")
    if per is None:
        wg = integer(cfg, where, "global_head_dim", default=_GLOBAL_HEAD_DIM)
        if global_kv is not None:
            gg = integer(cfg, where, "num_global_key_value_heads", default=global_kv, high=MAX_HEADS)
        else:
            gg = integer(cfg, where, "num_global_key_value_heads", default=g0, high=MAX_HEADS) if cfg.get(
                "attention_k_eq_v", True) else g0
        shapes = [(wg, gg) if t == "full_attention" else s for s, t in zip(shapes, types)]
    else:
        if not isinstance(per, dict):
            raise LoadError(f"{where}: config key 'per_layer_config' = {per!r} is not a mapping of layers to settings")
        for key, over in per.items():
            i = int(key) if isinstance(key, (int, str)) and str(key).isdigit() else -1
            if not 0 <= i < len(types) or not isinstance(over, dict):
                raise LoadError(f"{where}: per_layer_config entry {key!r}: {over!r} is not a layer's settings")
            unknown = sorted(set(over) - set(_PER_LAYER))
            if unknown:
                raise UnsupportedModelError(f"{where}: per_layer_config overrides {unknown} for layer {i}; compscope "
                                            f"reads per-layer {' and '.join(_PER_LAYER)} only")
            here = f"{where} (per_layer_config, layer {i})"
            shapes[i] = (integer(over, here, "head_dim", default=w0),
                         integer(over, here, "num_key_value_heads", default=g0, high=MAX_HEADS))
    for i, (w, g) in enumerate(shapes):
        if w % 2:
            raise LoadError(f"{where}: layer {i}'s head width {w} is odd; rotary heads pair their dims")
        if n_heads % g:
            raise UnsupportedModelError(f"{where}: layer {i} has {g} K/V heads, which do not divide its {n_heads} "
                                        "query heads")
    return shapes


def _slots(w: int, r: int) -> torch.Tensor:
    """Where a head's ``w`` dims sit among ``r``: its halves at the start of each of ``r``'s halves."""
    return torch.cat([torch.arange(w // 2), r // 2 + torch.arange(w // 2)])


def _padded(t: torch.Tensor, n: int, w: int, r: int, scale: float) -> torch.Tensor:
    """Rows ``(n * w, ...)`` of ``n`` heads as ``(n, r, ...)``, each head's rows in its :func:`_slots`, times
    ``scale``."""
    heads = t.reshape(n, w, *t.shape[1:]) * scale
    if w == r:
        return heads
    out = heads.new_zeros(n, r, *t.shape[1:])
    out[:, _slots(w, r)] = heads
    return out


def _uniform_layer(ts, p: str, d: int, H: int, w: int, g: int, r: int, G: int, divisor: float,
                   values_from_keys: bool) -> dict:
    """The layer's attention tensors (under ``p``) as :func:`~.llama.convert_llamalike` reads them for
    heads ``r`` wide and ``G`` K/V heads (module docstring): ``{name: (make, source name)}``."""
    c = math.sqrt(r / w)
    at, post = p + "self_attn.", p + "post_attention_layernorm.weight"

    def kv(src: str, *width: int):
        def make():
            heads = _padded(ts.take(src, (g * w, *width)), g, w, r, c)
            return heads[torch.arange(G) // (G // g)].reshape(G * r, *width)
        return make, src

    def q(src: str, *width: int):
        return (lambda: _padded(ts.take(src, (H * w, *width)), H, w, r, c).reshape(H * r, *width)), src

    def out():
        cols = ts.take(at + "o_proj.weight", (d, H * w))
        return _padded(cols.T, H, w, r, 1 / c).reshape(H * r, d).T

    def gain(src: str):
        return (lambda: _padded(ts.take(src, (w,))[:, None], 1, w, r, 1 / c).reshape(r)), src

    v_from = at + ("k_proj" if values_from_keys else "v_proj")
    # biases a file may hold beside them (transformers builds none for Gemma 4: read as they would be, then left out)
    biases = {name: made for name, made in ((at + "q_proj.bias", q(at + "q_proj.bias")),
                                            (at + "k_proj.bias", kv(at + "k_proj.bias")),
                                            (at + "v_proj.bias", kv(v_from + ".bias")),
                                            (at + "o_proj.bias", ((lambda: ts.take(at + "o_proj.bias", (d,))),
                                                                  at + "o_proj.bias"))) if made[1] in ts}
    return {
        **biases,
        at + "q_proj.weight": q(at + "q_proj.weight", d),
        at + "k_proj.weight": kv(at + "k_proj.weight", d),
        at + "v_proj.weight": kv(v_from + ".weight", d),
        at + "o_proj.weight": (out, at + "o_proj.weight"),
        at + "q_norm.weight": gain(at + "q_norm.weight"),
        at + "k_norm.weight": gain(at + "k_norm.weight"),
        post: ((lambda: ts.take(post, (d,)) / divisor), post),
    }


def _divided(freqs: torch.Tensor, divisors: torch.Tensor, types: list[str], shapes: list, r: int,
             where: str) -> torch.Tensor:
    """``freqs`` with those of the global layers divided by llama.cpp's ``rope_freqs``, one divisor per
    pair of their width (which must be the widest), as llama.cpp applies them; a divisor of 1e30 or
    more turns a pair by nothing (exactly 0 here, as transformers' proportional map has it)."""
    full = [i for i, t in enumerate(types) if t == "full_attention"]
    widths = {shapes[i][0] for i in full}
    if divisors.ndim != 1 or widths != {r} or divisors.shape[0] != r // 2 or bool((divisors <= 0).any()):
        raise LoadError(f"{where}: tensor 'rope_freqs' ({tuple(divisors.shape)}) is not a positive divisor for each "
                        f"of the {r // 2} rotary pairs of the global layers")
    out = freqs.clone()
    d = divisors.double()
    out[full] = torch.where(d >= 1e30, 0.0, freqs[full] / d)
    return out


def _inv_freq(rope: dict, layer_type: str, w: int, r: int, where: str) -> torch.Tensor:
    """A layer's ``r / 2`` rotary frequencies in the padded layout (:func:`_slots`; float64): its own
    ``w / 2`` pairs first, from its ``rope_parameters`` entry — ``default``: ``θ^(-2i/w)``;
    ``proportional``: the first ``⌊p w / 2⌋`` of those, the rest 0, all divided by ``factor`` — and 0
    for the empty slots."""
    s = rope.get(layer_type)
    if not isinstance(s, dict):
        raise LoadError(f"{where}: rope_parameters has no entry for {layer_type} layers")
    kind = s.get("rope_type", "default")
    here = f"{where} (rope_parameters.{layer_type})"
    theta = number(s, here, "rope_theta", open_low=True)
    f = theta ** (-torch.arange(0, w, 2, dtype=torch.float64) / w)
    if kind == "proportional":
        share = number(s, here, "partial_rotary_factor", default=1.0, high=1.0)
        f[int(share * w // 2):] = 0.0
        f = f / number(s, here, "factor", default=1.0, open_low=True)
    elif kind != "default":
        raise UnsupportedModelError(f"{here}: rope_type {kind!r} is not read (Gemma 4: default, proportional)")
    return torch.cat([f, f.new_zeros((r - w) // 2)])
