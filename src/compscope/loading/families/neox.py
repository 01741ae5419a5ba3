"""GPT-NeoX / Pythia: pre-LayerNorm, fused QKV interleaved per head, partial rotary.

``query_key_value.weight`` is ``(3d, d)`` with rows ordered ``[head][q|k|v][d_head]``: reshape
to ``(H, 3, d_head, d)``. Rotary turns only the first ``partial_rotary_factor * d_head``
dims of each head (Pythia: 25%). ``use_parallel_residual`` (attention and MLP read the same
residual) does not change the heads' weights; it is recorded in the notes. Persimmon
(:class:`Persimmon`) is the same attention under other names, with a LayerNorm on each query and
key head.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import torch

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights, Meta, Norm
from . import register
from .base import (Family, checkpoint_notes, config_attention_bias, final_layernorm, layer_hooks, layer_rotary, number,
                   prefix_of, rope_accept, rope_settings, sizes, split_cols, stack, unembedding)


@register
class GPTNeoX(Family):
    name = "neox"
    about = "Pythia, GPT-NeoX-20B: fused qkv per head, partial rotary"
    model_types = ("gpt_neox",)
    architectures = ("GPTNeoXForCausalLM", "GPTNeoXModel")
    handled = frozenset(
        "hidden_size num_attention_heads num_hidden_layers layer_norm_eps rotary_pct rotary_emb_base "
        "use_parallel_residual attention_bias partial_rotary_factor rope_theta".split()
    )
    accept = {"rope_parameters": rope_accept, "rope_scaling": rope_accept}

    hf_base = "gpt_neox"
    attention_biases = config_attention_bias("attention_bias", True)

    hook_points = layer_hooks("input_layernorm", "attention")
    #: the attention module's name in a layer, the token embedding's and final norm's names in the base model,
    #: and the unembedding's names (Pythia's files: 'embed_out'; transformers >= 5: 'lm_head')
    attention_at: ClassVar[str] = "attention"
    embed_at: ClassVar[str] = "embed_in"
    final_norm_at: ClassVar[str] = "final_layer_norm"
    heads: ClassVar[tuple[str, ...]] = ("embed_out.weight", "lm_head.weight")
    #: where the base model's tensors may sit
    prefixes: ClassVar[tuple[str, ...]] = ("gpt_neox.", "")
    #: the output projection's bias, under the attention module
    out_bias_at: ClassVar[str] = "dense.bias"

    @classmethod
    def parallel(cls, config: dict) -> bool:
        """Whether a layer's attention and MLP read the same residual (``use_parallel_residual``)."""
        return config.get("use_parallel_residual", True) is not False

    @classmethod
    def qk_norm(cls, ts, layer_prefix: str, cfg: dict, L: int, r: int, eps: float) -> tuple[Norm, Norm] | None:
        """QK-norm (none here; Persimmon's LayerNorms)."""
        return None

    @classmethod
    def output_biases(cls, found: list[torch.Tensor | None], d: int) -> list[torch.Tensor | None]:
        """Each layer's output-projection bias as read (None where a layer has none): as found here."""
        return found

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where, ts = ckpt.config, ckpt.source, ckpt.tensors
        cls.check_config(cfg, where)
        d, H, L, r = sizes(cfg, where)
        eps = number(cfg, where, "layer_norm_eps", default=1e-5)
        prefix = prefix_of(ts, f"{cls.embed_at}.weight", cls.prefixes, "")
        a = cls.attention_at
        qkv_w, qkv_b, wo, bo, g, beta = ([] for _ in range(6))
        for i in range(L):
            p = f"{prefix}layers.{i}."
            qkv_w.append(ts.take(f"{p}{a}.query_key_value.weight", (3 * d, d)).reshape(H, 3, r, d))
            b = ts.take(f"{p}{a}.query_key_value.bias", (3 * d,), required=False)
            qkv_b.append(None if b is None else b.reshape(H, 3, r))
            wo.append(split_cols(ts.take(f"{p}{a}.dense.weight", (d, d)), H, r))
            bo.append(ts.take(f"{p}{a}.{cls.out_bias_at}", (d,), required=False))
            g.append(ts.take(p + "input_layernorm.weight", (d,)))
            beta.append(ts.take(p + "input_layernorm.bias", (d,)))
        w, b = torch.stack(qkv_w), stack(qkv_b)  # (L, H, 3, r, d), (L, H, 3, r) or None (attention_bias=False)
        emb = ts.take(f"{prefix}{cls.embed_at}.weight")
        W_U, head_note = unembedding(ckpt, list(cls.heads), emb)

        s = rope_settings(cfg)
        if "rotary_emb_base" in cfg:
            s.setdefault("rope_theta", cfg["rotary_emb_base"])
        if "partial_rotary_factor" not in s and "rotary_pct" in cfg:
            s["partial_rotary_factor"] = cfg["rotary_pct"]
        notes = checkpoint_notes(ckpt, head_note)
        if cls.parallel(cfg):
            notes.append("parallel residual: attention and MLP of a layer read the same residual")
        return HeadWeights(
            W_Q=w[:, :, 0].contiguous(), W_K=w[:, :, 1].contiguous(), W_V=w[:, :, 2].contiguous(),
            W_O=torch.stack(wo),
            b_Q=None if b is None else b[:, :, 0].contiguous(),
            b_K=None if b is None else b[:, :, 1].contiguous(),
            b_V=None if b is None else b[:, :, 2].contiguous(),
            b_O=stack(cls.output_biases(bo, d)),
            W_E=emb.T, W_pos=None, W_U=W_U, b_U=None,
            kv_map=tuple(range(H)),
            attn_norm=Norm("layernorm", torch.stack(g), torch.stack(beta), eps),
            final_norm=final_layernorm(ts, prefix + cls.final_norm_at, d, eps),
            norm_placement="pre",
            qk_norm=cls.qk_norm(ts, f"{prefix}layers.", cfg, L, r, eps),
            rotary=layer_rotary(r, s, where, L),
            positions="rotary",
            causal=True,
            sliding_window=(None,) * L,
            meta=Meta(cls.name, where, ckpt.name, "float32", ts.source_dtypes, (), tuple(notes)),
        )


