"""EXAONE 3.0 and 3.5 (``exaone``): Llama's attention under LG's own names (``transformer.h.{i}.attn.attention``
with ``out_proj``, ``ln_1``, ``wte``, ``ln_f``; transformers runs it as a Llama, renaming them), the config
keys ``num_layers`` and ``layer_norm_epsilon``, rotary base 500 000 by default.

EXAONE 4.0 (LG AI Research): OLMo-2's layout — no norm before the attention, an RMSNorm on the
attention output before the residual add — with Qwen3's per-head QK-norm, no biases, and, where a
window is set, local layers sliding it in a pattern (``layer_types``, or ``sliding_window_pattern``:
every n-th layer global, or a string such as ``"LLLG"``) while the global ones have no rotary."""

from __future__ import annotations

import dataclasses

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights
from ...errors import LoadError
from . import register
from .llama import Llama, LlamaLike, LlamaLikeOptions, convert_llamalike, every_nth_global, listed_layer_types
from .olmo import raw_residual_hooks


@register
class Exaone4(LlamaLike):
    name = "exaone4"
    about = "EXAONE 4.0 (LG): norms on the attention's output, QK-norm, global layers without rotary"
    model_types = ("exaone4",)
    architectures = ("Exaone4ForCausalLM", "Exaone4Model")
    handled = Llama.handled | {"sliding_window_pattern"}
    hook_points = raw_residual_hooks

    @classmethod
    def attention_biases(cls, config: dict) -> tuple[bool, bool]:
        return False, False  # transformers builds every projection without one

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        """As listed; no window: every layer global; else the pattern: a string of ``L`` (local) and
        ``G`` (global) repeated from layer 0, or every n-th layer global (transformers' default 4)."""
        listed = listed_layer_types(config, n_layers, where)
        if listed is not None or not config.get("sliding_window"):
            return listed or ["full_attention"] * n_layers
        pattern = config.get("sliding_window_pattern")
        if isinstance(pattern, str):
            if not pattern or set(pattern) - {"L", "G"}:
                raise LoadError(f"{where}: config key 'sliding_window_pattern' = {pattern!r} is not a string of "
                                "L and G")
            types = ["sliding_attention" if pattern[i % len(pattern)] == "L" else "full_attention"
                     for i in range(n_layers)]
            return listed_layer_types({**config, "layer_types": types}, n_layers, where)
        return every_nth_global(config, n_layers, where, 4)

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        hybrid = bool(ckpt.config.get("sliding_window"))  # transformers: rotary on every layer without a window
        opts = LlamaLikeOptions(input_norm=False, post_attn_norm=True, qk_norm=True,
                                nope_layers="full_attention" if hybrid else "")
        return convert_llamalike(ckpt, cls, opts)


#: EXAONE 3's names of Llama's config keys (transformers' aliases)
_EXAONE_KEYS = {"num_layers": "num_hidden_layers", "layer_norm_epsilon": "rms_norm_eps"}
#: EXAONE 3's names of Llama's modules, as its files hold them
_EXAONE_NAMES = LlamaLikeOptions(layers_at="h", attn_at="attn.attention", out_proj_at="out_proj", input_norm_at="ln_1",
                                 embed_at="wte", final_norm="ln_f", default_theta=500_000.0)


@register
class Exaone(LlamaLike):
    name = "exaone"
    about = "EXAONE 3.0 and 3.5 (LG): Llama's attention under LG's own names"
    model_types = ("exaone",)
    architectures = ("ExaoneForCausalLM", "ExaoneModel")
    handled = Llama.handled | frozenset(_EXAONE_KEYS)
    ignored = Llama.ignored | {"activation_function", "embed_dropout"}

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg = dict(ckpt.config)
        for theirs, ours in _EXAONE_KEYS.items():
            if theirs in cfg and cfg.get(ours) is None:
                cfg[ours] = cfg[theirs]
        ckpt = dataclasses.replace(ckpt, config=cfg)
        lg = any(n.startswith("transformer.h.") for n in ckpt.tensors.names())  # LG's names, or Llama's
        opts = _EXAONE_NAMES if lg else dataclasses.replace(cls.options, default_theta=500_000.0)
        return convert_llamalike(ckpt, cls, opts)
