"""MiMo-V2-Flash (Xiaomi's ``mimo_v2_flash``): global and sliding-window attention layers of Llama's form, the
sliding ones with twice the K/V heads of the global ones and a sink logit per head; value heads narrower than the
query and key heads.

Each layer's K/V heads are held at the least common multiple of the two counts, each repeated for the query heads that
read it (:func:`~compscope.loading.families.llama.layer_kv_groups`). A value head ``v_head_dim`` wide is held
``head_dim`` wide, its dims first and zero rows after them, and ``W_O``'s columns for it likewise (zero columns: no
product changes, as multi-head latent attention's narrow values are held); the model's constant scale on the values,
``attention_value_scale``, is folded into ``W_V``. The sliding layers' sinks are read as gpt-oss's; a global layer has
none, held as a sink logit of −∞ (a key every query sees with weight 0). Rotary turns the first
``int(head_dim · partial_rotary_factor)`` dims of each head, by each layer type's base. The experts and the
multi-token-prediction layers are not read.

Its released configs carry keys of their own model code (``hybrid_layer_pattern``, ``swa_num_key_value_heads``, the
``swa_`` head sizes, ``layernorm_epsilon``, top-level ``rope_theta``, ``swa_rope_theta`` and
``partial_rotary_factor``), which transformers does not read: it builds the model from its own keys and defaults
(``layer_types``, twice ``num_key_value_heads`` on a sliding layer, ``rms_norm_eps``, ``rope_parameters``). compscope
reads the model transformers builds, and refuses by name a released key that says otherwise
(:func:`as_transformers_builds`).
"""

from __future__ import annotations

import dataclasses
import math

import torch

from ...core.heads import HeadWeights
from ...errors import LoadError, UnsupportedModelError
from ..checkpoint import Checkpoint
from . import register
from .base import MAX_HEADS, MAX_LAYERS, integer, number, rope_accept_yarn, zero_padded
from .llama import Llama, LlamaLike, LlamaLikeOptions, convert_llamalike, listed_layer_types

#: the MLP's and the experts' settings: the attention does not depend on them
_NOT_ATTENTION = frozenset("moe_intermediate_size n_routed_experts num_experts_per_tok n_group topk_group "
                           "norm_topk_prob routed_scaling_factor mlp_layer_types output_router_logits "
                           "topk_method".split())
