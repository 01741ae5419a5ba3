"""GPT-2: pre-LayerNorm, learned absolute positions, fused QKV.

GPT-2 uses ``Conv1D`` layers, ``y = x @ W + b`` with ``W: (in, out)``, the transpose of
``nn.Linear``: ``c_attn.weight`` is ``(d, 3d)`` and its transpose stacks ``W_Q; W_K; W_V``
(rows ``[q heads | k heads | v heads]``); ``c_proj.weight`` is ``(d, d)`` and its transpose
has one ``d × d_head`` block of columns per head (``W_O``).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..checkpoint import Checkpoint
from ...errors import WeightError
from ...core.heads import HeadWeights, Meta, Norm
from . import register
from .base import Family, checkpoint_notes, final_layernorm, number, sizes, split_cols, split_rows, unembedding


def gpt2_outer(ckpt: Checkpoint, prefix: str, d: int, eps: float) -> tuple[Tensor, Tensor, Tensor | None, str | None, Norm | None]:
    """What GPT-2-like checkpoints (GPT-2, GPT-Neo) keep outside the blocks: ``W_E = wteᵀ``,
    ``W_pos = wpeᵀ``, the unembedding (``lm_head``, or the tied ``wte``) with its note, and the final
    LayerNorm ``ln_f`` (None when absent)."""
    ts = ckpt.tensors
    wte = ts.take(prefix + "wte.weight")
    wpe = ts.take(prefix + "wpe.weight")
    if wte.ndim != 2 or wte.shape[1] != d:
        raise WeightError(f"{ts.origin(prefix + 'wte.weight')}: 'wte.weight' has shape {tuple(wte.shape)}, expected (n_vocab, {d})")
    W_U, head_note = unembedding(ckpt, ["lm_head.weight"], wte)
    return wte.T, wpe.T, W_U, head_note, final_layernorm(ts, prefix + "ln_f", d, eps)


def ln1_attn_hooks(cls, model):
    """GPT-2-like blocks (GPT-2, GPT-Neo, GPT-J): ``ln_1`` reads the residual, ``attn`` returns what is added."""
    return [(b.ln_1, b.attn) for b in cls.base_model(model).h]


@register
class GPT2(Family):
    name = "gpt2"
    model_types = ("gpt2",)
    architectures = ("GPT2LMHeadModel", "GPT2Model")
    handled = frozenset("n_embd n_layer n_head hidden_size num_hidden_layers num_attention_heads layer_norm_epsilon "
                        "scale_attn_weights reorder_and_upcast_attn".split())  # the long names: GGUF files
    ignored = frozenset(
        "summary_type summary_use_proj summary_activation summary_proj_to_labels summary_first_dropout "
        "n_special predict_special_tokens feed_forward_length".split()  # the last: transformers from GGUF
    )
    accept = {
        "scale_attn_by_inverse_layer_idx": lambda v: not v,
        "add_cross_attention": lambda v: not v,
        "scale_attn_weights": lambda v: v in (True, None),
    }

    hf_base = "transformer"

    hook_points = classmethod(ln1_attn_hooks)

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where, ts = ckpt.config, ckpt.source, ckpt.tensors
        cls.check_config(cfg, where)
        d, H, L, r = sizes(cfg, where, width=("n_embd", "hidden_size"), heads=("n_head", "num_attention_heads"),
                           layers=("n_layer", "num_hidden_layers"))
        eps = number(cfg, where, "layer_norm_epsilon", default=1e-5)
        prefix = "transformer." if "transformer.wte.weight" in ts else ""
        wq, wk, wv, wo, bq, bk, bv, bo, g, beta = ([] for _ in range(10))
        for i in range(L):
            p = f"{prefix}h.{i}."
            w = ts.take(p + "attn.c_attn.weight", (d, 3 * d)).T  # Conv1D: transpose to (3d, d)
            b = ts.take(p + "attn.c_attn.bias", (3 * d,))
            for part, (ws, bs) in enumerate([(wq, bq), (wk, bk), (wv, bv)]):
                ws.append(split_rows(w[part * d : (part + 1) * d], H, r))
                bs.append(b[part * d : (part + 1) * d].reshape(H, r))
            wo.append(split_cols(ts.take(p + "attn.c_proj.weight", (d, d)).T, H, r))
            bo.append(ts.take(p + "attn.c_proj.bias", (d,)))
            g.append(ts.take(p + "ln_1.weight", (d,)))
            beta.append(ts.take(p + "ln_1.bias", (d,)))
        W_E, W_pos, W_U, head_note, final = gpt2_outer(ckpt, prefix, d, eps)
        return HeadWeights(
            W_Q=torch.stack(wq), W_K=torch.stack(wk), W_V=torch.stack(wv), W_O=torch.stack(wo),
            b_Q=torch.stack(bq), b_K=torch.stack(bk), b_V=torch.stack(bv), b_O=torch.stack(bo),
            W_E=W_E, W_pos=W_pos, W_U=W_U, b_U=None,
            kv_map=tuple(range(H)),
            attn_norm=Norm("layernorm", torch.stack(g), torch.stack(beta), eps),
            final_norm=final,
            norm_placement="pre",
            positions="learned",
            causal=True,
            sliding_window=(None,) * L,
            meta=Meta(cls.name, where, ckpt.name, "float32", ts.source_dtypes, (),
                      tuple(checkpoint_notes(ckpt, head_note))),
        )
