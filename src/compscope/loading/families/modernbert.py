"""ModernBERT: a pre-LN encoder with rotary positions, global and local layers, and a first layer
that reads the residual without a norm.

The token embeddings pass through a LayerNorm before the first layer (``embeddings.norm``); no
position table is added. That LayerNorm acts on each token alone, so the residual a sequence
starts from is one column per token: ``W_E[:, t] = LN_emb(E[t])``, computed here in float32 as the
model computes it. Layer 0's heads read that residual itself (its ``attn_norm`` is the identity:
``first_layer_unnormed``); every later layer reads a LayerNorm of the residual. Attention is
bidirectional; every ``global_attn_every_n_layers``-th layer (from 0) attends over the whole
sequence, the others within ``local_attention // 2`` tokens on either side (``|i − j| ≤ w/2``,
held as the window ``w/2 + 1``), each layer type with its own rotary base. One fused ``Wqkv``
per layer ([q | k | v], heads in order), an output projection ``Wo``; biases where
``attention_bias`` is set, LayerNorm biases where ``norm_bias`` is. The masked-LM head (a dense
layer, an activation and a LayerNorm before the tied decoder) is no linear unembedding: ``W_U`` is
None, as for the other encoders. ModernBERT's decoders (:class:`ModernBertDecoder`) are the same
layers, causal.
"""

from __future__ import annotations

import torch

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights, Meta, Norm, Rotary
from ...errors import LoadError, UnsupportedModelError
from . import register
from .base import (MAX_LAYERS, MAX_WIDTH, Family, integer, inv_freq, number, rope_accept_of, sizes, split_cols, split_rows,
                   stack)

#: the two layer types and transformers' default rotary base of each (the legacy config key that sets it)
_THETA = {"full_attention": ("global_rope_theta", 160_000.0), "sliding_attention": ("local_rope_theta", 10_000.0)}