#: transformers' rotary settings where a config states no rope_parameters (it reads no other rope key)
_DEFAULT_ROPE = {"full_attention": {"rope_type": "default", "rope_theta": 5_000_000.0, "partial_rotary_factor": 0.334},
                 "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0, "partial_rotary_factor": 0.334}}
#: the released configs' keys transformers does not read (checked against what it builds, then left out)
_RELEASED = ("hybrid_layer_pattern", "swa_num_key_value_heads", "swa_num_attention_heads", "swa_head_dim",
             "swa_v_head_dim", "layernorm_epsilon", "rope_theta", "swa_rope_theta", "partial_rotary_factor",
             "rope_scaling", "add_full_attention_sink_bias", "add_swa_attention_sink_bias")


def _released_window(size: int) -> int:
    """The window transformers builds from the released key ``sliding_window_size``: one more."""
    return size + 1


def as_transformers_builds(cfg: dict, where: str, layer_types) -> dict:
    """``cfg`` as transformers builds MiMo-V2-Flash from it: its defaults where a key is missing (``head_dim`` 192,
    ``v_head_dim`` 128, ``num_key_value_heads`` 4, ``sliding_window`` 129, or ``sliding_window_size`` + 1,
    ``rms_norm_eps`` 1e-5, ``attention_value_scale`` 0.707, and 1 where it is null, ``rope_parameters``
    :data:`_DEFAULT_ROPE`), and each released key of :data:`_RELEASED`
    checked against what that builds (a disagreement refused by name: transformers would run another model than the
    key says) and left out."""
    out = {k: v for k, v in cfg.items() if k not in _RELEASED}
    out.setdefault("head_dim", 192)
    out.setdefault("v_head_dim", 128)
    out.setdefault("num_key_value_heads", 4)
    out.setdefault("rms_norm_eps", 1e-5)
    if out.get("attention_value_scale", 0.707) is None:  # (transformers: none stated, 0.707; stated None, 1)
        out["attention_value_scale"] = 1.0
    out.setdefault("attention_value_scale", 0.707)
    if cfg.get("sliding_window_size") is not None:
        out["sliding_window"] = _released_window(integer(cfg, where, "sliding_window_size"))
    out.setdefault("sliding_window", 129)
    rope = out.get("rope_parameters") or _DEFAULT_ROPE
    out["rope_parameters"] = rope
    n = integer(out, where, "num_hidden_layers", high=MAX_LAYERS)
    types = layer_types(out, n, where)
    per_type = {t: rope.get(t, {}) if isinstance(rope, dict) else {} for t in ("full_attention", "sliding_attention")}
    built = {"hybrid_layer_pattern": [int(t == "sliding_attention") for t in types],
             "swa_num_key_value_heads": 2 * integer(out, where, "num_key_value_heads", high=MAX_HEADS),
             "swa_num_attention_heads": out.get("num_attention_heads"), "swa_head_dim": out["head_dim"],
             "swa_v_head_dim": out["v_head_dim"], "layernorm_epsilon": out["rms_norm_eps"],
             "rope_theta": per_type["full_attention"].get("rope_theta"),
             "swa_rope_theta": per_type["sliding_attention"].get("rope_theta"),
             "partial_rotary_factor": per_type["full_attention"].get("partial_rotary_factor", 0.334),
             "rope_scaling": None, "add_full_attention_sink_bias": False, "add_swa_attention_sink_bias": True}
    for key in _RELEASED:
        if key in cfg and not _same(cfg[key], built[key]):
            raise UnsupportedModelError(
                f"{where}: config key '{key}' = {cfg[key]!r}, which transformers does not read: it builds this model "
                f"with {built[key]!r} there (from its own keys and defaults), so compscope cannot read it as the key "
                "says")
    return out


def _same(a, b) -> bool:
    """Whether two config values agree: a switch or setting off in both (None, false, empty), numbers within float
    rounding, or equal."""
    if a is None or b is None or isinstance(a, bool) or isinstance(b, bool):
        return bool(a) == bool(b)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=1e-9)
    return a == b


