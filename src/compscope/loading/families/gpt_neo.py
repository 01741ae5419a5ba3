"""GPT-Neo (and the TinyStories models built on it): pre-LayerNorm, learned absolute positions,
separate ``q/k/v_proj`` without biases, and global layers alternating with local ones.

Two things differ from GPT-2 beyond the layout: the attention logit is the bare ``q·k`` (no
``1/sqrt(d_head)``: ``attn_scale = 1``), and local layers see only the last ``window_size``
positions, ``0 ≤ i − j < window_size`` (recorded per layer as a sliding window).
"""

from __future__ import annotations

import torch

from ..checkpoint import Checkpoint
from ...errors import LoadError, UnsupportedModelError
from ...core.heads import HeadWeights, Meta, Norm
from . import register
from .base import MAX_LAYERS, Family, checkpoint_notes, integer, number, separate_projections, sizes
from .gpt2 import gpt2_outer, ln1_attn_hooks

KINDS = ("global", "local")


def layer_kinds(cfg: dict, n_layers: int, where: str) -> list[str]:
    """Per-layer ``'global'`` / ``'local'`` from ``attention_types`` (``[[kinds, repeats], ...]``,
    expanded as transformers does), checked against ``num_layers``."""
    spec = cfg.get("attention_types")
    if spec is None:
        return ["global"] * n_layers
    bad = LoadError(f"{where}: config key 'attention_types' = {spec!r} is not a list of [kinds, repeats]")
    if not isinstance(spec, list) or not all(isinstance(e, list) and len(e) == 2 and isinstance(e[0], list)
                                             and isinstance(e[1], int) and not isinstance(e[1], bool)
                                             and 0 <= e[1] <= MAX_LAYERS for e in spec):
        raise bad
    kinds = [k for group, n in spec for _ in range(n) for k in group]
    unknown = sorted({str(k) for k in kinds if k not in KINDS})
    if unknown:
        raise UnsupportedModelError(f"{where}: attention types {unknown} are not supported (supported: {', '.join(KINDS)})")
    if len(kinds) != n_layers:
        raise LoadError(f"{where}: attention_types lists {len(kinds)} layers, num_layers is {n_layers}")
    return kinds


@register
class GPTNeo(Family):
    name = "gpt_neo"
    about = "GPT-Neo and the TinyStories models: local and global layers, unscaled logits"
    model_types = ("gpt_neo",)
    architectures = ("GPTNeoForCausalLM", "GPTNeoModel")
    handled = frozenset("hidden_size num_heads num_layers layer_norm_epsilon attention_types attention_layers "
                        "window_size".split())
    ignored = frozenset("embed_dropout resid_dropout summary_type summary_use_proj summary_activation "
                        "summary_proj_to_labels summary_first_dropout".split())

    hf_base = "transformer"

    hook_points = classmethod(ln1_attn_hooks)

    @classmethod
    def attention_biases(cls, config: dict) -> tuple[bool, bool]:
        return False, True  # q/k/v_proj without, out_proj with a bias

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where, ts = ckpt.config, ckpt.source, ckpt.tensors
        cls.check_config(cfg, where)
        d, H, L, r = sizes(cfg, where, heads=("num_heads",), layers=("num_layers",))
        eps = number(cfg, where, "layer_norm_epsilon", default=1e-5)
        kinds = layer_kinds(cfg, L, where)
        window = integer(cfg, where, "window_size", default=256) if "local" in kinds else None
        prefix = "transformer." if "transformer.wte.weight" in ts else ""
        # no q/k/v biases in GPT-Neo's files (processing may add them); its output projection has one
        attn = separate_projections(ts, lambda i: f"{prefix}h.{i}.attn.attention.", L, H, H, r, d, out_bias=True)
        g = [ts.take(f"{prefix}h.{i}.ln_1.weight", (d,)) for i in range(L)]
        beta = [ts.take(f"{prefix}h.{i}.ln_1.bias", (d,)) for i in range(L)]
        W_E, W_pos, W_U, head_note, final = gpt2_outer(ckpt, prefix, d, eps)
        notes = checkpoint_notes(ckpt, head_note)
        if window is not None:
            notes.append(f"local attention (window {window}) on {kinds.count('local')} of {L} layers")
        return HeadWeights(
            **attn,
            W_E=W_E, W_pos=W_pos, W_U=W_U, b_U=None,
            kv_map=tuple(range(H)),
            attn_norm=Norm("layernorm", torch.stack(g), torch.stack(beta), eps),
            final_norm=final,
            norm_placement="pre",
            positions="learned",
            attn_scale=1.0,  # GPT-Neo does not scale q·k
            causal=True,
            sliding_window=tuple(window if k == "local" else None for k in kinds),
            meta=Meta(cls.name, where, ckpt.name, "float32", ts.source_dtypes, (), tuple(notes)),
        )