@register
class ModernBert(Family):
    name = "modernbert"
    about = ("ModernBERT: a pre-LN encoder, rotary, global and local (both-sided window) layers, its first layer "
             "reading the normed embeddings without a norm of its own")
    model_types = ("modernbert",)
    architectures = ("ModernBertModel", "ModernBertForMaskedLM", "ModernBertForSequenceClassification",
                     "ModernBertForTokenClassification", "ModernBertForQuestionAnswering",
                     "ModernBertForMultipleChoice")
    handled = frozenset("""hidden_size num_attention_heads num_hidden_layers norm_eps norm_bias attention_bias
        global_attn_every_n_layers local_attention global_rope_theta local_rope_theta layer_types""".split())
    ignored = frozenset("""initializer_cutoff_factor cls_token_id embedding_dropout mlp_dropout decoder_bias
        classifier_pooling classifier_bias classifier_activation deterministic_flash_attn sparse_prediction
        sparse_pred_ignore_index reference_compile repad_logits_with_grad""".split())
    accept = {
        "rope_parameters": rope_accept_of(("default",)),
        "rope_scaling": lambda v: v is None,
        "position_embedding_type": lambda v: v in (None, "absolute", "rope"),  # (left in some configs, never read)
        "add_cross_attention": lambda v: not v,
        "is_decoder": lambda v: not v,
    }
    hf_base = "model"
    causal = False

    @classmethod
    def kind_notes(cls, config: dict, local: int) -> list[str]:
        """What the notes say of the attention's direction, window and unembedding."""
        return ["pre-LN encoder: bidirectional attention, no unembedding (W_U is None)",
                f"local layers attend within {local // 2} tokens on either side (local_attention {local})"]

    @classmethod
    def hook_points(cls, model):
        """``attn_norm`` reads the residual (the identity in layer 0), ``attn.Wo`` returns what is
        added (before dropout and the residual)."""
        return [(b.attn_norm, b.attn.Wo) for b in cls.base_model(model).layers]

    @classmethod
    def attention_biases(cls, config: dict) -> tuple[bool, bool]:
        on = bool(config.get("attention_bias") or False)
        return on, on

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str) -> list[str]:
        """As ``layer_types`` lists them (transformers 5), else every ``global_attn_every_n_layers``-th
        layer from 0 global (both versions' rule); where both are given they must agree, since
        transformers 4 reads the second and 5 the first."""
        every = integer(config, where, "global_attn_every_n_layers", default=3, high=MAX_LAYERS)
        rule = ["full_attention" if i % every == 0 else "sliding_attention" for i in range(n_layers)]
        listed = config.get("layer_types")
        if listed is None:
            return rule
        if not isinstance(listed, list) or len(listed) != n_layers or any(t not in _THETA for t in listed):
            raise LoadError(f"{where}: config key 'layer_types' = {listed!r} is not a list of {n_layers} layer types "
                            f"({' or '.join(_THETA)})")
        if "global_attn_every_n_layers" in config and listed != rule:
            raise UnsupportedModelError(
                f"{where}: config key 'layer_types' = {listed!r} differs from every {every}th layer global "
                "(global_attn_every_n_layers): transformers 4 and 5 would build different models")
        return listed

    @classmethod
    def rotary_settings(cls, config: dict, layer_type: str) -> dict:
        """One layer type's rope settings: ``rope_parameters[type]`` (transformers 5), else its legacy
        base key, else transformers' default for that type."""
        params = config.get("rope_parameters")
        if isinstance(params, dict) and isinstance(params.get(layer_type), dict):
            out = dict(params[layer_type])
            out.setdefault("rope_theta", config.get(_THETA[layer_type][0]) or _THETA[layer_type][1])
            return out
        key, default = _THETA[layer_type]
        return {"rope_theta": config.get(key) if config.get(key) is not None else default, "rope_type": "default"}

    @classmethod
    def projections(cls, ts, p: str, d: int) -> tuple[tuple, tuple]:
        """A layer's query, key and value weights ``(d, d)`` each and their biases (None where absent):
        one fused ``attn.Wqkv``, rows ``[q | k | v]``."""
        qkv = ts.take(p + "attn.Wqkv.weight", (3 * d, d))
        b = ts.take(p + "attn.Wqkv.bias", (3 * d,), required=False)
        return qkv.split(d), (None,) * 3 if b is None else b.split(d)

    @classmethod
    def window(cls, local: int) -> int:
        """The window of a local layer, ``|i − j| < w``: ``local_attention // 2`` tokens on either side."""
        return local // 2 + 1

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where, ts = ckpt.config, ckpt.source, ckpt.tensors
        cls.check_config(cfg, where)
        d, H, L, r = sizes(cfg, where)
        eps = number(cfg, where, "norm_eps", default=1e-5, open_low=True)
        local = integer(cfg, where, "local_attention", default=128, low=2, high=MAX_WIDTH)
        types = cls.layer_types(cfg, L, where)
        prefix = next((p for p in ("model.", "text_model.") if f"{p}embeddings.tok_embeddings.weight" in ts), "")  # (a
        # ModernVBERT's: its text encoder as text_model)
        norm_bias = bool(cfg.get("norm_bias") or False)
        notes = list(ckpt.notes)

        def layernorm(name: str) -> tuple:
            w = ts.take(f"{name}.weight", (d,))
            b = ts.take(f"{name}.bias", (d,), required=norm_bias)
            if b is not None and not norm_bias:
                notes.append(f"'{name}.bias' not read: norm_bias is false, so transformers builds the LayerNorm "
                             "without a bias and ignores the tensor")
                b = None
            return w, b

        emb = ts.take(f"{prefix}embeddings.tok_embeddings.weight")
        if emb.ndim != 2 or emb.shape[1] != d:
            raise LoadError(f"{ts.origin(prefix + 'embeddings.tok_embeddings.weight')}: shape {tuple(emb.shape)}, "
                            f"expected (n_vocab, {d})")
        ew, eb = layernorm(f"{prefix}embeddings.norm")
        W_E = torch.nn.functional.layer_norm(emb, (d,), ew, eb, eps).T  # (d, n_vocab): the residual of each token

        wq, wk, wv, wo, bq, bk, bv, bo, gains, biases = ([] for _ in range(10))
        for i in range(L):
            p = f"{prefix}layers.{i}."
            weights, bias = cls.projections(ts, p, d)
            for out, part in zip((wq, wk, wv), weights):
                out.append(split_rows(part, H, r))
            for out, part in zip((bq, bk, bv), bias):
                out.append(None if part is None else part.reshape(H, r))
            wo.append(split_cols(ts.take(p + "attn.Wo.weight", (d, d)), H, r))
            bo.append(ts.take(p + "attn.Wo.bias", (d,), required=False))
            if i == 0:  # the identity: no tensors; a row never read
                g, nb = torch.ones(d), (torch.zeros(d) if norm_bias else None)
            else:
                g, nb = layernorm(p + "attn_norm")
            gains.append(g)
            biases.append(nb)
        fw, fb = layernorm(f"{prefix}final_norm")

        attn_bias = torch.stack(biases) if norm_bias else None  # (norm_bias: every layer's taken, row 0 zeros)
        freqs = {t: inv_freq(r, cls.rotary_settings(cfg, t), where, kinds=("default",)) for t in set(types)}
        notes += [
            "W_E is each token's embedding after the embeddings' LayerNorm (float32): the residual the first layer "
            "reads, without a norm of its own (no position table: rotary positions)",
            *cls.kind_notes(cfg, local),
        ]
        return HeadWeights(
            W_Q=torch.stack(wq), W_K=torch.stack(wk), W_V=torch.stack(wv), W_O=torch.stack(wo),
            b_Q=stack(bq), b_K=stack(bk), b_V=stack(bv), b_O=stack(bo),
            W_E=W_E, W_pos=None, W_U=None, b_U=None,
            kv_map=tuple(range(H)),
            attn_norm=Norm("layernorm", torch.stack(gains), attn_bias, eps),
            final_norm=Norm("layernorm", fw[None], None if fb is None else fb[None], eps),
            norm_placement="pre",
            first_layer_unnormed=True,
            rotary=Rotary(r, torch.stack([freqs[t] for t in types])),
            positions="rotary",
            causal=cls.causal,
            sliding_window=tuple(None if t == "full_attention" else cls.window(local) for t in types),
            meta=Meta(cls.name, where, ckpt.name, "float32", ts.source_dtypes, (), tuple(notes)),
        )