@register
class Persimmon(GPTNeoX):
    """Persimmon (Adept; Fuyu's language model): NeoX's fused ``query_key_value`` per head under
    ``self_attn``, a LayerNorm (gain and bias, shared by the heads) on each query and key head
    before the rotary map (``qk_layernorm``), rotary on ``partial_rotary_factor`` of each head,
    sequential blocks."""

    name = "persimmon"
    about = "Persimmon (Adept), Fuyu's language model: NeoX's fused qkv, QK LayerNorm, partial rotary"
    model_types = ("persimmon",)
    architectures = ("PersimmonForCausalLM", "PersimmonModel")
    handled = frozenset("hidden_size num_attention_heads num_hidden_layers layer_norm_eps rope_theta "
                        "partial_rotary_factor qk_layernorm".split())
    ignored = frozenset({"hidden_dropout"})
    hf_base = "model"
    attention_biases = classmethod(lambda cls, config: (True, True))
    hook_points = layer_hooks("input_layernorm", "self_attn")
    attention_at = "self_attn"
    embed_at = "embed_tokens"
    final_norm_at = "final_layernorm"
    heads = ("lm_head.weight", "language_model.lm_head.weight")  # (the second: Fuyu's)
    prefixes = ("model.", "", "language_model.model.", "model.language_model.")  # (Fuyu's, as transformers 4 and 5 save it)

    @classmethod
    def parallel(cls, config: dict) -> bool:
        return False

    @classmethod
    def qk_norm(cls, ts, layer_prefix: str, cfg: dict, L: int, r: int, eps: float) -> tuple[Norm, Norm] | None:
        """``self_attn.q_layernorm`` and ``k_layernorm`` where ``qk_layernorm`` (transformers' default: on):
        a LayerNorm over each head's ``d_head`` dims, one gain and bias for every head."""
        if cfg.get("qk_layernorm", True) is False:
            return None
        parts = {x: [[ts.take(f"{layer_prefix}{i}.self_attn.{x}_layernorm.{k}", (r,)) for i in range(L)]
                     for k in ("weight", "bias")] for x in "qk"}
        return tuple(Norm("layernorm", torch.stack(parts[x][0]), torch.stack(parts[x][1]), eps) for x in "qk")


@register
class GPTNeoXJapanese(GPTNeoX):
    """GPT-NeoX-Japanese (ABEJA): NeoX's fused ``query_key_value`` per head without biases, rotary on
    ``rotary_pct`` of each head (base ``rotary_emb_base``), sequential blocks, and a bias on the output
    projection of the last layer only, which the attention returns beside its output (``dense_bias``)
    and the layer adds: ``b_O`` is zero on the other layers."""

    name = "gpt_neox_japanese"
    about = "GPT-NeoX-Japanese (ABEJA): NeoX's fused qkv, no q/k/v biases, an output bias on the last layer only"
    model_types = ("gpt_neox_japanese",)
    architectures = ("GPTNeoXJapaneseForCausalLM", "GPTNeoXJapaneseModel")
    handled = frozenset("hidden_size num_attention_heads num_hidden_layers layer_norm_eps rotary_pct rotary_emb_base "
                        "partial_rotary_factor rope_theta".split())
    ignored = frozenset("intermediate_multiple_size hidden_dropout".split())
    hf_base = "gpt_neox_japanese"
    attention_biases = classmethod(lambda cls, config: (False, True))
    prefixes = ("gpt_neox_japanese.", "")
    out_bias_at = "dense_bias"

    @classmethod
    def parallel(cls, config: dict) -> bool:
        return False

    @classmethod
    def output_biases(cls, found: list[torch.Tensor | None], d: int) -> list[torch.Tensor | None]:
        """The last layer's ``dense_bias``, zero on the others (transformers builds it there alone)."""
        return [torch.zeros(d) if t is None else t for t in found] if found[-1] is not None else found

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        """NeoX's reading; an ``attention.dense.bias`` in the file (transformers builds ``dense`` without one
        and ignores it) is left, and said."""
        stray = [n for n in ckpt.tensors.names() if n.endswith(".attention.dense.bias")]
        for name in stray:
            ckpt.tensors.leave(name)
        hw = super().convert(ckpt)
        if not stray:
            return hw
        note = (f"{len(stray)} 'attention.dense.bias' tensors not read: transformers builds the output projection "
                "without a bias (the last layer's dense_bias is b_O) and ignores them")
        return dataclasses.replace(hw, meta=dataclasses.replace(hw.meta, notes=hw.meta.notes + (note,)))

    @classmethod
    def added_by(cls, output) -> torch.Tensor:
        """What the attention adds: its output and, on the last layer, the bias it returns beside it."""
        out, bias = output[0], output[2] if len(output) > 2 else None
        return out if bias is None else out + bias
