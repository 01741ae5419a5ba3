"""XLM (``xlm``) and FlauBERT (``flaubert``): post-LayerNorm layers as BERT's, under their own names.

The residual starts as ``LN_emb(token + position)`` (``layer_norm_emb``), and each layer computes
``n = LN_1(x + Attn(x))``, ``h = LN_2(n + MLP(n))``: attention at layer ``l`` reads the residual
itself, which ``layer_norm_emb`` made for layer 0 and the previous layer's ``layer_norm2`` after
that (``attn_norm``'s rows, as for BERT). Positions are a learned table from row 0 (a sinusoidal
one where ``sinusoidal_embeddings`` is set, read as stored). ``causal`` makes the CLM models'
attention causal. The language-modelling head is one linear map of the last layer's output
(``pred_layer.proj``, tied to the embeddings; no final norm): ``W_U`` and ``b_U``. Language
embeddings (``lang_embeddings``, multilingual models) are added only where the caller passes a
language per token, which the model's forward does not do by itself: kept in ``embed_extra['W_lang']``,
not added. Refused: FlauBERT's ``pre_norm`` (its residual would start as a LayerNorm's output,
which no sum of a token column and a position column is) and an adaptive softmax head (``asm``).
"""

from __future__ import annotations

import torch

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights, Meta, Norm
from ...errors import WeightError
from . import register
from .base import Family, checkpoint_notes, number, sizes, split_cols, split_rows, unembedding


@register
class Xlm(Family):
    name = "xlm"
    about = "XLM and FlauBERT: BERT's post-LN layers under their own names, learned positions, causal (CLM) or not"
    model_types = ("xlm", "flaubert")
    architectures = ("XLMModel", "XLMWithLMHeadModel", "FlaubertModel", "FlaubertWithLMHeadModel")
    handled = frozenset("emb_dim n_heads n_layers layer_norm_eps causal n_langs use_lang_emb sinusoidal_embeddings "
                        "is_encoder".split())
    ignored = frozenset("dropout gelu_activation embed_init_std init_std n_words bos_index eos_index pad_index "
                        "unk_index mask_index mask_token_id lang_id lang2id id2lang layerdrop summary_type "
                        "summary_use_proj summary_activation summary_proj_to_labels summary_first_dropout "
                        "start_n_top end_n_top".split())
    accept = {
        "is_encoder": lambda v: v in (None, True),  # (transformers builds no XLM decoder)
        "pre_norm": lambda v: not v,
        "asm": lambda v: not v,
    }
    hf_base = "transformer"
    #: the model's layers are no modules of their own (lists of attentions, norms and MLPs side by side), so a
    #: run cannot leave some out
    layers_are_modules = False

    @classmethod
    def hook_points(cls, model):
        """``attentions[l]`` reads the residual (its first argument), ``attentions[l].out_lin`` returns
        what is added (before dropout, the residual and ``layer_norm1[l]``)."""
        return [(a, a.out_lin) for a in cls.base_model(model).attentions]

    @classmethod
    def post_norm_points(cls, model):
        """``LN(x + Attn(x))`` is ``layer_norm1[l]``, ``LN(n + MLP(n))`` is ``layer_norm2[l]``."""
        base = cls.base_model(model)
        return list(zip(base.layer_norm1, base.layer_norm2))

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where, ts = ckpt.config, ckpt.source, ckpt.tensors
        cls.check_config(cfg, where)
        d, H, L, r = sizes(cfg, where, width=("emb_dim",), heads=("n_heads",), layers=("n_layers",))
        eps = number(cfg, where, "layer_norm_eps", default=1e-12, open_low=True)
        prefix = "transformer." if "transformer.embeddings.weight" in ts else ""
        fields: dict[str, list] = {k: [] for k in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O")}
        norms = [f"{prefix}layer_norm_emb"] + [f"{prefix}layer_norm2.{i}" for i in range(L - 1)]
        gains, biases = ([ts.take(f"{n}.{part}", (d,)) for n in norms] for part in ("weight", "bias"))
        for i in range(L):
            p = f"{prefix}attentions.{i}."
            for x, name in zip("QKV", ("q_lin", "k_lin", "v_lin")):
                fields[f"W_{x}"].append(split_rows(ts.take(f"{p}{name}.weight", (d, d)), H, r))
                fields[f"b_{x}"].append(ts.take(f"{p}{name}.bias", (d,)).reshape(H, r))
            fields["W_O"].append(split_cols(ts.take(p + "out_lin.weight", (d, d)), H, r))
            fields["b_O"].append(ts.take(p + "out_lin.bias", (d,)))
        tokens, positions = (cls._table(ts, prefix + name, d) for name in ("embeddings.weight",
                                                                             "position_embeddings.weight"))
        W_U, head_note = unembedding(ckpt, ["pred_layer.proj.weight"], tokens)
        b_U = ts.take("pred_layer.proj.bias", (tokens.shape[0],), required=False) if W_U is not None else None
        lang_name = prefix + "lang_embeddings.weight"
        langs = cls._table(ts, lang_name, d) if lang_name in ts else None
        extra = {} if langs is None else {"W_lang": langs.T}
        causal = bool(cfg.get("causal", False))
        notes = checkpoint_notes(ckpt, head_note) + [
            "post-LN: the residual is renormalised after every sublayer; attention reads it directly",
            "causal language model (causal): attention sees earlier tokens only" if causal else
            "encoder: bidirectional attention",
        ] + ([f"language embeddings (embed_extra['W_lang'], {langs.shape[0]} languages) are added only where a "
              "language is passed per token; not added here"] if langs is not None else []) + (
            ["positions: the sinusoidal table the model was built with (sinusoidal_embeddings), read as stored"]
            if cfg.get("sinusoidal_embeddings") else [])
        return HeadWeights(
            **{k: torch.stack(v) for k, v in fields.items()},
            W_E=tokens.T, W_pos=positions.T, W_U=W_U, b_U=b_U,
            kv_map=tuple(range(H)),
            attn_norm=Norm("layernorm", torch.stack(gains), torch.stack(biases), eps),
            final_norm=None,
            norm_placement="post",
            positions="learned",
            causal=causal,
            sliding_window=(None,) * L,
            embed_extra=extra,
            meta=Meta(cls.name, where, ckpt.name, "float32", ts.source_dtypes, (), tuple(notes)),
        )

    @staticmethod
    def _table(ts, name: str, d: int) -> torch.Tensor:
        """An embedding table ``(rows, d_model)`` as stored, its shape checked."""
        t = ts.take(name)
        if t.ndim != 2 or t.shape[1] != d:
            raise WeightError(f"{ts.origin(name)}: tensor '{name}' has shape {tuple(t.shape)}, expected (rows, {d})")
        return t
