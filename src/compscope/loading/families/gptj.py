"""GPT-J decoders (GPT-J-6B and its descendants, the HF ``gptj`` layout), and CodeGen, GPT-J's block
with another fused projection.

Pre-LayerNorm ``ln_1`` read by attention and MLP at once (a parallel block); separate
``q/k/v_proj`` and ``out_proj`` without biases (read where a model object has them:
TransformerLens's processing adds them; a HF folder's are ignored, as transformers ignores
them); rotary on the first ``rotary_dim`` dims of each head in the interleaved layout (pairs
``2i, 2i+1``, base 10000); logits ``q·k / sqrt(d_head)``; the unembedding ``lm_head`` has a
bias. ``rotary_dim`` unset (rotary frequencies over the whole width, not the head) is refused.
"""

from __future__ import annotations

import torch

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights, Meta, Norm, Rotary
from ...errors import UnsupportedModelError
from . import register
from .gpt2 import ln1_attn_hooks
from .base import (Family, checkpoint_notes, final_layernorm, integer, inv_freq, number, separate_projections, sizes,
                   split_cols, split_rows, stack, token_embedding, unembedding)


@register
class GPTJ(Family):
    name = "gptj"
    about = "GPT-J-6B: parallel block, rotary on interleaved pairs of part of each head"
    model_types = ("gptj",)
    architectures = ("GPTJForCausalLM", "GPTJModel")
    handled = frozenset("n_embd n_head n_layer rotary_dim layer_norm_epsilon".split())
    ignored = frozenset("n_inner embd_pdrop resid_pdrop attn_pdrop n_positions".split())

    hf_base = "transformer"
    position_table = True  # HF's GPT-J looks its rotary sines up in a table of n_positions rows

    hook_points = classmethod(ln1_attn_hooks)

    @classmethod
    def attention_biases(cls, config: dict) -> tuple[bool, bool]:
        return False, False  # transformers builds every projection with bias=False

    @classmethod
    def projections(cls, ts, prefix: str, L: int, H: int, r: int, d: int, where: str) -> dict:
        """``W_Q ... b_O`` of every layer: GPT-J's separate ``q/k/v_proj`` and ``out_proj`` (no biases
        in its own files; processing may add them)."""
        return separate_projections(ts, lambda i: f"{prefix}h.{i}.attn.", L, H, H, r, d)

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where, ts = ckpt.config, ckpt.source, ckpt.tensors
        cls.check_config(cfg, where)
        d, H, L, r = sizes(cfg, where, width=("n_embd",), heads=("n_head",), layers=("n_layer",))
        if cfg.get("rotary_dim") is None:
            raise UnsupportedModelError(f"{where}: rotary_dim is not set (GPT-J then turns whole heads by frequencies "
                                        "of the model width); not supported")
        rot_dim = integer(cfg, where, "rotary_dim", high=r)
        eps = number(cfg, where, "layer_norm_epsilon", default=1e-5)
        prefix = "transformer." if "transformer.wte.weight" in ts else ""
        attn = cls.projections(ts, prefix, L, H, r, d, where)
        g = [ts.take(f"{prefix}h.{i}.ln_1.weight", (d,)) for i in range(L)]
        beta = [ts.take(f"{prefix}h.{i}.ln_1.bias", (d,)) for i in range(L)]
        emb = token_embedding(ts, prefix + "wte.weight", d)
        W_U, head_note = unembedding(ckpt, ["lm_head.weight"], emb)
        b_U = ts.take("lm_head.bias", (emb.shape[0],), required=False) if W_U is not None else None
        freqs = inv_freq(rot_dim, {"rope_theta": 10000.0}, where)  # GPT-J's fixed base
        notes = checkpoint_notes(ckpt, head_note)
        notes.append("parallel block: attention and MLP of a layer read the same normed residual")
        return HeadWeights(
            **attn,
            W_E=emb.T, W_pos=None, W_U=W_U, b_U=b_U,
            kv_map=tuple(range(H)),
            attn_norm=Norm("layernorm", torch.stack(g), torch.stack(beta), eps),
            final_norm=final_layernorm(ts, prefix + "ln_f", d, eps),
            norm_placement="pre",
            rotary=Rotary(rot_dim, freqs[None].expand(L, -1).contiguous(), "interleaved"),
            positions="rotary",
            causal=True,
            sliding_window=(None,) * L,
            meta=Meta(cls.name, where, ckpt.name, "float32", ts.source_dtypes, (), tuple(notes)),
        )


@register
class CodeGen(GPTJ):
    """CodeGen (Salesforce CodeGen 1, CodeGen-Mono/Multi/NL): GPT-J's block with one fused
    ``qkv_proj`` laid out for the four model-parallel shards it was trained on: its rows are four
    chunks of ``d / 4``, each ``[queries | values | keys]`` of a quarter of the heads' dims, in order;
    ``W_Q`` is the four query parts one after another (likewise ``W_K``, ``W_V``), cut into heads."""

    name = "codegen"
    about = "CodeGen: GPT-J's block, its fused qkv_proj in four shards"
    model_types = ("codegen",)
    architectures = ("CodeGenForCausalLM", "CodeGenModel")
    ignored = GPTJ.ignored | frozenset("n_ctx activation_function".split())
    shards = 4  # transformers' fixed mp_num

    @classmethod
    def projections(cls, ts, prefix: str, L: int, H: int, r: int, d: int, where: str) -> dict:
        if d % cls.shards:
            raise UnsupportedModelError(f"{where}: n_embd = {d} is not a multiple of the {cls.shards} shards CodeGen's "
                                        "fused qkv_proj is laid out in")
        part = d // cls.shards
        w, b = {x: [] for x in "QKVO"}, {x: [] for x in "QKVO"}
        for i in range(L):
            p = f"{prefix}h.{i}.attn."
            chunks = ts.take(p + "qkv_proj.weight", (3 * d, d)).reshape(cls.shards, 3, part, d)  # [q | v | k] each
            bias = ts.take(p + "qkv_proj.bias", (3 * d,), required=False)  # none in CodeGen's files (to_heads drops
            for x, k in (("Q", 0), ("V", 1), ("K", 2)):                    # a folder's: transformers ignores it)
                w[x].append(split_rows(chunks[:, k].reshape(d, d), H, r))
                b[x].append(None if bias is None else bias.reshape(cls.shards, 3, part)[:, k].reshape(H, r))
            w["O"].append(split_cols(ts.take(p + "out_proj.weight", (d, d)), H, r))
            b["O"].append(ts.take(p + "out_proj.bias", (d,), required=False))
        return {**{f"W_{x}": torch.stack(w[x]) for x in "QKVO"}, **{f"b_{x}": stack(b[x]) for x in "QKVO"}}
