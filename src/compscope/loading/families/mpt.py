"""MPT (MosaicML: MPT-7B, MPT-30B and their fine-tunes): pre-LayerNorm without biases, ALiBi.

``attn.Wqkv.weight`` is ``(3d, d)``, rows ``[q heads | k heads | v heads]``; no projection has a
bias. Each head adds ``−m_h (i − j)`` to its logits after the logit scale (``softmax_scale``,
default ``d_head^-1/2``). MPT's slopes, ``2^(-8k/P)`` over the smallest power of two ``P >= n``
heads, the even ``k`` first, are BLOOM's (:func:`compscope.core.heads.alibi_slopes`) whatever
``n``; transformers computes them with the maximum bias 8 whatever ``alibi_bias_max`` says.
The attention settings sit in the nested ``attn_config``; transformers runs multi-head ALiBi
attention only, so a config asking for another kind (multi-query, learned positions without
ALiBi, clipped or normed q/k) is refused by name rather than read as a model that does not run.
"""

from __future__ import annotations

import torch

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights, Meta, Norm, alibi_slopes
from ...errors import UnsupportedModelError
from . import register
from .base import (COMMON_IGNORED, Family, checkpoint_notes, is_off, number, sizes, split_cols, split_rows, stack,
                   unembedding)


#: ``attn_config`` key -> the values transformers' MPT computes with (absent keys pass)
_ATTN_ACCEPT = {
    "attn_type": lambda v: v in (None, "multihead_attention"),
    "alibi": lambda v: v is True,
    "clip_qkv": lambda v: v is None,
    "qk_ln": lambda v: not v,
    "prefix_lm": lambda v: not v,
    "attn_uses_sequence_id": lambda v: not v,
    "alibi_bias_max": lambda v: v in (None, 8),  # transformers computes with 8 whatever it says
}
#: read (``softmax_scale``) or not what is computed (dropout, the kernel)
_ATTN_OTHER = frozenset("softmax_scale attn_pdrop attn_impl".split())


@register
class MPT(Family):
    name = "mpt"
    about = "MPT-7B, MPT-30B: ALiBi"
    model_types = ("mpt",)
    architectures = ("MptForCausalLM", "MPTForCausalLM", "MptModel")
    handled = frozenset("d_model n_heads n_layers hidden_size num_attention_heads num_hidden_layers layer_norm_epsilon "
                        "attn_config no_bias".split())
    # training settings (dropout, initialisation, the gradient share of the embedding) and numerics
    # (the norms' precision); learned_pos_emb: no position table where ALiBi is on (attn_config)
    ignored = frozenset("expansion_ratio max_seq_len resid_pdrop emb_pdrop init_device embedding_fraction norm_type "
                        "initializer_range learned_pos_emb init_config fc_type ffn_config verbose".split())
    accept = {"logit_scale": lambda v: v is None}

    hf_base = "transformer"

    @classmethod
    def hook_points(cls, model):
        """MPT blocks: ``norm_1`` reads the residual, ``attn`` returns what is added."""
        return [(b.norm_1, b.attn) for b in cls.base_model(model).blocks]

    @classmethod
    def logit_scale(cls, cfg: dict, where: str) -> float:
        """The logit scale (0 for ``d_head^-1/2``) from ``attn_config``, every setting transformers
        would not compute as the config says refused by name."""
        ac = cfg.get("attn_config") or {}
        if not isinstance(ac, dict):
            raise UnsupportedModelError(f"{where}: config key 'attn_config' = {ac!r} is not a mapping")
        bad = [f"attn_config.{k}={v!r}" for k, v in ac.items()
               if (k in _ATTN_ACCEPT and not _ATTN_ACCEPT[k](v))
               or (k not in _ATTN_ACCEPT and k not in _ATTN_OTHER and k not in COMMON_IGNORED and not is_off(v))]
        if bad:
            raise UnsupportedModelError(f"{where}: the mpt family does not support these config settings: {', '.join(bad)}")
        if ac.get("softmax_scale") is None:
            return 0.0
        return number(ac, f"{where} (attn_config)", "softmax_scale", open_low=True)

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where, ts = ckpt.config, ckpt.source, ckpt.tensors
        cls.check_config(cfg, where)
        d, H, L, r = sizes(cfg, where, width=("d_model", "hidden_size"), heads=("n_heads", "num_attention_heads"),
                           layers=("n_layers", "num_hidden_layers"))
        eps = number(cfg, where, "layer_norm_epsilon", default=1e-5)
        scale = cls.logit_scale(cfg, where)
        prefix = "transformer." if "transformer.wte.weight" in ts else ""
        parts: dict[str, list] = {k: [] for k in ("W_Q", "W_K", "W_V", "W_O", "b_QKV", "b_O", "g")}
        unbuilt = [f"{prefix}norm_f.bias"]  # transformers builds MPT's norms without biases
        for i in range(L):
            p = f"{prefix}blocks.{i}."
            for x, w in zip("QKV", ts.take(p + "attn.Wqkv.weight", (3 * d, d)).split(d)):
                parts[f"W_{x}"].append(split_rows(w, H, r))
            parts["W_O"].append(split_cols(ts.take(p + "attn.out_proj.weight", (d, d)), H, r))
            # projection biases: none in transformers' MPT, so a folder's are dropped (to_heads says so)
            parts["b_QKV"].append(ts.take(p + "attn.Wqkv.bias", (3 * d,), required=False))
            parts["b_O"].append(ts.take(p + "attn.out_proj.bias", (d,), required=False))
            parts["g"].append(ts.take(p + "norm_1.weight", (d,)))
            unbuilt.append(p + "norm_1.bias")
        present = [n for n in unbuilt if n in ts]
        for n in present:
            ts.leave(n)
        b_qkv = stack(parts["b_QKV"])
        final = ts.take(prefix + "norm_f.weight", (d,), required=False)
        emb = ts.take(prefix + "wte.weight")
        W_U, head_note = unembedding(ckpt, ["lm_head.weight"], emb)
        notes = checkpoint_notes(ckpt, head_note) + ["ALiBi positions: each head's logits get -m_h (i - j), no position "
                                                     "enters the residual"]
        if present:
            notes.append(f"{len(present)} norm biases not read ({present[0]}, ...): transformers builds MPT's norms "
                         "without biases and ignores them")
        return HeadWeights(
            W_Q=torch.stack(parts["W_Q"]), W_K=torch.stack(parts["W_K"]), W_V=torch.stack(parts["W_V"]),
            W_O=torch.stack(parts["W_O"]),
            **({"b_Q": None, "b_K": None, "b_V": None} if b_qkv is None else
               {f"b_{x}": b.reshape(L, H, r) for x, b in zip("QKV", b_qkv.split(d, dim=1))}),
            b_O=stack(parts["b_O"]),
            W_E=emb.T, W_pos=None, W_U=W_U, b_U=None,
            kv_map=tuple(range(H)),
            attn_norm=Norm("layernorm", torch.stack(parts["g"]), None, eps),
            final_norm=None if final is None else Norm("layernorm", final[None], None, eps),
            norm_placement="pre",
            positions="alibi",
            alibi=alibi_slopes(H).float(),
            attn_scale=scale,
            causal=True,
            sliding_window=(None,) * L,
            meta=Meta(cls.name, where, ckpt.name, "float32", ts.source_dtypes, (), tuple(notes)),
        )

    @classmethod
    def attention_biases(cls, config: dict) -> tuple[bool, bool]:
        return False, False  # transformers builds Wqkv and out_proj without biases, whatever no_bias says
