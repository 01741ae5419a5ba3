"""CTRL (Salesforce): pre-LayerNorm layers (``layernorm1``, eps 1e-6 whatever the config says)
with separate ``Wq``, ``Wk``, ``Wv`` and ``dense`` projections, all biased; the token embeddings
times ``sqrt(d_model)`` (into ``W_E``); fixed sinusoidal positions, which the model computes rather
than stores: ``W_pos[:, p]`` is ``[sin(p a_0), sin(p a_2), … | cos(p a_1), cos(p a_3), …]`` with
``a_i = 10000^(−2⌊i/2⌋/d)``, computed in float32 as transformers does; a final LayerNorm and a
biased unembedding.
"""

from __future__ import annotations

import math

import torch

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights, Meta, Norm
from ...errors import WeightError
from . import register
from .base import Family, checkpoint_notes, final_layernorm, integer, number, split_cols, split_rows, unembedding
from .gpt2 import gpt2_sizes

#: the LayerNorm before each layer's attention: transformers fixes its eps
LAYER_EPS = 1e-6


def sinusoidal_positions(n: int, d: int) -> torch.Tensor:
    """``(d, n)`` float32: CTRL's table, position ``p`` in column ``p`` (module docstring)."""
    pos = torch.arange(n, dtype=torch.int64).float()[:, None]
    i = torch.arange(d, dtype=torch.int64).float()[None, :]
    angle = pos * (1 / torch.pow(10000, (2 * (i // 2)) / d))
    return torch.cat([torch.sin(angle[:, 0::2]), torch.cos(angle[:, 1::2])], dim=-1).T.contiguous()


@register
class Ctrl(Family):
    name = "ctrl"
    about = "CTRL (Salesforce): pre-LN, embeddings times sqrt(d_model), sinusoidal positions"
    model_types = ("ctrl",)
    architectures = ("CTRLLMHeadModel", "CTRLModel")
    handled = frozenset("n_embd n_layer n_head n_positions layer_norm_epsilon".split())
    ignored = frozenset({"dff"})
    hf_base = "transformer"

    @classmethod
    def hook_points(cls, model):
        """``layernorm1`` reads the residual, ``multi_head_attention`` returns what is added."""
        return [(b.layernorm1, b.multi_head_attention) for b in cls.base_model(model).h]

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where, ts = ckpt.config, ckpt.source, ckpt.tensors
        cls.check_config(cfg, where)
        d, H, L, r = gpt2_sizes(cfg, where)
        n = integer(cfg, where, "n_positions")
        eps = number(cfg, where, "layer_norm_epsilon", default=1e-6, open_low=True)
        prefix = "transformer." if "transformer.w.weight" in ts else ""
        fields: dict[str, list] = {k: [] for k in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O", "g", "beta")}
        for i in range(L):
            p = f"{prefix}h.{i}."
            for x, name in zip("QKV", ("Wq", "Wk", "Wv")):
                fields[f"W_{x}"].append(split_rows(ts.take(f"{p}multi_head_attention.{name}.weight", (d, d)), H, r))
                fields[f"b_{x}"].append(ts.take(f"{p}multi_head_attention.{name}.bias", (d,)).reshape(H, r))
            fields["W_O"].append(split_cols(ts.take(f"{p}multi_head_attention.dense.weight", (d, d)), H, r))
            fields["b_O"].append(ts.take(f"{p}multi_head_attention.dense.bias", (d,)))
            fields["g"].append(ts.take(f"{p}layernorm1.weight", (d,)))
            fields["beta"].append(ts.take(f"{p}layernorm1.bias", (d,)))
        emb = ts.take(prefix + "w.weight")
        if emb.ndim != 2 or emb.shape[1] != d:
            raise WeightError(f"{ts.origin(prefix + 'w.weight')}: 'w.weight' has shape {tuple(emb.shape)}, "
                              f"expected (n_vocab, {d})")
        W_U, head_note = unembedding(ckpt, ["lm_head.weight"], emb)
        b_U = ts.take("lm_head.bias", required=False) if W_U is not None else None
        out = {k: torch.stack(v) for k, v in fields.items()}
        scale = math.sqrt(d)
        notes = checkpoint_notes(ckpt, head_note) + [
            f"W_E includes the embedding scale {scale:g} (sqrt(d_model)); W_U does not",
            f"sinusoidal positions computed as the model computes them, {n} of them",
        ]
        return HeadWeights(
            **{k: v for k, v in out.items() if k not in ("g", "beta")},
            W_E=(emb * scale).T, W_pos=sinusoidal_positions(n, d), W_U=W_U, b_U=b_U,
            kv_map=tuple(range(H)),
            attn_norm=Norm("layernorm", out["g"], out["beta"], LAYER_EPS),
            final_norm=final_layernorm(ts, prefix + "layernorm", d, eps),
            norm_placement="pre",
            positions="learned",
            causal=True,
            sliding_window=(None,) * L,
            meta=Meta(cls.name, where, ckpt.name, "float32", ts.source_dtypes, (), tuple(notes)),
        )