@register
class ModernBertDecoder(ModernBert):
    """ModernBERT's decoders (the Ettin models): ModernBERT's layers with separate ``q_proj``,
    ``k_proj``, ``v_proj``, causal, the local layers attending to the ``local_attention // 2`` tokens
    up to the query (``i − j < w``). Rotary bases per layer type as transformers 5 builds them
    (transformers 4 turns both types at the global base: the notes say so where they differ). The LM
    head (a dense layer, an activation and a LayerNorm before the tied decoder) is no linear
    unembedding: ``W_U`` is None."""

    name = "modernbert_decoder"
    about = "ModernBERT's decoders (Ettin): ModernBERT's layers, causal, windows behind the query"
    model_types = ("modernbert-decoder",)
    architectures = ("ModernBertDecoderForCausalLM", "ModernBertDecoderModel",
                     "ModernBertDecoderForSequenceClassification")
    handled = ModernBert.handled | {"sliding_window"}  # (recomputed from local_attention by transformers)
    ignored = ModernBert.ignored | {"use_cache"}
    causal = True

    @classmethod
    def projections(cls, ts, p: str, d: int) -> tuple[tuple, tuple]:
        weights = tuple(ts.take(f"{p}attn.{x}_proj.weight", (d, d)) for x in "qkv")
        return weights, tuple(ts.take(f"{p}attn.{x}_proj.bias", (d,), required=False) for x in "qkv")

    @classmethod
    def window(cls, local: int) -> int:
        return local // 2

    @classmethod
    def kind_notes(cls, config: dict, local: int) -> list[str]:
        full, sliding = (cls.rotary_settings(config, t)["rope_theta"] for t in _THETA)
        return ["pre-LN decoder: causal attention; its LM head is a dense layer, an activation and a LayerNorm before "
                "the tied decoder, no linear unembedding (W_U is None)",
                f"local layers attend to the {local // 2} tokens up to the query (local_attention {local})"] + (
            [f"rotary bases as transformers 5 builds them, {full:g} on global layers and {sliding:g} on local ones; "
             "transformers 4 turns both at the global base"] if full != sliding else [])
