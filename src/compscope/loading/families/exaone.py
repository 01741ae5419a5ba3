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
from .llama import (Llama, LlamaLike, LlamaLikeOptions, convert_llamalike, every_nth_global, listed_layer_types,
                    llamalike_hooks)
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



#: EXAONE MoE's experts' settings: the attention does not depend on them
_MOE = frozenset("mlp_layer_types first_k_dense_replace moe_intermediate_size num_shared_experts routed_scaling_factor "
                 "n_group topk_group".split())
#: EXAONE MoE's window where its config states none (transformers' default)
EXAONE_MOE_WINDOW = 4096


@register
class ExaoneMoe(Exaone4):
    """EXAONE MoE (``exaone_moe``): EXAONE 4's attention (per-head QK-norm; where a window is set, its
    global layers without rotary, the pattern as EXAONE 4's) in Llama's pre-norm layout
    (``input_layernorm`` before it, nothing on its output); a window of 4096 where the config states
    none, as transformers builds it. The experts are MLP and not read."""

    name = "exaone_moe"
    about = "EXAONE MoE (LG): EXAONE 4's QK-norm and NoPE global layers in Llama's pre-norm layout"
    model_types = ("exaone_moe",)
    architectures = ("ExaoneMoeForCausalLM", "ExaoneMoeModel")
    ignored = Llama.ignored | _MOE
    hook_points = llamalike_hooks

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        if "sliding_window" not in ckpt.config:  # transformers' default window
            ckpt = dataclasses.replace(ckpt, config={**ckpt.config, "sliding_window": EXAONE_MOE_WINDOW})
        hybrid = bool(ckpt.config.get("sliding_window"))  # rotary on every layer without a window
        opts = LlamaLikeOptions(qk_norm=True, nope_layers="full_attention" if hybrid else "")
        return convert_llamalike(ckpt, cls, opts)

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        if "sliding_window" not in config:
            config = {**config, "sliding_window": EXAONE_MOE_WINDOW}
        return super().layer_types(config, n_layers, where)


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