@register
class MimoV2Flash(LlamaLike):
    name = "mimo_v2_flash"
    about = ("MiMo-V2-Flash (Xiaomi): global and sliding layers, twice the K/V heads and a sink per head on the "
             "sliding ones, value heads narrower than the query heads, partial rotary")
    model_types = ("mimo_v2_flash",)
    architectures = ("MiMoV2FlashForCausalLM", "MiMoV2FlashModel")
    handled = Llama.handled | {"v_head_dim", "attention_value_scale", "rope_parameters", "sliding_window_size",
                               *_RELEASED}
    ignored = Llama.ignored | _NOT_ATTENTION
    accept = {"rope_parameters": rope_accept_yarn, "rope_scaling": rope_accept_yarn,
              "attention_bias": lambda v: not v}  # (no bias: the real model has none)
    per_layer_heads = True
    options = LlamaLikeOptions(partial_rotary=0.334)  # (transformers' default share where a layer type states none)
    saved_names = ((r"\.self_attn\.attention_sink_bias$", ".self_attn.sinks"),)  # (its files' name, as released)

    @classmethod
    def runs_windows(cls, config) -> bool:
        """Also unless the window transformers built differs from the released ``sliding_window_size`` + 1 that
        compscope reads (transformers before 5.20 ignores that key); the data runner then keeps to sequences
        within the narrower window."""
        size = getattr(config, "sliding_window_size", None)
        return super().runs_windows(config) and (size is None or
                                                 getattr(config, "sliding_window", None) == _released_window(size))

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        """As listed, else transformers' default: layer 0 and every sixth from layer 5 global, the others sliding."""
        listed = listed_layer_types(config, n_layers, where)
        if listed is not None:
            return listed
        return ["full_attention" if i == 0 or (i + 1) % 6 == 0 else "sliding_attention" for i in range(n_layers)]

    @classmethod
    def kv_heads_per_layer(cls, config: dict, n_layers: int, n_heads: int, where: str = "config") -> list[int]:
        """``num_key_value_heads`` on a global layer, twice as many on a sliding one (as transformers builds them)."""
        g = integer(config, where, "num_key_value_heads", high=MAX_HEADS)
        counts = [2 * g if t == "sliding_attention" else g for t in cls.layer_types(config, n_layers, where)]
        bad = next((c for c in counts if n_heads % c), None)
        if bad is not None:
            raise LoadError(f"{where}: {bad} K/V heads on a layer (num_key_value_heads = {g}, twice on a sliding "
                            f"layer) do not divide num_attention_heads = {n_heads} into groups")
        return counts

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where, ts = ckpt.config, ckpt.source, ckpt.tensors
        cls.check_config(cfg, where)
        cfg = as_transformers_builds(cfg, where, cls.layer_types)
        ckpt = dataclasses.replace(ckpt, config=cfg)
        d = integer(cfg, where, "hidden_size")
        H = integer(cfg, where, "num_attention_heads", high=MAX_HEADS)
        r = integer(cfg, where, "head_dim")  # (as_transformers_builds: each with transformers' default)
        w = integer(cfg, where, "v_head_dim", high=r)
        scale = number(cfg, where, "attention_value_scale", open_low=True)
        n = integer(cfg, where, "num_hidden_layers", high=MAX_LAYERS)
        types = cls.layer_types(cfg, n, where)
        counts = cls.kv_heads_per_layer(cfg, n, H, where)
        prefix = next((p for p in ("model.", "") if f"{p}layers.0.self_attn.q_proj.weight" in ts), "model.")
        made = {}
        for i, g in enumerate(counts):
            at = f"{prefix}layers.{i}.self_attn."
            made[at + "v_proj.weight"] = (lambda src=at + "v_proj.weight", g=g: zero_padded(
                ts.take(src, (g * w, d)).reshape(g, w, d) * scale, r).reshape(g * r, d), at + "v_proj.weight")
            if at + "v_proj.bias" in ts:  # (a bias transformers does not build, read as wide and then left out)
                made[at + "v_proj.bias"] = (lambda src=at + "v_proj.bias", g=g: zero_padded(
                    ts.take(src, (g * w,)).reshape(g, w) * scale, r).reshape(g * r), at + "v_proj.bias")
            made[at + "o_proj.weight"] = (lambda src=at + "o_proj.weight": zero_padded(
                ts.take(src, (d, H * w)).T.reshape(H, w, d), r).reshape(H * r, d).T, at + "o_proj.weight")
        sinks = [ts.take(f"{prefix}layers.{i}.self_attn.sinks", (H,)) if t == "sliding_attention"
                 else torch.full((H,), float("-inf")) for i, t in enumerate(types)]
        hw = convert_llamalike(dataclasses.replace(ckpt, tensors=ts.derived(made)), cls, cls.options)
        notes = [f"value heads {w} wide held {r} wide (zero rows after their dims, zero columns of W_O for them: no "
                 "product changes)" if w < r else None,
                 f"the values' constant scale attention_value_scale = {scale:g} folded into W_V" if scale != 1.0
                 else None,
                 "attention sinks on the sliding layers (a learned logit per head, with no value); the global layers "
                 "have none, held as a sink logit of -inf"]
        meta = dataclasses.replace(hw.meta, notes=hw.meta.notes + tuple(x for x in notes if x))
        return dataclasses.replace(hw, sinks=torch.stack(sinks), meta=meta)
