"""GPT-2: pre-LayerNorm, learned absolute positions, fused QKV.

GPT-2 uses ``Conv1D`` layers, ``y = x @ W + b`` with ``W: (in, out)``, the transpose of
``nn.Linear``: ``c_attn.weight`` is ``(d, 3d)`` and its transpose stacks ``W_Q; W_K; W_V``
(rows ``[q heads | k heads | v heads]``); ``c_proj.weight`` is ``(d, d)`` and its transpose
has one ``d × d_head`` block of columns per head (``W_O``).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from ..checkpoint import Checkpoint
from ...errors import WeightError
from ...core.heads import HeadWeights, Meta, Norm, alibi_slopes
from . import register
from .base import Family, checkpoint_notes, final_layernorm, number, sizes, split_cols, split_rows, unembedding


#: GPT-2-style configs' size keys: their own names, and the long ones a GGUF file's metadata gives
GPT2_SIZE_KEYS = frozenset("n_embd n_layer n_head hidden_size num_hidden_layers num_attention_heads".split())


def gpt2_sizes(cfg: dict, where: str) -> tuple[int, int, int, int]:
    """``(d_model, n_heads, n_layers, d_head)`` of a GPT-2-style config (:func:`sizes`), under GPT-2's
    names or the long ones (GGUF files)."""
    return sizes(cfg, where, width=("n_embd", "hidden_size"), heads=("n_head", "num_attention_heads"),
                 layers=("n_layer", "num_hidden_layers"))


def gpt2_outer(ckpt: Checkpoint, prefix: str, d: int, eps: float, learned: bool = True
               ) -> tuple[Tensor, Tensor | None, Tensor | None, str | None, Norm | None]:
    """What GPT-2-like checkpoints (GPT-2, GPT-Neo) keep outside the blocks: ``W_E = wteᵀ``,
    ``W_pos = wpeᵀ`` (None where ``learned`` is false: no position table), the unembedding (``lm_head``, or the
    tied ``wte``) with its note, and the final LayerNorm ``ln_f`` (None when absent)."""
    ts = ckpt.tensors
    wte = ts.take(prefix + "wte.weight")
    wpe = ts.take(prefix + "wpe.weight") if learned else None
    if wte.ndim != 2 or wte.shape[1] != d:
        raise WeightError(f"{ts.origin(prefix + 'wte.weight')}: 'wte.weight' has shape {tuple(wte.shape)}, expected (n_vocab, {d})")
    W_U, head_note = unembedding(ckpt, ["lm_head.weight"], wte)
    return wte.T, None if wpe is None else wpe.T, W_U, head_note, final_layernorm(ts, prefix + "ln_f", d, eps)


def gpt2_blocks(ckpt: Checkpoint, prefix: str, L: int, d: int, heads: tuple[int, int], r: int, eps: float,
                split: Callable[[Tensor, Tensor], tuple], conv1d: bool) -> dict[str, Tensor | Norm]:
    """The heads of GPT-2-like blocks ``{prefix}h.{i}.`` as ``HeadWeights`` fields: ``split(w, b)``
    cuts the fused ``attn.c_attn`` weight ``(rows, d)`` and bias into their q, k and v rows, for
    ``heads = (query heads, K/V heads)``; ``attn.c_proj`` and the LayerNorm ``ln_1`` as GPT-2 keeps
    them. ``conv1d``: weights stored ``(in, out)`` (GPT-2's ``Conv1D``), else ``(out, in)``."""
    ts = ckpt.tensors
    H, G = heads
    rows = H * r + 2 * G * r
    fields: dict[str, list] = {k: [] for k in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O", "g", "beta")}
    for i in range(L):
        p = f"{prefix}h.{i}."
        w = ts.take(p + "attn.c_attn.weight", (d, rows)).T if conv1d else ts.take(p + "attn.c_attn.weight", (rows, d))
        ws, bs = split(w, ts.take(p + "attn.c_attn.bias", (rows,)))
        for x, wx, bx, n in zip("QKV", ws, bs, (H, G, G)):
            fields[f"W_{x}"].append(split_rows(wx, n, r))
            fields[f"b_{x}"].append(bx.reshape(n, r))
        o = ts.take(p + "attn.c_proj.weight", (d, d))
        fields["W_O"].append(split_cols(o.T if conv1d else o, H, r))
        fields["b_O"].append(ts.take(p + "attn.c_proj.bias", (d,)))
        fields["g"].append(ts.take(p + "ln_1.weight", (d,)))
        fields["beta"].append(ts.take(p + "ln_1.bias", (d,)))
    out = {k: torch.stack(v) for k, v in fields.items()}
    return {**{k: v for k, v in out.items() if k not in ("g", "beta")},
            "attn_norm": Norm("layernorm", out["g"], out["beta"], eps)}


def ln1_attn_hooks(cls, model):
    """GPT-2-like blocks (GPT-2, GPT-Neo, GPT-J): ``ln_1`` reads the residual, ``attn`` returns what is added."""
    return [(b.ln_1, b.attn) for b in cls.base_model(model).h]


@register
class GPT2(Family):
    name = "gpt2"
    about = "GPT-2, DistilGPT-2, GPT-SW3: learned positions, fused c_attn"
    model_types = ("gpt2", "gpt-sw3")  # (GPT-SW3: GPT-2's model under its tokenizer's model_type)
    architectures = ("GPT2LMHeadModel", "GPT2Model")
    handled = GPT2_SIZE_KEYS | frozenset("layer_norm_epsilon scale_attn_weights reorder_and_upcast_attn".split())
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
    learned_positions: bool = True  # a position table (wpe); Jais: none, ALiBi (:meth:`position_fields`)

    @classmethod
    def position_fields(cls, cfg: dict, where: str, H: int, r: int) -> tuple[dict, list[str]]:
        """The ``HeadWeights`` fields of the positions (and the logit scale) beside ``W_pos``, and their notes."""
        return {"positions": "learned"}, []

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where, ts = ckpt.config, ckpt.source, ckpt.tensors
        cls.check_config(cfg, where)
        d, H, L, r = gpt2_sizes(cfg, where)
        eps = number(cfg, where, "layer_norm_epsilon", default=1e-5)
        prefix = "transformer." if "transformer.wte.weight" in ts else ""
        thirds = lambda w, b: (w.split(d), b.split(d))  # noqa: E731  rows [q heads | k heads | v heads]
        blocks = gpt2_blocks(ckpt, prefix, L, d, (H, H), r, eps, thirds, conv1d=True)
        W_E, W_pos, W_U, head_note, final = gpt2_outer(ckpt, prefix, d, eps, cls.learned_positions)
        fields, notes = cls.position_fields(cfg, where, H, r)
        return HeadWeights(
            **blocks,
            W_E=W_E, W_pos=W_pos, W_U=W_U, b_U=None,
            kv_map=tuple(range(H)),
            final_norm=final,
            norm_placement="pre",
            **fields,
            causal=True,
            sliding_window=(None,) * L,
            meta=Meta(cls.name, where, ckpt.name, "float32", ts.source_dtypes, (),
                      tuple(checkpoint_notes(ckpt, head_note) + notes)),
        )


@register
class Jais(GPT2):
    """Jais (the first, Inception's) as llama.cpp runs its GGUF files: GPT-2's pre-LayerNorm blocks (a fused ``c_attn``
    and ``c_proj``, both biased) without learned positions: ALiBi, BLOOM's slopes at the maximum bias the file states
    (``alibi_bias_max``), logits at ``1 / d_head`` (muP's); the embedding and output scales, which llama.cpp's
    converter folds into ``token_embd`` and ``output``, read in them. No HuggingFace model type names it here (its model
    is remote code, whose folders keep those scales apart): GGUF files alone are read as it (:attr:`gguf_types`)."""

    name = "jais"
    about = "Jais (GGUF files, as llama.cpp runs them): GPT-2's blocks with ALiBi, logits at 1/d_head"
    model_types = ()
    gguf_types = ("jais_gguf",)
    architectures = ()
    handled = GPT2.handled | {"alibi_bias_max"}
    learned_positions = False

    @classmethod
    def position_fields(cls, cfg: dict, where: str, H: int, r: int) -> tuple[dict, list[str]]:
        """ALiBi at the stated maximum bias, logits at ``1 / d_head``."""
        bias = number(cfg, where, "alibi_bias_max", open_low=True)
        return ({"positions": "alibi", "alibi": alibi_slopes(H, bias).float(), "attn_scale": 1.0 / r},
                [f"ALiBi positions (maximum bias {bias:g}): each head's logits get -m_h (i - j), no position enters "
                 "the residual", f"logits at 1 / d_head = {1.0 / r:g} (muP's)"])
